"""`sparkdoctor whatif`: a real pip dry run in a real scratch venv against local wheels (no registry),
hypothetical Facts from it, judged by a matrix written here; and the one-line conflict. The slow test
resolves and reads real releases from the registry."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sparkdoctor.facts import Facts
from sparkdoctor.matrix import load
from sparkdoctor.targets.local import resolve_python_target
from sparkdoctor.whatif.hypothetical import hypothetical_facts
from sparkdoctor.whatif.judge import compare
from sparkdoctor.whatif.resolve import ResolveError, resolve_upgrade
from tests.released_server import build_wheel

MATRIX = """
component = "demo"
[[entry]]
id = "demo-old-bug"
title = "old bug"
severity = "error"
action = "configure"
summary = "s"
remedy = "r"
when.packages = {{ "demo" = "<0.2.0" }}
refs = ["https://example.org/x"]

[[entry]]
id = "demo-new-bug"
title = "new bug"
severity = "{severity}"
action = "configure"
summary = "s"
remedy = "r"
when.packages = {{ "demo" = ">=0.2.0" }}
refs = ["https://example.org/x"]
"""


@pytest.fixture
def target(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("0.1.0", "0.2.0"):
        build_wheel(wheels, "demo", v, {"demo/__init__.py": f"VERSION = {v!r}\n".encode()})
    build_wheel(wheels, "extra-dep", "1.0", {"extra_dep/__init__.py": b""})
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "demo==0.1.0"], check=True)
    return python


def facts_of(version: str) -> Facts:
    facts = Facts(tool={"name": "sparkdoctor"})
    facts.packages = {"demo": {"name": "demo", "version": version, "integrity": "modified", "files_modified": ["demo/__init__.py"]}}
    facts.arch = {"value": "sm_121a", "source": "given"}
    return facts


def matrix(tmp_path, severity="error"):
    path = tmp_path / "m.toml"
    path.write_text(textwrap.dedent(MATRIX.format(severity=severity)))
    return load(path)


def test_an_upgrade_is_resolved_by_the_targets_pip_and_judged(tmp_path, target):
    today = facts_of("0.1.0")
    changes = resolve_upgrade(resolve_python_target(target), target, ["demo==0.2.0", "extra-dep"], today)
    assert [(c.name, c.old, c.new) for c in changes] == [("demo", "0.1.0", "0.2.0"), ("extra-dep", None, "1.0")]
    notes: list[str] = []
    predicted = hypothetical_facts(today, changes, None, notes)
    demo = predicted.packages["demo"]  # written as released: today's modified file is replaced
    assert demo["version"] == "0.2.0" and demo["integrity"] == "ok" and demo["files_modified"] == []
    assert today.packages["demo"]["version"] == "0.1.0"  # today's Facts are not touched
    result = compare(today, predicted, matrix(tmp_path), ["demo==0.2.0"], changes, notes)
    assert [f.id for f in result.fixed] == ["demo-old-bug"] and [f.id for f in result.introduced] == ["demo-new-bug"]
    assert result.gate("error")
    assert not compare(facts_of("0.1.0"), predicted, matrix(tmp_path, "warn"), [], changes, notes).gate("error")


def test_a_conflict_is_one_line_and_nothing_to_do_is_no_change(tmp_path, target):
    with pytest.raises(ResolveError, match="cannot be resolved in .*demo==9.9"):
        resolve_upgrade(resolve_python_target(target), target, ["demo==9.9"], facts_of("0.1.0"))
    assert resolve_upgrade(resolve_python_target(target), target, ["demo==0.1.0"], facts_of("0.1.0")) == []


def test_a_constraint_file_of_the_target_is_honoured(tmp_path, target):
    pins = tmp_path / "constraints.txt"
    pins.write_text("demo==0.1.0\n")
    today = facts_of("0.1.0")
    today.constraints = [{"file": str(pins), "requirement": "demo==0.1.0", "name": "demo"}]
    with pytest.raises(ResolveError, match="conflict|cannot be resolved"):
        resolve_upgrade(resolve_python_target(target), target, ["demo==0.2.0"], today)


def test_cutedsl_build_is_predicted_from_the_libs_wheel_written_last():
    from sparkdoctor.whatif.resolve import Change

    today = facts_of("0.1.0")
    today.cutedsl = {"active_build": "libs-base"}
    changes = [Change("nvidia-cutlass-dsl", "4.5.0", "4.5.2"), Change("nvidia-cutlass-dsl-libs-cu13", None, "4.5.2")]
    assert hypothetical_facts(today, changes, None, []).cutedsl["active_build"] == "libs-cu13"


@pytest.mark.slow
def test_capabilities_come_from_the_new_release_files(tmp_path):
    from sparkdoctor.released import Reader
    from sparkdoctor.whatif.hypothetical import released_flags
    from sparkdoctor.whatif.resolve import Change

    reader = Reader(root=tmp_path / "cache")
    notes: list[str] = []
    try:
        caps = hypothetical_facts(facts_of("0.1.0"), [Change("vllm", "0.32.0", "0.33.0")], reader, notes).capabilities
        flags = released_flags(reader, Change("vllm", "0.32.0", "0.33.0"))
    finally:
        reader.close()
    assert flags["vllm"]["version"] == "0.33.0" and "--max-model-len" in flags["flags"] and "--enforce-eager" in flags["flags"]
    assert any(k.startswith("vllm.env.") for k in caps) and "vllm.b12x_moe" in caps, notes
    assert any("capabilities read from vllm-0.33.0" in n for n in notes)


def test_a_recipe_is_judged_today_and_after(tmp_path):
    """The bundled tiny-cpu recipe: the new vLLM drops --enforce-eager and no longer reads
    VLLM_USE_AOT_COMPILE (hand-made flag lists and capabilities standing for two releases' files)."""
    from sparkdoctor.locations import data_dir
    from sparkdoctor.recipes import load as load_recipe
    from sparkdoctor.whatif.judge import compare_recipe

    recipe = load_recipe(str(data_dir("recipes") / "tiny-cpu.toml"), {})
    known = ["--served-model-name", "--max-model-len", "--dtype", "--kv-cache-memory-bytes", "--enforce-eager", "--distributed-executor-backend"]
    today, after = facts_of("0.1.0"), facts_of("0.1.0")
    today.packages["vllm"] = {"name": "vllm", "version": "0.32.0"}
    after.packages["vllm"] = {"name": "vllm", "version": "0.33.0"}
    today.capabilities = {"vllm.env.VLLM_USE_AOT_COMPILE": {"value": "known", "evidence": "vllm/envs.py:1"}}
    after.capabilities = {"vllm.env.VLLM_USE_AOT_COMPILE": {"value": "unknown", "evidence": "vllm/envs.py"}}
    flags_today = {"vllm": {"version": "0.32.0", "root": "/x"}, "flags": known}
    flags_after = {"vllm": {"version": "0.33.0", "root": "/x"}, "flags": [f for f in known if f != "--enforce-eager"]}
    diff = compare_recipe(recipe, load(), today, after, flags_today, flags_after)
    introduced = {f.id for f in diff.introduced}
    assert {"flag-unknown:--enforce-eager", "env-unknown:VLLM_USE_AOT_COMPILE"} <= introduced, diff
    assert not diff.fixed


@pytest.fixture(scope="module")
def here_facts():
    from sparkdoctor.check import CheckRequest, collect
    from sparkdoctor.targets.local import resolve_python_target

    return collect(CheckRequest(target=resolve_python_target(sys.executable), kernels=False)).to_dict()


def test_conclusions_the_upgrade_would_make_stale(tmp_path, here_facts):
    """A real ledger (tests/rerun/ledgerdata.py) with a conclusion fresh on this interpreter's Facts: the
    predicted Facts with another vLLM make it stale, saying what changes."""
    from sparkdoctor.facts import Facts
    from sparkdoctor.ledger import Ledger
    from sparkdoctor.whatif.judge import stale_conclusions
    from sparkdoctor.whatif.resolve import Change
    from tests.rerun.ledgerdata import add_ab, write_recipe

    ledger = Ledger(tmp_path / "ledger.sqlite")
    paths = {"A": write_recipe(tmp_path, "a"), "B": write_recipe(tmp_path, "b")}
    add_ab(ledger, paths, here_facts, {"A": [10.0, 10.1, 9.9], "B": [12.0, 12.1, 11.9]})
    today = Facts.from_dict(here_facts, source="test")
    predicted = hypothetical_facts(today, [Change("vllm", (today.package("vllm") or {}).get("version"), "99.0.0")], None, [])
    python = today.target["python"]
    assert stale_conclusions(ledger, python, today, today) == []
    [stale] = stale_conclusions(ledger, python, today, predicted)
    assert stale.conclusion == "b-vs-a" and any("99.0.0" in str(c.get("text")) for c in stale.changes), stale


def test_the_whatif_command_end_to_end(tmp_path, target, monkeypatch):
    import json
    import os

    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))  # no ledger there: said in a note
    cmd = [sys.executable, "-m", "sparkdoctor", "whatif", "demo==0.2.0", "--python", target, "--no-read", "--arch", "sm_121a",
           "--matrix", str(matrix(tmp_path).files[0]), "-f", "json"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), timeout=600)
    doc = json.loads(res.stdout)
    assert res.returncode == 1, res.stderr  # demo-new-bug (error) is introduced
    assert [c["to"] for c in doc["changes"]] == ["0.2.0"] and [f["id"] for f in doc["introduced"]] == ["demo-new-bug"]
    assert doc["fixed"][0]["id"] == "demo-old-bug" and any("no ledger" in n for n in doc["notes"])
    bad = subprocess.run([*cmd[:4], "demo==9.9", *cmd[5:]], capture_output=True, text=True, env=dict(os.environ), timeout=600)
    assert bad.returncode == 2 and "cannot be resolved" in bad.stderr


def test_a_venv_with_its_own_pip_resolves_with_it(tmp_path, monkeypatch):
    """The target's own pip (not sparkdoctor's) runs the dry run when the target has one."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for v in ("0.1.0", "0.2.0"):
        build_wheel(wheels, "demo", v, {"demo/__init__.py": b""})
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)  # with its own pip
    python = str(venv / "bin" / "python")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    subprocess.run([python, "-m", "pip", "install", "-q", "demo==0.1.0"], check=True, timeout=300)
    seen = []
    target = resolve_python_target(python)
    real = target.run_script
    monkeypatch.setattr(target, "run_script", lambda script, args, timeout, env=None: seen.append((script, args))
                        or real(script, args, timeout, env))
    [change] = resolve_upgrade(target, python, ["demo==0.2.0"], facts_of("0.1.0"))
    assert (change.old, change.new) == ("0.1.0", "0.2.0") and seen
    assert seen[0][0].name == "target_pip_dry.py" and "--pip-from" not in seen[0][1]  # the target's pip, not ours


def test_whatif_run_without_typer(tmp_path, target, monkeypatch):
    """commands.whatif.run: the same answer as the command line, as a Result; the options refused before pip runs."""
    from sparkdoctor.commands.whatif import WhatifCommand, run
    from sparkdoctor.errors import UsageError

    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    options = WhatifCommand(["demo==0.2.0"], python=target, read=False, arch="sm_121a", matrix=tmp_path / "m.toml")
    matrix(tmp_path)
    result = run(options)
    assert (result.kind, result.exit_code) == ("whatif", 1)
    doc = result.data.to_json()
    assert [f["id"] for f in doc["introduced"]] == ["demo-new-bug"] and doc["stale_conclusions"] is None
    with pytest.raises(UsageError, match="ledger .*missing.sqlite: no such file"):
        run(WhatifCommand(["demo==0.2.0"], python=target, ledger=tmp_path / "missing.sqlite"))
    with pytest.raises(UsageError, match="--fail-on fatal"):
        run(WhatifCommand(["demo==0.2.0"], fail_on="fatal"))


def test_no_deps_resolves_only_the_named_distributions(tmp_path, target, monkeypatch):
    """`whatif --no-deps`: for a target installed with `pip install --no-deps`, only what is named changes."""
    import json
    import os
    import zipfile

    wheels = tmp_path / "wheels"
    with zipfile.ZipFile(wheels / "needy-1.0-py3-none-any.whl", "w") as zf:  # a wheel that requires extra-dep
        zf.writestr("needy/__init__.py", "")
        zf.writestr("needy-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: needy\nVersion: 1.0\nRequires-Dist: extra-dep\n")
        zf.writestr("needy-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("needy-1.0.dist-info/RECORD", "")
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))

    def changes(*extra: str) -> list[str]:
        res = subprocess.run([sys.executable, "-m", "sparkdoctor", "whatif", "needy==1.0", "--python", target, "--no-read",
                              "--arch", "sm_121a", "-f", "json", *extra], capture_output=True, text=True, env=dict(os.environ),
                             timeout=600)
        assert res.returncode == 0, res.stderr
        return [c["name"] for c in json.loads(res.stdout)["changes"]]

    assert changes() == ["extra-dep", "needy"]
    assert changes("--no-deps") == ["needy"]


def test_an_index_that_cannot_be_reached_is_one_clear_line_never_no_change(tmp_path, target, monkeypatch):
    from tests.ports import refused_port

    with refused_port() as port, pytest.raises(ResolveError) as err:  # held, never listening: no server can take it
        monkeypatch.delenv("PIP_NO_INDEX")
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
        monkeypatch.setenv("PIP_RETRIES", "0")
        resolve_upgrade(resolve_python_target(target), target, ["idna==3.8"], facts_of("0.1.0"))
    text = str(err.value)
    assert "the package index cannot be reached" in text and f"127.0.0.1:{port}/simple/idna/" in text, text
    assert "Connection refused" in text and "\n" not in text


def test_an_index_that_answers_404_is_no_such_project_not_an_unreachable_index(tmp_path, target, monkeypatch):
    """`whatif nosuchpackage==1.0` said "the package index cannot be reached ... (404 Client Error: Not Found)":
    the index answered; it has no project of that name."""
    import http.server
    import threading

    class NoProjects(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the standard library's name)
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoProjects)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.delenv("PIP_NO_INDEX")
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple")
        monkeypatch.setenv("PIP_RETRIES", "0")
        with pytest.raises(ResolveError) as err:
            resolve_upgrade(resolve_python_target(target), target, ["nosuchpackage-zzzq==1.0"], facts_of("0.1.0"))
    finally:
        server.shutdown()
    text = str(err.value)
    assert "cannot be reached" not in text and "cannot be resolved" in text and "no such project" in text, text


# ---- nothing in SPEC becomes a pip option, and no package's code runs (issue 40) ----------------------------------
def _whatif(target: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    import os

    # wide enough that no path is folded mid-word, however deep the machine's TMPDIR is
    env = dict(os.environ, SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="1000")
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "whatif", "--python", target, "--no-read", "--arch", "sm_121a",
                           *args], capture_output=True, text=True, env=env, timeout=600)


def test_a_spec_that_starts_with_a_dash_is_refused_and_never_reaches_pip(tmp_path, target):
    from sparkdoctor.whatif.resolve import dry_run_argv

    log = tmp_path / "pip.log"
    res = _whatif(target, tmp_path, "--", f"--log={log}", "demo==0.2.0")
    assert res.returncode == 2 and not log.exists(), (res.returncode, res.stderr)
    assert "a requirement cannot start with '-'" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    secret = tmp_path / "secret.txt"
    secret.write_text("top-secret-line\n")
    res = _whatif(target, tmp_path, "--", "-r", str(secret))
    assert res.returncode == 2 and "top-secret-line" not in res.stdout + res.stderr, res.stderr
    argv = dry_run_argv(["pip"], ["demo==0.2.0", "x"], ["c.txt"])  # every command line ends its options before the requirements
    assert argv[argv.index("--"):] == ["--", "demo==0.2.0", "x"] and argv.index("-c") < argv.index("--")


def _sdist_running_code(folder, marker) -> None:
    """demo 0.3.0 as a source distribution only, whose build backend (in the sdist) writes `marker` when it runs."""
    import io
    import tarfile

    files = {
        "demo-0.3.0/pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "demo-0.3.0/backend.py": f"open({str(marker)!r}, 'w').write('ran')\n",
        "demo-0.3.0/PKG-INFO": "Metadata-Version: 2.1\nName: demo\nVersion: 0.3.0\n",
    }
    with tarfile.open(folder / "demo-0.3.0.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_a_release_with_only_a_source_distribution_is_never_built(tmp_path, target):
    marker = tmp_path / "code-ran"
    _sdist_running_code(tmp_path / "wheels", marker)
    res = _whatif(target, tmp_path, "demo==0.3.0")
    assert res.returncode == 2 and not marker.exists(), (res.returncode, res.stderr)
    assert "demo==0.3.0: no release that fits has a wheel" in res.stderr and "(releases with one: 0.1.0, 0.2.0)" in res.stderr, res.stderr
    import zipfile

    with zipfile.ZipFile(tmp_path / "wheels" / "needs_new_demo-1.0-py3-none-any.whl", "w") as zf:  # a dependency with only an sdist
        zf.writestr("needs_new_demo/__init__.py", "")
        zf.writestr("needs_new_demo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: needs-new-demo\nVersion: 1.0\nRequires-Dist: demo>=0.3\n")
        zf.writestr("needs_new_demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr("needs_new_demo-1.0.dist-info/RECORD", "")
    res = _whatif(target, tmp_path, "needs-new-demo==1.0")
    assert res.returncode == 2 and not marker.exists(), (res.returncode, res.stderr)
    assert "demo>=0.3: no release that fits has a wheel" in res.stderr and "(releases with one: 0.1.0, 0.2.0)" in res.stderr, res.stderr
    url = f"demo @ {(tmp_path / 'wheels' / 'demo-0.3.0.tar.gz').as_uri()}"
    res = _whatif(target, tmp_path, url)
    assert res.returncode == 2 and not marker.exists() and "--allow-url" in res.stderr, res.stderr
    res = _whatif(target, tmp_path, url, "--allow-url")  # pip builds a direct sdist even under --only-binary :all:
    assert res.returncode == 2 and not marker.exists() and "only a wheel's URL can be judged" in res.stderr, res.stderr
    wheel = f"demo @ {(tmp_path / 'wheels' / 'demo-0.2.0-py3-none-any.whl').as_uri()}"
    res = _whatif(target, tmp_path, wheel, "--allow-url", "-f", "json")
    assert res.returncode == 0 and '"to": "0.2.0"' in res.stdout.replace("\n", " "), res.stderr
    for path in ("./demo", str(tmp_path / "wheels" / "demo-0.3.0.tar.gz")):
        res = _whatif(target, tmp_path, path)
        assert res.returncode == 2 and "not a requirement" in res.stderr and not marker.exists(), res.stderr
    # a bare file name parses as a requirement NAME (packaging), and pip installs the file of that name in the working
    # folder, building it even under --only-binary :all:: `whatif demo-0.3.0.tar.gz` ran the sdist's backend
    import os

    here = os.getcwd()
    os.chdir(tmp_path / "wheels")
    try:
        for name in ("demo-0.3.0.tar.gz", "DEMO-0.3.0.TAR.GZ", "demo-0.3.0.zip"):
            res = _whatif(target, tmp_path, name)
            assert res.returncode == 2 and "read by pip as a local file" in res.stderr and not marker.exists(), res.stderr
    finally:
        os.chdir(here)


def test_a_constraint_file_that_asks_for_a_build_never_gets_one(tmp_path, target, monkeypatch):
    """A constraint file's option lines outrank pip's command line: PIP_CONSTRAINT (or pip's config) naming a file with
    `--no-binary demo` took demo out of `--only-binary :all:`, and pip built the sdist, running its backend. Now pip's
    dry run starts no process at all (an audit hook in target_pip_dry.py): the build is refused, one line, exit 2."""
    marker = tmp_path / "code-ran"
    _sdist_running_code(tmp_path / "wheels", marker)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("--no-binary demo\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(constraints))
    res = _whatif(target, tmp_path, "demo==0.3.0")
    assert res.returncode == 2 and not marker.exists(), (res.returncode, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1 and "starts no process" in res.stderr, res.stderr
    res = _whatif(target, tmp_path, "extra-dep==1.0", "-f", "json")  # a wheel is resolved as before
    assert res.returncode == 0 and '"to": "1.0"' in res.stdout.replace("\n", " ") and not marker.exists(), res.stderr


def test_a_version_that_does_not_exist_is_no_such_release_not_a_missing_wheel(tmp_path, target):
    """`whatif six==99.0` said "no release that fits has a wheel ... whatif reads wheels only": no release 99.0
    exists at all. pip lists the same versions for a release that is an sdist only, so its -vv run (the files it
    skipped) tells them apart; the wheels message stays for the sdist-only release."""
    (tmp_path / "wheels" / "demo-0.3.0.tar.gz").write_bytes(b"")  # a release there as a source distribution only
    res = _whatif(target, tmp_path, "demo==99.0")
    err = " ".join(res.stderr.split())
    assert res.returncode == 2 and "demo==99.0: no such release; pip found 2 versions, nearest 0.2.0, newest 0.2.0" in err, err
    assert "wheel" not in err, err
    res = _whatif(target, tmp_path, "demo==0.3.0")
    assert res.returncode == 2 and "demo==0.3.0: no release that fits has a wheel" in " ".join(res.stderr.split()), res.stderr


def test_no_such_release_is_read_from_pips_output_and_names_the_nearest_versions(monkeypatch):
    """pip's output fed as six==99.0 gives it on PyPI (no network): no such release, the nearest and newest versions
    pip listed; the same output with a skipped sdist of a fitting release keeps the wheels message."""
    from sparkdoctor.proc import ProcResult
    from sparkdoctor.whatif import resolve

    listed = "1.0.0, 1.1.0, 1.16.0, 1.17.0"
    loud = ProcResult([], 1, "", "ERROR: Could not find a version that satisfies the requirement six==99.0 "
                      f"(from versions: {listed})\nERROR: No matching distribution found for six==99.0\n", 0.1)
    skipped = ("Skipping link: No sources permitted for six: https://files.example/six-{v}.tar.gz#sha256=ab "
               "(from https://pypi.org/simple/six/) (requires-python:>=2.7)\n")
    calls = []

    def fake_run(argv, timeout):
        calls.append(argv)
        return ProcResult(argv, 1, "", loud.stderr + ("" if "-vv" not in argv else skipped.format(v="1.17.0")), 0.1)

    class Target:
        run_script = staticmethod(lambda script, args, timeout, env=None: fake_run(args, timeout))

    with pytest.raises(ResolveError) as err:
        resolve.resolve_upgrade(Target(), "/venv/bin/python", ["six==99.0"], facts_of("0.1.0"))  # type: ignore[arg-type]
    assert "six==99.0: no such release; pip found 4 versions, nearest 1.17.0, newest 1.17.0" in str(err.value), err.value
    assert "wheel" not in str(err.value) and any("-vv" in argv for argv in calls)
    debug = ProcResult([], 1, "", skipped.format(v="99.0"), 0.1)
    assert "no release that fits has a wheel" in resolve._no_wheel(loud, debug)
    assert "nearest 1.1.0, 1.16.0" in resolve._no_wheel(loud.__class__([], 1, "", loud.stderr.replace("99.0", "1.2"), 0.1),
                                                          ProcResult([], 1, "", "", 0.1))


def test_the_console_has_a_header_a_remedy_and_keeps_brackets(tmp_path, target):
    """whatif's console: the target, spec and installer on top; what to do for an introduced finding; a title's
    `[cu13]` printed as written (it is not rich markup)."""
    path = tmp_path / "brackets.toml"
    path.write_text(textwrap.dedent(MATRIX.format(severity="error")).replace('title = "new bug"', 'title = "new bug of demo[cu13]"')
                    .replace('remedy = "r"', 'remedy = "pip install \\"demo[cu13]==0.1.0\\""'))
    res = _whatif(target, tmp_path, "demo==0.2.0", "--matrix", str(path))
    text = " ".join(res.stdout.split())  # as read: the console wraps long lines
    assert res.returncode == 1, res.stderr
    assert text.startswith(f"whatif demo==0.2.0 · target {target} · resolved by ") and "-m pip" in text.split("·")[2], text
    assert "introduced [error] demo-new-bug: new bug of demo[cu13]" in text, text
    assert 'what to do: pip install "demo[cu13]==0.1.0"' in text, text


@pytest.mark.slow
def test_a_recipes_env_findings_are_kept_shown_and_gate_with_strict(tmp_path, vllm032_venv):
    """`whatif --recipe` reads the capabilities with the recipe's env, as `recipe check` does: a VLLM_* variable
    the installed vLLM does not read is an env-unknown finding today and after (shown, not only counted), and
    --strict fails on it (and on whatever else stays at or above --fail-on)."""
    import json

    python = str(vllm032_venv / "bin" / "python")
    recipe = tmp_path / "knob.toml"
    recipe.write_text('schema = 1\nname = "knob"\ndescription = "d"\ncommand = ["vllm", "serve", "some/model"]\n\n'
                      '[env]\nVLLM_NO_SUCH_KNOB = "1"\n')
    args = ["nvidia-cutlass-dsl==4.8.0", "--recipe", str(recipe), "--fail-on", "warn"]
    res = _whatif(python, tmp_path, *args, "-f", "json")
    doc = json.loads(res.stdout)
    assert "env-unknown:VLLM_NO_SUCH_KNOB" in {r["id"] for r in doc["recipe"]["unchanged"]}, doc["recipe"]
    assert res.returncode == 0, res.stderr  # nothing introduced
    strict = _whatif(python, tmp_path, *args, "--strict")
    assert strict.returncode == 1, strict.stderr
    assert "unchanged [warn] env-unknown:VLLM_NO_SUCH_KNOB" in " ".join(strict.stdout.split()), strict.stdout


def test_cutedsl_build_after_an_upgrade_to_46_or_later_is_the_flavour_the_loader_picks():
    """Undoing the 4.8.1 -> 4.5.0 downgrade: nvidia-cutlass-dsl 4.8.1's .pth puts dsl_packages first, where libs-cu12 4.8.1
    (left by the downgrade) has the only compiler: libs-cu12 loads, not the libs-base wheel the upgrade writes last."""
    from sparkdoctor.whatif.resolve import Change

    today = facts_of("0.1.0")
    today.packages.update({n: {"name": n, "version": v} for n, v in (
        ("nvidia-cutlass-dsl", "4.5.0"), ("nvidia-cutlass-dsl-libs-base", "4.5.0"), ("nvidia-cutlass-dsl-libs-core", "4.8.1"),
        ("nvidia-cutlass-dsl-libs-cu12", "4.8.1"))})
    today.cutedsl = {"active_build": "libs-base"}
    changes = [Change("nvidia-cutlass-dsl", "4.5.0", "4.8.1"), Change("nvidia-cutlass-dsl-libs-base", "4.5.0", "4.8.1")]
    after = hypothetical_facts(today, changes, None, []).cutedsl
    assert after["active_build"] == "libs-cu12" and "dsl_packages first" in after["evidence"], after
    today.driver = {"cuda": "13.0"}
    today.packages["nvidia-cutlass-dsl-libs-cu13"] = {"name": "nvidia-cutlass-dsl-libs-cu13", "version": "4.8.1"}
    assert hypothetical_facts(today, changes, None, []).cutedsl["active_build"] == "libs-cu13"
    today.driver = {"cuda": "12.9"}
    assert hypothetical_facts(today, changes, None, []).cutedsl["active_build"] == "libs-cu12"


def test_tool_output_is_clipped_at_a_word_boundary_never_mid_word():
    """The probe's installer errors (uv's "...unsatisfiable.: s-dsl-libs-base==4.4.2" was its last 300 characters, cut
    mid-word) and pip's lines are clipped between words, with "..." where text was left out."""
    from sparkdoctor.text import clip

    text = "because nvidia-cutlass-dsl-libs-base==4.4.2 and nvidia-cutlass-dsl==4.5.0 depend on each other, the set is unsatisfiable."
    tail = clip(text, 60, tail=True)
    assert tail.startswith("... ") and text.endswith(tail[4:]) and len(tail) <= 64, tail
    assert tail[4:].split()[0] in text.split(), tail  # a whole word first
    head = clip(text, 60)
    assert head.endswith(" ...") and text.startswith(head[:-4]) and head[:-4].split()[-1] in text.split(), head
    assert clip("short", 60) == "short"


def test_pips_dependency_conflict_lines_are_kept_and_shown():
    """When the dry run prints pip's conflict lines (the sign that the upgrade leaves a mixed family), whatif keeps them
    (JSON pip_warnings) and the console shows them as written."""
    import io

    from rich.console import Console

    from sparkdoctor.views.whatif import render_console
    from sparkdoctor.whatif.resolve import Change, conflict_lines

    stderr = ("ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. "
              "This behaviour is the source of the following dependency conflicts.\n"
              "nvidia-cutlass-dsl-libs-cu12 4.8.1 requires nvidia-cutlass-dsl-libs-base==4.8.1, but you have "
              "nvidia-cutlass-dsl-libs-base 4.5.0 which is incompatible.\nCollecting x\n")
    lines = conflict_lines(stderr)
    assert len(lines) == 2 and lines[1].startswith("nvidia-cutlass-dsl-libs-cu12 4.8.1 requires"), lines
    result = compare(facts_of("0.1.0"), facts_of("0.1.0"), load(), ["nvidia-cutlass-dsl==4.5.0"],
                     [Change("nvidia-cutlass-dsl", "4.8.1", "4.5.0")], [])
    result.pip_warnings = lines
    out = io.StringIO()
    render_console(result, Console(file=out, width=400))
    assert f"pip warns: {lines[1]}" in out.getvalue() and "a mixed family" in out.getvalue(), out.getvalue()
    assert result.to_json()["pip_warnings"] == lines


def test_a_target_that_cannot_be_probed_is_exit_3_before_pip_is_asked(tmp_path):
    """whatif went on to resolve with the target's pip when check could not probe the target: an interpreter that
    exits 1 at once was 'cannot be resolved ...: no output' (exit 2), and a venv whose .pth hangs waited for pip's
    600 s. The README's exit 3 (target not probeable) is what check says of it, and now whatif too."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    res = _whatif(str(python), tmp_path, "demo==0.2.0")
    assert res.returncode == 3 and res.stderr.count("\n") == 1, res.stderr
    assert "the target could not be probed" in res.stderr and "exited 1" in res.stderr, res.stderr


def test_an_output_file_that_cannot_be_written_is_refused_before_pip_runs(tmp_path):
    """`whatif SPEC -o FILE` in a folder that does not exist ran pip's dry run (minutes for vLLM) and read the new
    releases' files before it failed on FILE. It is judged first, as `fix`, `bench` and `rerun` judge it: exit 2, one
    line (no index here: PIP_NO_INDEX, so nothing is asked of one either way)."""
    import os

    env = {**os.environ, "PIP_NO_INDEX": "1", "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-m", "sparkdoctor", "whatif", "six==1.17.0", "--python", sys.executable, "-o",
                          str(tmp_path / "no-such-folder" / "w.json")], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "--output" in res.stderr and "its folder" in res.stderr and "does not exist" in res.stderr, res.stderr


def test_an_upgrade_over_a_vllm_built_here_says_it_replaces_that_build(tmp_path, monkeypatch):
    """vLLM built from source for sm_121a, installed from its own wheel file (`pip install dist/vllm-*.whl`: its
    direct_url.json names the file). Before: whatif showed only `vllm: 0.33.1.dev12+g1234abc.cu130 -> 0.33.0`, never
    that the registry's build would replace the one made here (fix refuses that without --allow-replace)."""
    import json
    import os

    built, wheels = tmp_path / "dist", tmp_path / "wheels"
    built.mkdir()
    wheels.mkdir()
    own = build_wheel(built, "vllm", "0.33.1.dev12+g1234abc.cu130", {"vllm/__init__.py": b""})
    build_wheel(wheels, "vllm", "0.33.0", {"vllm/__init__.py": b""})
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_CONFIG_FILE": "/dev/null",
           "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    subprocess.run([python, "-m", "pip", "install", "-q", str(own)], check=True, timeout=300, env=env)
    res = subprocess.run([sys.executable, "-m", "sparkdoctor", "whatif", "vllm==0.33.0", "--no-deps", "--python", python, "--no-read",
                          "--arch", "sm_121a", "-f", "json"], capture_output=True, text=True, env=env, timeout=600)
    doc = json.loads(res.stdout)
    assert [(c["from"], c["to"]) for c in doc["changes"]] == [("0.33.1.dev12+g1234abc.cu130", "0.33.0")], res.stderr
    [note] = [n for n in doc["notes"] if n.startswith("vllm 0.33.1.dev12")]
    assert f"an install from {own.as_uri()}" in note and "--allow-replace vllm" in note, note


@pytest.mark.parametrize("report", ["[]", '{"install": [1]}', '{"install": [{"metadata": "x"}]}', '{"install": {"a": 1}}', "[" * 100000,
                                    '{"install": [{"metadata": {"name": "demo", "version": "0.2.0"}, "download_info": {"archive_info": 1}}]}'],
                         ids=["list", "row-int", "metadata-str", "install-dict", "deep", "archive-info-int"])
def test_a_report_of_another_shape_is_one_line_never_an_internal_error(report):
    """The target's pip is the target's: a report that parses as JSON of another shape (a list, rows that are not
    objects, 100,000 nested brackets) was an internal AttributeError or RecursionError; now one line, exit 2 (or
    the fields that are there, read)."""
    from sparkdoctor.proc import ProcResult
    from sparkdoctor.whatif import resolve

    class Target:
        run_script = staticmethod(lambda script, args, timeout, env=None: ProcResult(args, 0, report, "", 0.1))

    try:
        changes = resolve.resolve_upgrade(Target(), "/venv/bin/python", ["demo==0.2.0"], facts_of("0.1.0"))  # type: ignore[arg-type]
    except ResolveError as exc:
        assert "\n" not in str(exc) and "pip's --report" in str(exc), exc
    else:
        assert [(c.name, c.new, c.url) for c in changes] == [("demo", "0.2.0", None)]


def test_an_unresolvable_request_of_many_specs_is_one_short_line():
    """1,500 specs of 900 characters (what a shell passes): the one-line error repeated all of them, 1.37 MB on stderr
    and in the JSON error. Now the specs are clipped, pip's reason kept."""
    from sparkdoctor.proc import ProcResult
    from sparkdoctor.whatif import resolve

    specs = [f"p{i}-{'x' * 900}==1.0" for i in range(1500)]
    failed = ProcResult([], 1, "", "ERROR: ResolutionImpossible: boom\n", 0.1)

    class Target:
        run_script = staticmethod(lambda script, args, timeout, env=None: failed)

    with pytest.raises(ResolveError) as err:
        resolve.resolve_upgrade(Target(), "/venv/bin/python", specs, facts_of("0.1.0"))  # type: ignore[arg-type]
    assert len(str(err.value)) < 2000 and "boom" in str(err.value) and str(err.value).startswith("p0-"), str(err.value)[:300]


def test_a_snapshot_of_another_environment_needs_python(tmp_path):
    """`whatif SPEC --facts SNAP` without --python resolved in sparkdoctor's own environment and took the snapshot's
    versions as today: a box with packaging 24.0 asked about packaging==26.4 was "nothing would change" when
    sparkdoctor's own environment had 26.4. A snapshot of another prefix now needs --python (exit 2, pip never runs);
    one of the default interpreter's own prefix goes on as before."""
    import importlib.metadata
    import json
    import os

    here = importlib.metadata.version("packaging")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(PIP_NO_INDEX="1", SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"))
    for prefix, code in (("/elsewhere", 2), (sys.prefix, 0)):
        snap = tmp_path / "snap.json"
        Facts(packages={"packaging": {"name": "packaging", "version": "0.1"}},
              target={"kind": "python", "python": f"{prefix}/bin/python", "prefix": prefix}).save(snap)
        res = subprocess.run([sys.executable, "-m", "sparkdoctor", "whatif", f"packaging=={here}", "--facts", str(snap), "--no-read",
                              "--format", "json"], capture_output=True, text=True, env=env, timeout=600)
        doc = json.loads(res.stdout)
        assert res.returncode == code, (prefix, doc)
        if code == 2:
            assert "--python" in doc["errors"][0]["message"] and "/elsewhere" in doc["errors"][0]["message"], doc
        else:
            assert doc["target"] and Path(doc["target"]).parent.parent.resolve() == Path(sys.prefix).resolve(), doc


def test_a_ledger_that_cannot_be_read_is_said_before_pip_runs(tmp_path, target, monkeypatch):
    """`--ledger` naming a folder or a file that is no database was found after pip's dry run (minutes for vLLM) and
    the new releases' reads; it is opened first now: exit 5, one line, pip never started (PIP_LOG stays unwritten)."""
    log = tmp_path / "pip.log"
    monkeypatch.setenv("PIP_LOG", str(log))
    garbage = tmp_path / "ledger.sqlite"
    garbage.write_bytes(b"not a database" * 400)
    for ledger in (garbage, tmp_path):
        res = _whatif(target, tmp_path, "demo==0.2.0", "--ledger", str(ledger))
        assert res.returncode == 5 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not log.exists(), "pip ran before the ledger was opened"
    res = _whatif(target, tmp_path, "demo==0.2.0")  # no ledger at all: said in a note, as before; pip runs
    assert res.returncode == 0 and "no ledger at" in " ".join(res.stdout.split()) and log.exists(), res.stderr


def test_whatif_says_what_it_is_doing_on_a_terminal(tmp_path, target, monkeypatch):
    """It ran silent for the seconds (minutes for vLLM) pip's dry run and the released files take."""
    import io

    from sparkdoctor import progress as progress_module
    from sparkdoctor.commands.whatif import WhatifCommand, run

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Terminal()
    monkeypatch.setattr(progress_module.sys, "stderr", fake)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    stages: list[str] = []
    real_line = progress_module.progress_line

    @contextlib.contextmanager
    def recorded(*args, **kwargs):
        with real_line(*args, **kwargs) as show:
            yield lambda msg: (stages.append(msg), show(msg))

    monkeypatch.setattr(progress_module, "progress_line", recorded)
    matrix(tmp_path)
    run(WhatifCommand(["demo==0.2.0"], python=target, read=False, arch="sm_121a", matrix=tmp_path / "m.toml"))
    # every stage is said; the terminal draws a stage only if it lasts past a refresh (a probe answered from this
    # process's cache does not), so only pip's dry run, which always takes that long, is looked for on it
    assert stages[:2] == ["probing the target", "resolving the upgrade (a dry run of the target's installer)"], stages
    shown = fake.getvalue()
    assert "whatif: resolving the upgrade" in shown, shown


def test_findings_that_hold_today_and_no_upgrade_touches_are_unchanged_and_kernel_ones_cannot_tell(tmp_path):
    """fix-unfinished (fix's state file) holds before and after any upgrade: unchanged, so `--strict` gates on it. A
    failed kernel probe today is cannot tell: whatif compiles no kernel of the upgrade's files. Before, neither was in
    any list, and whatif said nothing would change while check failed on them."""
    from sparkdoctor.whatif.resolve import Change

    today = facts_of("0.1.0")
    today.target = {"fix_unsettled": "a sparkdoctor fix apply of this target did not finish (journal /j/1.json): the "
                                     "environment may be half-changed; settle it with `sparkdoctor fix --rollback /j/1.json`"}
    today.kernels = {"cutedsl-nvfp4-mma": {"kind": "cutedsl", "status": "fail", "arch": "sm_121a", "runs": [],
                                           "detail": "ptxas error: Unexpected instruction types specified for '_mma'"}}
    changes = [Change("demo", "0.1.0", "0.2.0")]
    predicted = hypothetical_facts(today, changes, None, [])
    result = compare(today, predicted, matrix(tmp_path, "warn"), ["demo==0.2.0"], changes, [])
    assert [r.id for r in result.unchanged] == ["fix-unfinished"]
    assert [r.id for r in result.cannot_tell] == ["probe-cutedsl-nvfp4-mma"]
    assert "--probe compiles" in result.cannot_tell[0].unknown[0]
    assert result.remaining("error") and not result.gate("error")
    assert [r["id"] for r in result.to_json()["unchanged"]] == ["fix-unfinished"]
