"""Evidence levels and file checks: what `matrix validate` refuses, and `matrix verify` over wheels.

Fast: the schema of `evidence`, `files` and `last_verified`, and the file checks, --bisect and the
command end to end over real wheel files built here (zip archives with a dist-info, in a wheel
folder of their own). verify + slow: real releases from the registry, and every bundled entry's
file checks against the released wheels it names (downloaded once into the user's wheel cache, so a
second run reads them from disk).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.verify import files as file_checks
from sparkdoctor.verify.latest_installs import bump_pins
from sparkdoctor.verify.wheels import WheelError, released_versions, wheel

REPO = Path(__file__).resolve().parent.parent


def make_wheel(root: Path, name: str, version: str, members: dict[str, str]) -> Path:
    """A real wheel file: the members given plus a dist-info with METADATA and RECORD."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        for member, text in members.items():
            z.writestr(member, text)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def matrix_file(tmp_path: Path, extra: str, when: str = 'when.packages = { "demo-pkg" = "<2.0" }') -> Path:
    path = tmp_path / "matrix" / "demo.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('component = "demo"\n' + textwrap.dedent(f"""
        [[entry]]
        id = "demo-entry"
        title = "t"
        severity = "warn"
        action = "configure"
        summary = "s"
        remedy = "r"
        {when}
        refs = ["https://example.org/x"]
        """) + textwrap.dedent(extra))
    return path


FILES = """
evidence = "checked"
files.package = "demo-pkg"
files.affected = ["1.0"]
files.fixed = ["2.0"]
files.checks = [
  { path = "demo/*.py", contains = "OLD_SWITCH" },
  { path = "demo/errors.py", contains = "cannot start", fixed = "same" },
]
last_verified = { date = "2026-11-22", versions = "demo-pkg 1.0 / 2.0" }
"""


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    root = tmp_path / "wheels"
    monkeypatch.setenv("SPARKDOCTOR_WHEELS", str(root))
    for version, switch in (("1.0", "OLD_SWITCH = 1"), ("1.5", "OLD_SWITCH = 2"), ("1.8", "NEW = 1"), ("2.0", "NEW = 1")):
        make_wheel(root, "demo-pkg", version, {"demo/envs.py": switch, "demo/errors.py": "raise SystemExit('cannot start')"})
    return root


# ---- schema --------------------------------------------------------------------------------------


def test_evidence_defaults_to_reported_and_shows_the_level(tmp_path):
    m = load(matrix_file(tmp_path, ""))
    assert m.entries[0].evidence == "reported"
    m = load(matrix_file(tmp_path, FILES))
    assert m.entries[0].evidence == "checked" and m.entries[0].last_verified["date"] == "2026-11-22"


@pytest.mark.parametrize("extra, message", [
    ('evidence = "checked"\n', "field 'evidence' is 'checked' but the entry has no check"),
    ('evidence = "reproduced"\n', "field 'evidence' is 'reproduced' but the entry has no verify table"),
    ('evidence = "rumoured"\n', "field 'evidence' must be one of reproduced, checked, reported"),
    (FILES.replace('files.fixed = ["2.0"]', 'files.fixed = ["1.0"]'), "version 1.0 is both affected and fixed"),
    (FILES.replace('contains = "OLD_SWITCH"', 'contains = "OLD_SWITCH", regex = "x"'), "field 'files.checks[0]' needs exactly one of"),
    (FILES.replace('path = "demo/*.py"', 'path = "../etc/passwd"'), "field 'files.checks[0]' needs path = a glob inside the wheel"),
    (FILES.replace('fixed = "same"', 'fixed = "maybe"'), "field 'files.checks[1]': fixed must be one of differs, same, unchecked"),
    (FILES.replace('files.affected = ["1.0"]', 'files.affected = ["one"]'), "field 'files.affected' has 'one', which is not a PEP 440 version"),
    (FILES.replace('date = "2026-11-22"', 'date = "yesterday"'), "field 'last_verified' needs date"),
    (FILES.replace('{ path = "demo/*.py", contains = "OLD_SWITCH" },', '{ path = "demo/*.py", regex = "(" },'), "does not compile"),
    (FILES.replace('{ path = "demo/*.py", contains = "OLD_SWITCH" },', '{ path = "demo/*.py", regex = "[a&&b]" },'), "a future Python reads this set differently"),
])
def test_validate_refuses_claims_without_their_proof(tmp_path, extra, message):
    with pytest.raises(MatrixError, match=None) as caught:
        load(matrix_file(tmp_path, extra))
    assert message in str(caught.value) and "demo.toml: entry demo-entry" in str(caught.value)


def test_matrix_validate_command_names_the_file_entry_and_field(tmp_path):
    path = matrix_file(tmp_path, 'evidence = "checked"\n')
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "validate", str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and not p.stdout
    assert p.stderr.count("\n") == 1 and "demo.toml: entry demo-entry: field 'evidence' is 'checked'" in p.stderr


def test_every_bundled_entry_states_its_evidence():
    text = "\n".join(p.read_text() for p in sorted((REPO / "matrix").glob("*.toml")))
    m = load()
    assert text.count("\nevidence = ") == len(m.entries), "every bundled entry says how it knows (evidence = ...)"
    for e in m.entries:
        if e.evidence in ("checked", "reproduced"):
            assert e.last_verified, f"{e.id}: a {e.evidence} entry records when it was last verified"


# ---- file checks over wheels made here ---------------------------------------------------------------


def test_file_checks_confirm_and_contradict(tmp_path, wheels):
    entry = load(matrix_file(tmp_path, FILES)).entries[0]
    result = file_checks.verify_files(entry)
    assert result.verdict == "confirmed", result.why
    assert [r.version for r in result.runs] == ["1.0", "2.0"]
    wrong = load(matrix_file(tmp_path, FILES.replace('files.fixed = ["2.0"]', 'files.fixed = ["1.5"]'))).entries[0]
    result = file_checks.verify_files(wrong)
    assert result.verdict == "contradicted"
    assert result.why == "fixed 1.5: demo/*.py contains 'OLD_SWITCH' still holds"


def test_lacks_exists_and_regex(tmp_path, wheels):
    extra = FILES.replace('{ path = "demo/*.py", contains = "OLD_SWITCH" },', """
  { path = "demo/envs.py", regex = "OLD_SWITCH = [0-9]" },
  { path = "demo/*.py", lacks = "NEW" },
  { path = "demo/gone.py", exists = false, fixed = "same" },""")
    assert file_checks.verify_files(load(matrix_file(tmp_path, extra)).entries[0]).verdict == "confirmed"


def test_a_regex_that_backtracks_makes_the_run_an_error_not_a_hang(tmp_path, wheels):
    """Two branches that match the same text, repeated, pass the nested-quantifier rule and backtrack
    exponentially when the tail never matches: `matrix verify` spun for minutes on one member of a real
    wheel. Now the match has a time limit and the release's run is an error that names the pattern, so the
    entry's verdict is unknown, not a hang."""
    slow = "(O|O)+~~~"
    extra = FILES.replace('{ path = "demo/*.py", contains = "OLD_SWITCH" },', f'{{ path = "demo/envs.py", regex = "{slow}" }},')
    make_wheel(wheels, "demo-pkg", "1.0", {"demo/envs.py": "O" * 64, "demo/errors.py": "raise SystemExit('cannot start')"})
    started = time.process_time()
    result = file_checks.verify_files(load(matrix_file(tmp_path, extra)).entries[0])
    assert time.process_time() - started < 30, "a backtracking pattern is cut off, not run for minutes of CPU"
    assert result.verdict != "confirmed"
    assert any(r.error and f"demo/envs.py: /{slow}/ could not be matched within" in r.error for r in result.runs), result.runs


def test_a_two_sided_bound_is_bracketed_by_one_fact_per_side(tmp_path, wheels):
    """Affected 1.5 only: the lower side (1.0) differs by the switch's value, the upper side (1.8) by
    the switch being gone. On a fixed version the claim must fail, not every one of its checks."""
    two = FILES.replace('files.affected = ["1.0"]', 'files.affected = ["1.5"]').replace('files.fixed = ["2.0"]', 'files.fixed = ["1.0", "1.8"]')
    two = two.replace('{ path = "demo/*.py", contains = "OLD_SWITCH" },', """
  { path = "demo/envs.py", contains = "OLD_SWITCH" },
  { path = "demo/envs.py", contains = "= 2" },""")
    assert file_checks.verify_files(load(matrix_file(tmp_path, two, when='when.packages = { "demo-pkg" = ">=1.5,<1.8" }')).entries[0]).verdict == "confirmed"
    # a fixed version where the whole claim still holds is a contradiction, naming each check
    wrong = two.replace('files.fixed = ["1.0", "1.8"]', 'files.fixed = ["1.0"]').replace('files.affected = ["1.5"]', 'files.affected = ["1.8"]')
    wrong = wrong.replace('{ path = "demo/envs.py", contains = "= 2" },', '{ path = "demo/envs.py", contains = "= 1" },').replace(
        '{ path = "demo/envs.py", contains = "OLD_SWITCH" },', '{ path = "demo/envs.py", lacks = "OLD_SWITCH = 2" },')
    result = file_checks.verify_files(load(matrix_file(tmp_path, wrong)).entries[0])
    assert result.verdict == "contradicted" and result.why.startswith("fixed 1.0: demo/envs.py lacks 'OLD_SWITCH = 2' still holds"), result.why


def test_every_files_table_of_an_entry_is_verified(tmp_path, wheels):
    """An entry with a bound on two packages gives one table per package ([[entry.files]]); verify
    runs each, and a contradiction in the second names its package."""
    make_wheel(wheels, "pin-pkg", "1.0", {"pin/api.py": "class Old: pass"})
    make_wheel(wheels, "pin-pkg", "2.0", {"pin/api.py": "class New: pass"})
    tables = """
evidence = "checked"

[[entry.files]]
package = "demo-pkg"
affected = ["1.0"]
fixed = ["2.0"]
checks = [{ path = "demo/*.py", contains = "OLD_SWITCH" }]

[[entry.files]]
package = "pin-pkg"
affected = ["1.0"]
fixed = ["2.0"]
checks = [{ path = "pin/api.py", contains = "class Old" }]
"""
    when = 'when.packages = { "demo-pkg" = "<2.0" }\nwhen.constraints = { "pin-pkg" = "<2.0" }'
    result = file_checks.verify_files(load(matrix_file(tmp_path, tables, when=when)).entries[0])
    assert result.verdict == "confirmed" and result.package == "demo-pkg, pin-pkg", result.why
    assert [r.version for r in result.runs] == ["1.0", "2.0", "1.0", "2.0"]
    assert "pin-pkg: 1 check hold on 1.0 and not on 2.0" in result.why
    wrong = load(matrix_file(tmp_path, tables.replace('contains = "class Old"', 'contains = "class"'), when=when)).entries[0]
    result = file_checks.verify_files(wrong)
    assert result.verdict == "contradicted" and result.why == "pin-pkg: fixed 2.0: pin/api.py contains 'class' still holds", result.why


def test_a_missing_wheel_is_an_error_not_a_verdict(tmp_path, wheels, monkeypatch):
    # the bound follows the files table's package: evidence "checked" needs its bound read by a file check
    entry = load(matrix_file(tmp_path, FILES.replace('files.package = "demo-pkg"', 'files.package = "sparkdoctor-no-such-dist"'),
                             when='when.packages = { "sparkdoctor-no-such-dist" = "<2.0" }')).entries[0]
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip must not look further than the wheel folder
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    result = file_checks.verify_files(entry)
    assert result.verdict == "error" and "pip download sparkdoctor-no-such-dist==1.0 failed" in result.why


def test_bisect_finds_the_real_boundary_and_says_it_differs(tmp_path, wheels):
    entry = load(matrix_file(tmp_path, FILES)).entries[0]
    found = file_checks.bisect(entry, versions=("0.9", "1.0", "1.5", "1.8", "2.0"))
    # 1.8 is inside the entry's <2.0 but the claim no longer holds there: the real bound is <1.8
    assert (found["last"], found["first"], found["verdict"]) == ("1.5", "1.8", "differs")
    assert found["why"] == "the claim holds on 1.5, not on 1.8; the entry's bound is demo-pkg <2.0"


def test_bisect_agrees_when_the_bound_is_the_boundary(tmp_path, wheels):
    entry = load(matrix_file(tmp_path, FILES, when='when.packages = { "demo-pkg" = "<1.8" }')).entries[0]
    found = file_checks.bisect(entry, versions=("1.0", "1.5", "1.8", "2.0"))
    assert found["verdict"] == "agrees" and "holds on 1.5, not on 1.8" in found["why"]


def test_wheel_comes_from_the_cache_without_pip(wheels):
    assert wheel("demo_pkg", "1.5").name == "demo_pkg-1.5-py3-none-any.whl"  # any spelling of the name


def test_matrix_verify_files_and_bisect_from_the_command_line(tmp_path, wheels):
    path = matrix_file(tmp_path, FILES, when='when.packages = { "demo-pkg" = "<2.0" }')
    env = {**os.environ, "SPARKDOCTOR_WHEELS": str(wheels)}
    run = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--kind", "files", "--matrix", str(path), "-f", "json"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["summary"] == {"confirmed": 1, "contradicted": 0, "error": 0}
    assert doc["results"][0]["kind"] == "files" and doc["results"][0]["runs"][0]["checks"][0]["holds"] is True
    console = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "demo-entry", "--matrix", str(path)],
                             capture_output=True, text=True, timeout=120, env=env)
    assert console.returncode == 0 and "CONFIRMED    demo-entry  released files of demo-pkg" in console.stdout
    nothing = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "demo-entry", "--kind", "installs", "--matrix", str(path)],
                             capture_output=True, text=True, timeout=120, env=env)
    assert nothing.returncode == 2 and "nothing to verify of kind installs" in nothing.stderr


# ---- real releases -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.verify
def test_released_versions_and_a_real_wheel():
    versions = released_versions("flashinfer-python")
    assert "0.6.6" in versions and "0.6.7" in versions and versions.index("0.6.6") < versions.index("0.6.7")
    path = wheel("flashinfer-python", "0.6.6")
    assert path.name.startswith("flashinfer_python-0.6.6-")
    with pytest.raises(WheelError, match="pip download flashinfer-python==0.0.0.0 failed"):
        wheel("flashinfer-python", "0.0.0.0")


@pytest.mark.slow
@pytest.mark.verify
def test_bisect_a_bundled_entry_against_the_registry():
    """fi-jit-120a-cuda129 was withdrawn on the strength of 0.6.6 vs 0.6.7; its boundary is between them."""
    run = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--bisect", "fi-jit-120a-cuda129", "-f", "json"],
                         capture_output=True, text=True, timeout=900)
    found = json.loads(run.stdout)["bisect"]
    assert (found["last"], found["first"]) == ("0.6.6", "0.6.7"), found


# Whole wheels are downloaded for this machine (pip download, x86_64, this Python): torch 2.15.0, which this entry's
# table names, has no wheel for Python 3.11, so its checks are proved by the released-file reader instead (single
# members of the aarch64 wheels, as `matrix verify --bounds` and `matrix track` read them: docs/evidence/matrix-audit.md).
NOT_HERE = {"torch-cuda-below-128"}
BUNDLED_WITH_FILES = sorted(e.id for e in load().entries if e.files and e.id not in NOT_HERE)


@pytest.mark.slow
@pytest.mark.verify
@pytest.mark.parametrize("entry_id", BUNDLED_WITH_FILES)
def test_bundled_file_checks_hold_on_the_released_wheels(entry_id):
    entry = load().get(entry_id)
    result = file_checks.verify_files(entry)
    assert result.verdict == "confirmed", f"{entry_id}: {result.why}"


def test_bump_pins_moves_every_exact_pin_and_keeps_extras_and_options():
    steps = (("nvidia-cutlass-dsl[cu13]==4.5.0",), ("--force-reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-base==4.5.0"), ("triton>=3.5",))
    bumped = bump_pins(steps, {"nvidia-cutlass-dsl": "4.8.1", "nvidia-cutlass-dsl-libs-base": "4.8.1"}.__getitem__)
    assert bumped == (("nvidia-cutlass-dsl[cu13]==4.8.1",), ("--force-reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-base==4.8.1"), ("triton>=3.5",))


@pytest.mark.slow
@pytest.mark.verify
def test_latest_reads_the_newest_releases_for_files_and_installs():
    """--latest: the MTP entry's file check on the newest vLLM (outside <0.25.0, fixed there), and
    the plain-sm_121 entry's probe with the newest pip ptxas (still assembles for sm_121a)."""
    run = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--latest", "vllm-mtp-nvfp4-bf16-drafter", "-f", "json"],
                         capture_output=True, text=True, timeout=900)
    [found] = json.loads(run.stdout)["latest"]
    assert run.returncode == 0 and found["verdict"] == "holds", found
    assert found["version"] == released_versions("vllm")[-1]
    run = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--latest", "vllm-cmake-sm121a-pre-019", "--kind", "installs", "-f", "json"],
                         capture_output=True, text=True, timeout=900)
    [found] = json.loads(run.stdout)["latest"]
    assert run.returncode == 0 and found["verdict"] == "holds" and found["kind"] == "installs", found
    assert f"nvidia-cuda-nvcc=={released_versions('nvidia-cuda-nvcc')[-1]}" in found["why"]


@pytest.mark.parametrize("content", ["[" * 100_000 + "]" * 100_000, "{", '{"kind": "bounds"'])
def test_validate_bounds_that_is_no_bounds_document_is_one_line(tmp_path, content):
    """`matrix validate --bounds FILE` with deeply nested or broken JSON: one line, exit 2 (the nesting was an
    internal RecursionError)."""
    from sparkdoctor.exitcodes import EXIT_USAGE
    from tests.inproc import invoke

    path = tmp_path / "bounds.json"
    path.write_text(content)
    code, _, error = invoke("matrix", "validate", "--bounds", path)
    assert code == EXIT_USAGE and "not a bounds document" in error and "\n" not in error, error
    code, _, error = invoke("matrix", "validate", "--bounds", tmp_path / "missing.json")
    assert code == EXIT_USAGE and "No such file or directory" in error and "[Errno" not in error, error
