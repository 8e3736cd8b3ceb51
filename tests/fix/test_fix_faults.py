"""Fault injection: the promise is that nothing is lost.

The process SIGKILLs itself at every step boundary of apply, of rollback and of the automatic
rollback (SPARKDOCTOR_FIX_KILL_AT), the installer fails (a version that does not exist, a resolver
conflict), a file turns read-only, a disk is full (tmpfs of 4 MB). After each: either the apply
completed, or a rollback from the journal restores the exact prior state: every dist on disk and
the sha256 of every file of every dist (so `pip freeze --all` and every byte), plus the edited files,
and the byte code of every dist the plan does not name, byte for byte (not one .pyc deleted or
compiled again). The test prints the count and the outcome table.

Every target is an ordinary venv: `python -m venv`, the pip it brings, a plain `pip install`, so pip's
byte code is in it. It is built once per module and copied (`cp -a`) per fault, so each fault starts
from the same bytes in a folder other than the one pip compiled in (the rollback faults start from one apply,
or one killed apply, whose target and journal are frozen and put back at the same paths for each: the bytes a
fresh apply would leave, made once, scenario.Frozen): a .pyc compiled again there holds
that other path, so a byte-code cache that an apply deletes and regenerates (issue 34: fix's folder
tidy-up emptied site-packages/__pycache__) differs from pip's and fails the test. The plan's family
reinstall is of `decorator`, whose module sits directly in site-packages (as the cutlass-dsl family's
.pth does), so that tidy-up runs on site-packages itself in every apply and rollback.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import UnchangedError
from tests.fix import scenario
from tests.fix.scenario import fix_cli

# test_zz_outcome_table counts the faults of every test here, so the module runs on one xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fix-faults")]
KILLED = -9


# The family reinstall of the fault plan: a dist with a top-level module (tests/fix/data's own family, cattrs, has none)
FAMILY = "decorator==5.1.1"
FAMILY_FIX = """schema = 1
id = "attrs-family"
title = "Reinstall decorator cleanly"
summary = "reinstall-family of a dist whose module sits directly in site-packages."

[[action]]
kind = "reinstall-family"
packages = ["decorator"]
requirement = "decorator"
version = "installed"
"""
PLANNED = {"six", "idna", "decorator"}  # the dists the plan installs, restores or reinstalls: their byte code may change


def byte_code_outside(python: Path) -> dict[str, str]:
    """sha256 of every .pyc in site-packages but those of the dists the plan names (pip's, setuptools',
    attrs', cattrs', typing_extensions')."""
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    out = {}
    for pyc in site.rglob("*.pyc"):
        rel = pyc.relative_to(site)
        owner = rel.name.split(".")[0] if rel.parts[0] == "__pycache__" else rel.parts[0]
        if owner not in PLANNED:
            out[str(rel)] = hashlib.sha256(pyc.read_bytes()).hexdigest()
    return out


class Target:
    def __init__(self, root: Path, template: Path, data: Path, small: bool = False):
        root.mkdir(parents=True)
        self.root = root
        scenario.must(["cp", "-a", str(template), str(root / "pip")])  # every byte, mode and mtime: pip's .pyc stay valid
        self.python = root / "pip" / "bin" / "python"
        self.env_file, self.pins = scenario.files_for(root)
        self.small, self.data = small, data
        self.before, self.code = self.state(), byte_code_outside(self.python)
        assert any(k.startswith("__pycache__/typing_extensions.") for k in self.code), "pip compiled no top-level module"

    def state(self) -> dict:
        return scenario.state(self.python, [self.env_file, self.pins])

    def args(self) -> list[str]:
        return ["--env-file", str(self.env_file)]

    def env(self, **extra: str) -> dict:
        env = {"PIP_CONSTRAINT": str(self.pins)}
        env.update(extra)
        return env

    def fix(self, *args: str, **env: str):
        data = scenario.DATA / "small" if self.small else self.data  # small: only the env-file fix, no package step
        return fix_cli(self.python, *self.args(), *args, env=self.env(**env), data=data)

    def lost(self) -> list[str]:
        now = byte_code_outside(self.python)
        changed = [f"byte code {k} {'deleted' if k not in now else 'rewritten'}" for k, v in self.code.items() if now.get(k) != v]
        return scenario.diff(self.before, self.state()) + changed


def _rollback(**env: str):
    return fix_cli(None, "--rollback", env=env)


def _settle(t: Target) -> str:
    """After a fault: what the journal says, then roll back if there is anything to roll back."""
    found = scenario.journals(jr.state_dir())
    if not found:
        return "no journal: unchanged"
    status = jr.load(str(found[0])).status()
    if status == "half-written":
        out = _rollback()
        assert "nothing was changed" in out.stdout, out.stdout + out.stderr
        return "half-written journal: unchanged"
    if status == "rolled back":
        return "auto rolled back"
    if status == "planned":  # complete, no change made: killed right after it, or an action's verify said no
        out = _rollback()
        assert "apply never started" in out.stdout, out.stdout + out.stderr
        return "complete journal, no change made: unchanged"
    if status == "rollback interrupted":
        out = _rollback(PIP_NO_INDEX="1", UV_OFFLINE="1")
        assert out.returncode == 0 and "byte for byte" in out.stdout, out.stdout + out.stderr
        return "rollback interrupted: rolled back again offline"
    if status == "applied":
        after = t.state()
        assert "six-1.17.0.dist-info" in after["dists"] or t.small, "applied means the plan's state"
        assert _rollback().returncode == 0
        return "completed (then rolled back)"
    out = _rollback(PIP_NO_INDEX="1", UV_OFFLINE="1")
    assert out.returncode == 0, out.stdout + out.stderr
    return "interrupted: rolled back offline"


@contextmanager
def tmpfs(path: Path, size: str = "4m"):
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def _fill(folder: Path) -> None:
    with open(folder / "filler", "wb", buffering=0) as fh:  # unbuffered: nothing left to fail at close
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError:
            pass


OUTCOMES: list[tuple[str, str, str]] = []  # (fault, outcome, what was lost), across this module's tests


@pytest.fixture(scope="module")
def built(tmp_path_factory, wheels) -> tuple[Path, Path]:
    """(the template venv, the plan's data): one ordinary pip venv with the base dists and the family's
    `decorator`, built once for the module; the data is tests/fix/data with the family fix on decorator."""
    root = tmp_path_factory.mktemp("fault-template")
    python = scenario.make_target(root, "pip", wheels)
    scenario.must([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
                   "--find-links", str(wheels), FAMILY])
    data = root / "data"
    shutil.copytree(scenario.DATA, data, ignore=shutil.ignore_patterns("small"))
    (data / "fixes" / "attrs-family.toml").write_text(FAMILY_FIX)
    matrix = data / "matrix" / "small.toml"
    text = matrix.read_text()
    for old, new in (("attrs and cattrs are installed", "decorator is installed"), ("{ cattrs = ", "{ decorator = ")):
        assert old in text, old
        text = text.replace(old, new)
    matrix.write_text(text)
    return root / "pip", data


@pytest.fixture
def case(tmp_path, built, monkeypatch):
    """case(small) -> a fresh copy of the template and its own state folder; record(name, t, outcome) appends to the table."""
    n = [0]

    def make(small: bool = False) -> Target:
        n[0] += 1
        monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / f"state{n[0]}"))
        return Target(tmp_path / f"case{n[0]}", *built, small=small)

    return make


def record(name: str, t: Target, outcome: str) -> None:
    lost = t.lost()
    OUTCOMES.append((name, outcome, "; ".join(lost)[:300] if lost else ""))
    assert not lost, f"{name}: {outcome}: LOST {lost}"


def _kill_apply(case, small: bool, count: int) -> None:
    for at in range(1, count + 1):
        t = case(small)
        res = t.fix("--yes", SPARKDOCTOR_FIX_KILL_AT=f"apply:{at}")
        assert res.returncode in (KILLED, 0), res.stdout + res.stderr
        record(f"{'file-only plan' if small else 'full plan'}: SIGKILL at apply boundary {at}", t,
               _settle(t) if res.returncode == KILLED else "completed (no kill: past the last boundary)")


def test_sigkill_at_every_apply_boundary(case):
    """The full plan (6 steps, 14 boundaries) and a plan that only edits a file (9 boundaries)."""
    _kill_apply(case, False, 14)
    _kill_apply(case, True, 9)


def test_sigkill_at_every_rollback_boundary(case):
    """One apply; its target and state folder (the journal) are frozen, and each rollback boundary's case starts from
    them put back at the same paths: the applied state every case would have made again, byte for byte."""
    t = case()
    assert t.fix("--yes").returncode == 0
    applied = scenario.Frozen(t.root, jr.state_dir())
    for at in range(1, 7):
        applied.put_back()
        res = _rollback(SPARKDOCTOR_FIX_KILL_AT=f"rollback:{at}")
        assert res.returncode == KILLED, res.stdout + res.stderr
        record(f"SIGKILL at rollback boundary {at}", t, _settle(t))


def test_sigkill_in_the_rollback_of_an_interrupted_apply(case):
    """Two faults in a row: killed mid-apply (after the first package step), then killed mid-rollback. The killed
    apply runs once; each rollback boundary's case starts from what it left, frozen and put back (as above)."""
    t = case()
    assert t.fix("--yes", SPARKDOCTOR_FIX_KILL_AT="apply:10").returncode == KILLED
    killed = scenario.Frozen(t.root, jr.state_dir())
    for at in (1, 2, 3):
        killed.put_back()
        res = _rollback(SPARKDOCTOR_FIX_KILL_AT=f"rollback:{at}")
        assert res.returncode == KILLED, res.stdout + res.stderr
        record(f"SIGKILL at apply boundary 10, then at rollback boundary {at}", t, _settle(t))


def test_installer_failures_are_rolled_back(case):
    """After the journal: the automatic rollback restores; a SIGKILL inside it is finished by --rollback."""
    # (drift at step 5 would ask pip for `six`: the edited pins file makes that 1.17.0 again, so no drift)
    for fault in ("bad-version:4", "bad-version:5", "bad-version:6", "conflict:4", "conflict:5", "conflict:6", "drift:4"):
        t = case()
        res = t.fix("--yes", SPARKDOCTOR_FIX_FAULT=fault)
        assert res.returncode == 5 and "FAILED" in res.stdout and "Rolled back: nothing changed" in res.stdout, res.stdout + res.stderr
        record(f"installer {fault.replace(':', ' at step ')}", t, _settle(t))
    for at in range(1, 7):
        t = case()
        res = t.fix("--yes", SPARKDOCTOR_FIX_FAULT="bad-version:5", SPARKDOCTOR_FIX_KILL_AT=f"auto-rollback:{at}")
        assert res.returncode == KILLED, res.stdout + res.stderr
        record(f"installer fails, SIGKILL at auto-rollback boundary {at}", t, _settle(t))


def _said(res) -> list[str]:
    """stderr's lines other than progress (`sparkdoctor fix: <phase> ...`, one per phase): the error, in one line."""
    return [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("sparkdoctor fix: ")]


def test_a_version_that_does_not_exist_is_refused_by_the_dry_run(case, tmp_path):
    t = case()
    fixes = tmp_path / "fixes-bad"
    fixes.mkdir()
    for f in (t.data / "fixes").glob("*.toml"):
        (fixes / f.name).write_text(f.read_text().replace("six==1.17.0", "six==0.0.0.dev987654"))
    res = fix_cli(t.python, *t.args(), "--yes", "--fixes", str(fixes), env=t.env(), data=t.data)
    assert res.returncode == 6 and "failed" in res.stderr and len(_said(res)) == 1, res.stderr
    record("nonexistent version in the plan's dry run", t, _settle(t))


def test_full_disks_and_read_only_files(case, tmp_path):
    t = case()
    with tmpfs(tmp_path / "ro-at-plan") as fs:
        env_file = fs / "vllm.env"
        env_file.write_text(scenario.ENV_TEXT)
        subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True, timeout=30)
        t.env_file = env_file
        t.before = t.state()
        res = t.fix("--yes")
        assert res.returncode == 4 and f"{env_file} is not writable" in res.stderr, res.stderr
        record("the env file is on a read-only file system at plan time", t, "refused: nothing changed")
    t = case()
    with tmpfs(tmp_path / "full-state") as full:
        _fill(full)
        res = t.fix("--yes", SPARKDOCTOR_STATE_DIR=str(full))
        assert res.returncode == 6 and "nothing was changed" in res.stderr and len(_said(res)) == 1, res.stderr
        record("the state disk is full (4 MB tmpfs) at the journal", t, "refused: nothing changed")
    for mode in ("read-only", "disk-full"):
        t = case()
        with tmpfs(tmp_path / f"fs-{mode}") as fs:
            env_file = fs / "vllm.env"
            env_file.write_text(scenario.ENV_TEXT)
            t.env_file = env_file
            t.before = t.state()
            _in_process_sabotaged_apply(t, fs, mode)
            record(f"the env file's file system turns {mode} between plan and apply", t, _settle(t))


def test_zz_outcome_table():
    """The count and the outcome table of every fault above (run the whole module: it needs them all)."""
    width = max((len(f) for f, _, _ in OUTCOMES), default=10)
    print(f"\n{len(OUTCOMES)} injected faults")
    for fault, outcome, problem in OUTCOMES:
        print(f"  {fault:<{width}}  {outcome}{'  LOST: ' + problem if problem else ''}")
    print("  " + ", ".join(f"{k}: {v}" for k, v in Counter(o for _, o, _ in OUTCOMES).items()))
    assert len(OUTCOMES) >= 50, "run the whole module: the table counts the faults of every test in it"
    assert [o for o in OUTCOMES if o[2]] == [], "something was lost"


def _in_process_sabotaged_apply(t: Target, fs: Path, mode: str) -> None:
    """Plan, then make the env file unwritable (remount read-only) or its disk full, then apply."""
    from sparkdoctor.check import CheckRequest
    from sparkdoctor.fix.envfile import EnvFileTarget
    from sparkdoctor.fix.pipeline import apply_and_recheck, make_plan
    from sparkdoctor.fix.plan import FixOptions
    from sparkdoctor.targets.local import resolve_python_target

    os.environ["PIP_CONSTRAINT"] = str(t.pins)
    try:
        target = EnvFileTarget(resolve_python_target(str(t.python)), t.env_file)
        request = CheckRequest(target=target, matrix=t.data / "matrix", fixes=t.data / "fixes", kernels=False)
        planned = make_plan(request, FixOptions(env_file=t.env_file))
        assert planned.plan.steps[0].path == str(t.env_file) and not planned.plan.refusals
        if mode == "read-only":
            subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True, timeout=30)
        else:
            _fill(fs)
        if mode == "read-only":  # every action is verified before the first change: refused, nothing done
            with pytest.raises(UnchangedError, match="read-only file system now.*nothing was changed"):
                apply_and_recheck(request, planned)
            return
        result = apply_and_recheck(request, planned)
        assert result.error and str(t.env_file) in result.error and result.rolled_back, result
        assert result.rollback_verified and result.rollback_verified["ok"], result.rollback_verified
    finally:
        del os.environ["PIP_CONSTRAINT"]
