"""Installs pip's own metadata no longer describes, and what check, fix and whatif say of them, on real pip-built venvs.

A tracked component (quack-kernels, a tiny wheel built here and installed by pip from a local folder) is broken the
ways an image clean-up, a hand `rm` or a `cp -a` of a venv leave it:

- its `.dist-info` deleted: `import quack` works, `pip list` has no quack-kernels; check called it "not installed"
  and said nothing (no-metadata-<dist>);
- its RECORD deleted: pip cannot uninstall it ("RECORD file not found"); check showed that only under -v
  (no-record-<dist>), and fix's plan did not say it;
- a copied venv: check warned that its scripts run the old place's interpreter, fix planned for it without a word;
- whatif judged matrix entries only: check's own findings were never in its fixed / introduced / unchanged lists.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import venvs
from tests.fix import scenario
from tests.purewheel import pure_wheel

NAME, MODULE = "quack-kernels", "quack"  # a tracked component (sparkdoctor.facts.TRACKED_PREFIXES)


def make_wheel(folder: Path, version: str) -> Path:
    return pure_wheel(folder, NAME, version, modules={f"{MODULE}/__init__.py": f"__version__ = {version!r}\n".encode(),
                                                      f"{MODULE}/ops.py": b"def gemm():\n    return 1\n"})


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    make_wheel(folder, "0.1.0")
    make_wheel(folder, "0.2.0")
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory, wheels) -> Path:
    """`python3 -m venv` + `pip install quack-kernels==0.1.0` (from the local folder)."""
    venv = tmp_path_factory.mktemp("built") / "venv"
    venvs.create(venv, [f"{NAME}==0.1.0"], ["--no-index", "--find-links", str(wheels)])
    return venv


@pytest.fixture(scope="module")
def _private(built, tmp_path_factory) -> tuple[Path, scenario.Frozen]:
    """The private venv, made once per module (per xdist worker), and its bytes saved."""
    copy = tmp_path_factory.mktemp("private") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(copy)], check=True, timeout=120)
    site = next(built.glob("lib/python*/site-packages"))
    for entry in site.iterdir():
        if entry.name.startswith(("quack", "quack_kernels")):
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, next(copy.glob("lib/python*/site-packages")) / entry.name)
    return copy, scenario.Frozen(copy)


@pytest.fixture
def venv(_private) -> Path:
    """A private venv, made as `python3 -m venv` + the same install would make it here (scripts name this interpreter),
    as every test breaks it. Made once and put back at the same path for each test (`cp -a`: every byte, mode, mtime
    and link as made): `python -m venv` was 4 CPU s a test, most of the file's CPU. No file hash an earlier test's
    check cached there is taken for a put-back file: a record holds the file's ctime, which every copy renews."""
    copy, frozen = _private
    frozen.put_back()
    return copy


def site(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=600,
                          env={**clean, **(env or {})})


def check_json(venv: Path) -> dict:
    done = cli("check", "--python", str(venv), "--no-kernels", "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def findings(document: dict) -> dict[str, dict]:
    return {f["id"]: f for f in document["findings"]}


def pip_of(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=300)


def test_a_package_that_imports_with_its_dist_info_gone_is_a_finding_not_not_installed(venv):
    shutil.rmtree(site(venv) / "quack_kernels-0.1.0.dist-info")
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import quack; print(quack.__version__)"],
                              capture_output=True, text=True, timeout=60)
    assert imported.stdout.strip() == "0.1.0"
    assert NAME not in pip_of(venv, "list").stdout
    document = check_json(venv)
    found = findings(document).get(f"no-metadata-{NAME}")
    assert found is not None, sorted(findings(document))
    assert found["severity"] == "warn"
    assert found["title"] == f"{NAME} 0.1.0: `import quack` finds its files, but no distribution metadata describes them"
    assert f"--force-reinstall --no-deps '{NAME}==0.1.0'" in found["remedy"]
    assert str(site(venv) / MODULE) in found["evidence"][0]
    row = document["facts"]["modules_without_metadata"]
    assert row == [{"module": MODULE, "distribution": NAME, "path": str(site(venv) / MODULE), "version": "0.1.0"}]
    shown = cli("check", "--python", str(venv), "--no-kernels")
    assert f"no-metadata-{NAME}" in shown.stdout


ENTRIES = '''component = "local"

[[entry]]
id = "quack-needs-a-fix"
title = "quack-kernels 0.1 needs a fix"
severity = "warn"
action = "monitor"
summary = "An entry on quack-kernels' version."
remedy = "upgrade quack-kernels"
when.packages = { "quack-kernels" = "<0.2" }
refs = ["https://example.org/a-local-entry"]
evidence = "reported"

[[entry]]
id = "quack-absent"
title = "quack-kernels is not installed"
severity = "info"
action = "monitor"
summary = "An entry on quack-kernels' absence."
remedy = "install quack-kernels"
when.not_installed = ["quack-kernels"]
refs = ["https://example.org/a-local-entry"]
evidence = "reported"
'''


def test_the_entries_of_a_package_without_metadata_are_unknown_not_clear(venv, tmp_path):
    """Its code is there (it imports) at a version pip does not know: an entry on its version or its absence cannot be
    judged. Before, both were clear ("not installed"), and the summary said every entry was checked."""
    matrix = tmp_path / "matrix"
    matrix.mkdir()
    (matrix / "local.toml").write_text(ENTRIES)
    args = ("check", "--python", str(venv), "--no-kernels", "--matrix", str(matrix))
    assert "quack-needs-a-fix" in findings(json.loads(cli(*args, "--format", "json").stdout))  # healthy: judged
    shutil.rmtree(site(venv) / "quack_kernels-0.1.0.dist-info")
    document = json.loads(cli(*args, "--format", "json").stdout)
    assert not [i for i in findings(document) if i.startswith("quack-")]
    unknown = {u["id"]: u for u in document["unknown"]}
    assert sorted(unknown) == ["quack-absent", "quack-needs-a-fix"], document["unknown"]
    assert document["summary"]["unknown"] == 2
    console = cli(*args).stdout
    assert "could not evaluate (2)" in console and "2 unknown" in console, console


def test_a_healthy_install_has_no_such_finding(venv):
    document = check_json(venv)
    assert not [i for i in findings(document) if i.startswith(("no-metadata-", "no-record-"))]
    assert document["facts"]["modules_without_metadata"] == []


def test_a_dist_info_without_record_is_a_warning_and_fix_says_pip_cannot_uninstall_it(venv, wheels):
    (site(venv) / "quack_kernels-0.1.0.dist-info" / "RECORD").unlink()
    assert "RECORD file not found" in pip_of(venv, "uninstall", "-y", NAME).stderr  # what pip says of it
    document = check_json(venv)
    found = findings(document).get(f"no-record-{NAME}")
    assert found is not None, sorted(findings(document))
    assert found["severity"] == "warn"
    assert f"--ignore-installed --no-deps '{NAME}==0.1.0'" in found["remedy"]
    console = cli("check", "--python", str(venv), "--no-kernels")
    # the box's own host findings (an OOM kill since boot, memory pressure) count beside it: the same count as the JSON
    warnings = sum(1 for f in document["findings"] if f["severity"] == "warn")
    assert f"no-record-{NAME}" in console.stdout and f"{warnings} warning" in console.stdout
    fix = cli("fix", "--python", str(venv), "--no-kernels")
    assert (f"Note: {NAME} 0.1.0 has no RECORD: pip cannot uninstall it cleanly, so no fix can replace or remove it; "
            f"write it again first: pip install --ignore-installed --no-deps {NAME}==0.1.0") in fix.stdout.splitlines(), fix.stdout
    # the remedy works: pip writes a RECORD again, and the finding is gone
    assert pip_of(venv, "install", "-q", "--no-index", "--find-links", str(wheels), "--ignore-installed", "--no-deps",
                  f"{NAME}==0.1.0").returncode == 0
    assert f"no-record-{NAME}" not in findings(check_json(venv))


def test_a_record_less_dist_the_matrix_names_is_a_warning_even_if_untracked(venv, tmp_path):
    """The matrix judges a distribution the probe does not track (ray, nvitop, ...): with no RECORD pip cannot upgrade or
    uninstall it either. One nothing names (a Debian-installed one in a system interpreter) gives nothing."""
    pure_wheel(tmp_path, "serve-helper", "1.0", modules={"serve_helper/__init__.py": b""})
    assert pip_of(venv, "install", "-q", "--no-index", "--find-links", str(tmp_path), "serve-helper==1.0").returncode == 0
    (site(venv) / "serve_helper-1.0.dist-info" / "RECORD").unlink()
    matrix = tmp_path / "matrix"
    matrix.mkdir()
    (matrix / "local.toml").write_text(ENTRIES.replace("quack-kernels" + '" = "<0.2"', 'serve-helper" = ">=2"'))
    named = json.loads(cli("check", "--python", str(venv), "--no-kernels", "--matrix", str(matrix), "--format", "json").stdout)
    found = findings(named).get("no-record-serve-helper")
    assert found is not None and found["severity"] == "warn", sorted(findings(named))
    assert "--ignore-installed --no-deps 'serve-helper==1.0'" in found["remedy"]
    assert "no-record-serve-helper" not in findings(check_json(venv))  # the bundled matrix does not name it


def test_fix_shows_the_copied_venv_warning_check_shows(venv, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(venv, moved, symlinks=True)  # `cp -a`: bin/pip still names venv/bin/python
    check = cli("check", "--python", str(moved), "--no-kernels")
    fix = cli("fix", "--python", str(moved), "--no-kernels")
    warned = [line for line in check.stderr.splitlines() if "run another interpreter" in line]
    assert len(warned) == 1, check.stderr
    assert [line for line in fix.stderr.splitlines() if "run another interpreter" in line] == warned, fix.stderr


def test_whatif_lists_checks_own_findings(venv, wheels):
    (site(venv) / MODULE / "__init__.py").unlink()  # files-missing-quack-kernels (error): an upgrade writes them again
    assert f"files-missing-{NAME}" in findings(check_json(venv))
    done = cli("whatif", f"{NAME}==0.2.0", "--python", str(venv), "--no-read", "--format", "json",
               env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)})
    assert done.returncode in (0, 1), done.stderr
    document = json.loads(done.stdout)
    assert [c["name"] for c in document["changes"]] == [NAME]
    assert [r["id"] for r in document["fixed"]] == [f"files-missing-{NAME}"]
    assert not [r for r in document["unchanged"] + document["introduced"] if r["id"].startswith("files-missing-")]
    # what it does not judge it says: check's kernel probes are compiled by neither side without --probe
    assert [n for n in document["notes"] if n.startswith("no kernel probe was compiled")], document["notes"]


def test_whatif_keeps_a_record_less_install_and_says_the_upgrade_stops(venv, wheels):
    (site(venv) / "quack_kernels-0.1.0.dist-info" / "RECORD").unlink()
    done = cli("whatif", f"{NAME}==0.2.0", "--python", str(venv), "--no-read", "--format", "json",
               env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)})
    assert done.returncode in (0, 1), done.stderr
    document = json.loads(done.stdout)
    rows = [r for r in document["unchanged"] if r["id"] == f"no-record-{NAME}"]
    assert rows and rows[0]["title"].startswith(f"{NAME} 0.1.0: "), document["unchanged"]
    assert any("has no RECORD: pip cannot uninstall it, so the upgrade would stop there" in n for n in document["notes"])


def test_the_stack_line_says_what_imports_without_metadata():
    from sparkdoctor.describe import describe_package
    from sparkdoctor.facts import Facts

    facts = Facts.from_dict({"schema": 1, "packages": {}, "modules_without_metadata": [
        {"module": "triton", "distribution": "triton", "path": "/v/site-packages/triton", "version": "3.8.0"}]})
    assert describe_package(facts, "triton") == "no metadata (3.8.0 imports)"
    assert describe_package(facts, "torch") == "not installed"
