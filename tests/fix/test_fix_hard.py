"""Issue 20's `fix` faults (items 1-7), each on a real venv with the real installer: a journal whose
saved wheels or copies were damaged, a damaged journal, a journal that lost its COMPLETE marker, a
child pip that must die with fix, an interrupted apply that check and fix must show, a file of a dist
the plan does not name, journal sizes and pruning, and the exit codes. Each test failed before the
change it names (see docs/changes/fixhard.md)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import JournalError
from tests.fix import scenario
from tests.fix.scenario import as_json, fix_cli
from tests.purewheel import pure_wheel

# test_zz_fault_table counts this module's faults, so the module runs on one xdist worker: its own group, not the
# fault table's (nothing is shared with test_fix_faults.py), so the two long modules can run side by side
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fix-hard")]
OFFLINE = {"PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}
FAULTS: list[tuple[str, str, str]] = []  # (fault injected, outcome, what was left broken): printed by test_zz_fault_table


def record(fault: str, outcome: str, broken: list[str] | None = None) -> None:
    FAULTS.append((fault, outcome, "; ".join(broken or [])))


class AppliedOnce:
    """One target with the full test plan applied, and its state folder (the journal), lent to the tests that only
    damage or move the journal and are refused (the target untouched), so the apply runs once per module, not once
    per test. Before each loan the state folder is put back byte for byte (checked), and the target is checked as
    the apply left it (every dist's files, the edited files, the top-level byte code); a target found otherwise is
    applied again from scratch, so no test depends on another."""

    def __init__(self, factory: pytest.TempPathFactory, wheels: Path):
        self.factory, self.wheels = factory, wheels
        self.made: tuple[Path, tuple, dict[str, scenario.Entry], dict[str, tuple[int, int]]] | None = None

    def lend(self, monkeypatch: pytest.MonkeyPatch) -> tuple:
        if self.made is not None:
            root, result, snap, code = self.made
            monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(root / "state"))
            scenario.put_back(root / "state", snap, skip=("locks",))
            python, env_file, pins, _before, after, _journal = result
            if scenario.state(python, [env_file, pins]) == after and scenario.byte_code(python) == code:
                return result
        root = self.factory.mktemp("applied-once")
        monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(root / "state"))
        result = scenario.applied(root, self.wheels)
        self.made = (root, result, scenario.snapshot(root / "state", skip=("locks",)), scenario.byte_code(result[0]))
        return result


@pytest.fixture(scope="module")
def _applied_once(tmp_path_factory, wheels) -> AppliedOnce:
    return AppliedOnce(tmp_path_factory, wheels)


@pytest.fixture
def applied_once(_applied_once, monkeypatch) -> tuple:
    """(python, env file, pins, state before, state after, journal) of the module's one applied target, put back."""
    return _applied_once.lend(monkeypatch)


def one_line(text: str) -> str:
    """The error: one line (the progress lines before it aside)."""
    lines = [ln for ln in text.strip().splitlines() if not ln.startswith("sparkdoctor fix: ")]
    assert len(lines) == 1 and len(lines[0]) < 600, text
    return lines[0]


# ---- 1. rollback verifies before it destroys ------------------------------------------------------------


@pytest.mark.parametrize("damage", ["deleted", "truncated", "replaced"])
def test_a_damaged_saved_wheel_falls_back_to_the_file_copies(applied_again, wheels, damage):
    python, env_file, pins, before, _after, journal = applied_again
    wheel = next((journal / "wheels").glob("six-1.16.0-*.whl"))
    if damage == "deleted":
        wheel.unlink()
    elif damage == "truncated":
        wheel.write_bytes(wheel.read_bytes()[:1000])
    else:  # another real wheel under its name: right size is not enough, the sha256 tells
        wheel.write_bytes(next(wheels.glob("six-1.17.0-*.whl")).read_bytes())
    back = fix_cli(None, "--rollback", env={**OFFLINE, "PIP_CONSTRAINT": str(pins)})
    assert back.returncode == 0, back.stdout + back.stderr
    assert "restored from the journal's byte copies" in back.stdout and "byte for byte" in back.stdout
    record(f"saved wheel {damage}, then --rollback", "verified before use: restored from the journal's file copies, byte for byte")
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []


def test_a_rollback_that_cannot_restore_changes_nothing(applied_once):
    python, env_file, pins, _before, after, journal = applied_once
    wheel = next((journal / "wheels").glob("six-1.16.0-*.whl"))
    wheel.write_bytes(b"not a wheel")
    data = json.loads((journal / "journal.json").read_text())
    copy = next(r["copy"] for r in data["dist_files"]["six"] if r["copy"] and r["path"].endswith("six.py"))
    (journal / copy).unlink()
    back = fix_cli(None, "--rollback", env=OFFLINE)
    assert back.returncode == 4, back.stdout + back.stderr
    line = one_line(back.stderr)
    assert "cannot restore this target" in line and "six-1.16.0" in line and "nothing was changed" in line
    assert scenario.diff(after, scenario.state(python, [env_file, pins])) == [], "refused before anything changed"
    assert jr.load(journal.name).status() == "applied"
    record("saved wheel and a file copy damaged, then --rollback", "refused before any change (exit 4): target as it was")


def test_a_rollback_whose_target_cannot_be_read_changes_nothing(applied_once):
    """The rollback reads the target's packages once, under its lock, before its first mark: a target whose
    interpreter is gone is exit 3, the journal still applied, nothing changed."""
    python, env_file, pins, _before, after, journal = applied_once
    away = python.with_name(python.name + ".away")
    python.rename(away)
    try:
        back = fix_cli(None, "--rollback", env=OFFLINE)
    finally:
        away.rename(python)
    assert back.returncode == 3, back.stdout + back.stderr
    assert str(python) in one_line(back.stderr)
    assert jr.load(journal.name).status() == "applied"
    assert scenario.diff(after, scenario.state(python, [env_file, pins])) == [], "refused before anything changed"
    record("the target's interpreter gone, then --rollback", "refused before any change (exit 3): journal still applied")


# ---- 2. a damaged journal is never half-executed ----------------------------------------------------------


def _rewrite(journal: Path, body: bytes) -> None:
    """journal.json replaced, with a COMPLETE marker that matches it (the damage the marker cannot see)."""
    (journal / "journal.json").write_bytes(body)
    (journal / "COMPLETE").write_text(jr.sha256_bytes(body) + "\n")


MUTATIONS = [
    ("files", lambda d: d.update(files="x")),
    ("files[0].existed", lambda d: d["files"][0].update(existed="yes")),
    ("files[0].copy", lambda d: d["files"][0].update(copy="../../../../etc/passwd")),
    ("dist_files", lambda d: d.update(dist_files=[])),
    ("dist_files.six[0].path", lambda d: d["dist_files"]["six"][0].update(path=5)),
    ("touched_before.six", lambda d: d["touched_before"].update(six=1.16)),
    ("wheels.six", lambda d: d["wheels"].update(six="../x.whl")),
    ("wheel_files", lambda d: d.update(wheel_files={"a.whl": {"size": "big", "sha256": "x"}})),
    ("plan", lambda d: d["plan"].update(steps=[{"op": "edit"}])),
    ("plan.steps[0].op", lambda d: d["plan"]["steps"][0].update(op="format-disk")),
    ("packages_before[0].version", lambda d: d["packages_before"][0].update(version=None)),
    ("target.python", lambda d: d["target"].update(python=["x"])),
    ("hashes_before", lambda d: d.update(hashes_before=None)),
    ("journal_version", lambda d: d.update(journal_version=True)),
]


def test_a_damaged_journal_is_refused_whole_before_the_first_step(applied_once):
    python, env_file, pins, _before, after, journal = applied_once
    good = (journal / "journal.json").read_bytes()
    refused = []
    for field, mutate in MUTATIONS:
        data = json.loads(good)
        mutate(data)
        _rewrite(journal, json.dumps(data).encode())
        try:
            jr.load(journal.name)
        except JournalError as exc:
            assert field.split("[")[0].split(".")[0] in str(exc), (field, str(exc))
            refused.append(field)
    for field in refused:
        record(f"journal.json field {field} of the wrong type/value (COMPLETE matching)", "refused whole at load: nothing done")
    assert refused == [f for f, _ in MUTATIONS]
    for body in (b"{not json", b"[1, 2]", good[: len(good) // 2]):
        _rewrite(journal, body)
        back = fix_cli(None, "--rollback", env=OFFLINE)
        assert back.returncode == 4 and "damaged" in one_line(back.stderr), back.stdout + back.stderr
        assert scenario.diff(after, scenario.state(python, [env_file, pins])) == [], "nothing half-executed"
        record(f"journal.json replaced by {body[:12]!r}... (COMPLETE matching), then --rollback", "refused (exit 4): nothing done")
    data = json.loads(good)
    data["dist_files"]["six"][0]["path"] = 5
    _rewrite(journal, json.dumps(data).encode())
    back = fix_cli(None, "--rollback", env=OFFLINE)
    assert back.returncode == 4 and "dist_files.six[0].path" in one_line(back.stderr)
    assert scenario.diff(after, scenario.state(python, [env_file, pins])) == []


def test_an_applied_journal_that_lost_its_complete_marker_does_not_say_nothing_changed(applied_once):
    python, env_file, pins, _before, after, journal = applied_once
    (journal / "COMPLETE").unlink()
    back = fix_cli(None, "--rollback", env=OFFLINE)
    assert back.returncode == 4, back.stdout + back.stderr
    line = one_line(back.stderr)
    assert "lost its COMPLETE marker after its apply started" in line and "never started" not in back.stdout + line
    assert scenario.diff(after, scenario.state(python, [env_file, pins])) == []
    assert "damaged" in fix_cli(None, "--history").stdout
    record("COMPLETE marker deleted after apply, then --rollback", "refused (exit 4), says the target may be half-changed")


@pytest.mark.parametrize("what", ["fifo", "folder"])
def test_a_journal_file_that_is_no_regular_file_is_refused_at_once(applied_once, what):
    """journal.json (or COMPLETE, or a state marker) as a FIFO hung `fix --history`, `--rollback` and even a plan
    until something wrote into it; a folder in its place was exit 5 ("the apply failed"), not 4 (damaged)."""
    python, env_file, pins, _before, after, journal = applied_once
    (journal / "journal.json").unlink()
    if what == "fifo":
        os.mkfifo(journal / "journal.json")
    else:
        (journal / "journal.json").mkdir()
    back = fix_cli(None, "--rollback", env=OFFLINE, timeout=120)
    assert not back.timed_out and back.returncode == 4, back.stdout + back.stderr
    assert "cannot read the journal" in one_line(back.stderr)
    listed = fix_cli(None, "--history", env=OFFLINE, timeout=120)
    assert not listed.timed_out and listed.returncode == 0 and "damaged" in listed.stdout, listed.stdout + listed.stderr
    assert scenario.diff(after, scenario.state(python, [env_file, pins])) == []
    record(f"journal.json a {what}, then --rollback and --history", "refused at once (exit 4), listed as damaged")


def test_a_rollback_without_an_id_undoes_the_last_apply_past_newer_journals_that_changed_nothing(applied_once):
    """A SIGKILL while a journal is made leaves a half-written one (copies/ and wheels/, nothing else), and a refused
    verify leaves a planned one: either, newest, made `fix --rollback` say "nothing was changed" and exit 0 while the
    apply before it stayed applied."""
    python, env_file, pins, before, _after, journal = applied_once
    for name in ("29991231-000000-aaaaaa", "29991231-000001-bbbbbb"):
        newer = journal.parent / name
        (newer / "copies").mkdir(parents=True)
        (newer / "wheels").mkdir()
    back = fix_cli(None, "--rollback", env=OFFLINE)
    assert back.returncode == 0 and journal.name in back.stdout + back.stderr, back.stdout + back.stderr
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []
    assert jr.load(journal.name).status() == "rolled back"
    for name in ("29991231-000000-aaaaaa", "29991231-000001-bbbbbb"):
        shutil.rmtree(journal.parent / name)


def test_a_plan_runs_no_package_code_of_the_target(tmp_path, wheels):
    """The plan's pip dry run started pip with site: the target's .pth import lines and sitecustomize.py ran while
    "Dry run: nothing was changed" was printed. Only the install itself runs pip with site now."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    markers = tmp_path / "markers"
    markers.mkdir()
    (site / "zz_evil.pth").write_text(f"import os; open(os.path.join({str(markers)!r}, 'PTH_%d' % os.getpid()), 'w').close()\n")
    (site / "sitecustomize.py").write_text(f"import os\nopen(os.path.join({str(markers)!r}, 'SC_%d' % os.getpid()), 'w').close()\n")
    plan = fix_cli(python, "--format", "json")
    doc = as_json(plan)
    assert plan.returncode == 1 and doc["mode"] == "plan" and doc["plan"]["steps"], plan.stdout + plan.stderr
    assert "planning with pip (dry-run resolution)" in plan.stderr
    assert sorted(os.listdir(markers)) == []
    (site / "zz_evil.pth").unlink()
    (site / "sitecustomize.py").unlink()


def test_a_rollback_never_destroys_edits_made_to_a_file_after_the_apply(applied_once):
    """The apply edited the env file; the user then added a line to it. `fix --rollback` put the journal's copy back
    and said "verified byte for byte": the added line was gone. It refuses now (exit 4), nothing changed."""
    python, env_file, pins, _before, after, _journal = applied_once
    edited = env_file.read_bytes()
    env_file.write_bytes(edited + b"HF_TOKEN=added-after-the-apply\n")
    back = fix_cli(None, "--rollback", env=OFFLINE)
    assert back.returncode == 4, back.stdout + back.stderr
    assert "was changed since the apply, not by it" in one_line(back.stderr)
    assert env_file.read_bytes().endswith(b"HF_TOKEN=added-after-the-apply\n")
    env_file.write_bytes(edited)
    assert scenario.diff(after, scenario.state(python, [env_file, pins])) == [], "nothing else was touched"
    record("an edited file changed again after the apply, then --rollback", "refused (exit 4): the new edits kept")


# ---- 4. an interrupted fix is visible; its children die with it -------------------------------------------

CHILD = textwrap.dedent("""
    import os, signal, sys
    from sparkdoctor import proc
    from sparkdoctor.fix.pdeath import children_die_with_parent
    if sys.argv[1] == "with":
        with children_die_with_parent():
            run = proc.start(["sleep", "120"])
    else:
        run = proc.start(["sleep", "120"])
    print(run.popen.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("mode", ["with", "without"])
def test_the_installer_child_dies_with_fix(mode):
    """SIGKILL of the parent: inside children_die_with_parent (what apply and rollback hold around the
    installer) the child goes with it; outside it (the control: as before) it keeps running."""
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL, out.stderr
    pid = int(out.stdout.split()[0])
    # "with": polled up to a minute for the child to go (a safety net: a loaded machine may be slow to let it die);
    # "without": watched 10 s for a death that must not come
    for _ in range(600 if mode == "with" else 100):
        if not _alive(pid):
            break
        time.sleep(0.1)
    try:
        if mode == "with":
            record("SIGKILL of the process that started the installer", "the child died with it")
        assert _alive(pid) == (mode == "without")
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def check_json(python: Path, env: dict | None = None) -> dict:
    res = scenario.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--no-kernels", "--format", "json"], env=env)
    assert res.stdout, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def _killed_frozen(tmp_path_factory, wheels) -> tuple[Path, tuple, scenario.Frozen]:
    """A uv target whose apply was SIGKILLed at apply boundary 10 (after its first package step), run once; the
    target and state folder frozen. Also: the state before, and check's finding ids before the kill."""
    root = tmp_path_factory.mktemp("killed-frozen")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARKDOCTOR_STATE_DIR", str(root / "state"))
        python = scenario.make_target(root / "target", "uv", wheels)
        env_file, pins = scenario.files_for(root / "target")
        env = {"PIP_CONSTRAINT": str(pins)}
        before = scenario.state(python, [env_file, pins])
        found_before = [f["id"] for f in check_json(python, env)["findings"]]
        killed = fix_cli(python, "--env-file", str(env_file), "--yes", env={**env, "SPARKDOCTOR_FIX_KILL_AT": "apply:10"})
        assert killed.returncode == -9, killed.stdout + killed.stderr
    return root, (python, env_file, pins, env, before, found_before), scenario.Frozen(root / "target", root / "state")


@pytest.fixture
def killed_again(_killed_frozen, monkeypatch) -> tuple:
    """(python, env file, pins, env, state before, check's finding ids before) of the module's one killed apply, its
    target and state folder put back at the same paths for each test, as a fresh killed apply would have left them."""
    root, result, frozen = _killed_frozen
    frozen.put_back()
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(root / "state"))
    return result


def test_an_interrupted_fix_is_visible_to_check_and_fix(killed_again):
    python, env_file, pins, env, before, found_before = killed_again
    assert "fix-unfinished" not in found_before
    (journal,) = scenario.journals(jr.state_dir())
    settle = f"sparkdoctor fix --rollback {journal.name}"
    found = {f["id"]: f for f in check_json(python, env)["findings"]}
    assert found["fix-unfinished"]["severity"] == "error" and settle in found["fix-unfinished"]["remedy"]
    again = fix_cli(python, "--env-file", str(env_file), "--yes", env=env)
    assert again.returncode == 4 and settle in one_line(again.stderr), again.stdout + again.stderr
    small = fix_cli(python, "--yes", env=env, data=scenario.DATA / "small")  # a plan with nothing to do: not "nothing to fix"
    assert small.returncode == 4 and settle in small.stderr, small.stdout + small.stderr
    plan = fix_cli(python, env=env)
    assert f"REFUSED: a sparkdoctor fix apply of this target did not finish (journal {journal.name})" in plan.stdout
    assert fix_cli(None, "--rollback", env={**env, **OFFLINE}).returncode == 0
    assert "fix-unfinished" not in [f["id"] for f in check_json(python, env)["findings"]]
    lost = scenario.diff(before, scenario.state(python, [env_file, pins]))
    record("SIGKILL mid-apply, then check / fix --yes / fix", "check: error finding; fix: refused (exit 4) naming the rollback; rolled back", lost)
    assert lost == []


@pytest.mark.parametrize("damage", ["truncated", "garbage", "folder"])
def test_a_damaged_unsettled_mark_is_no_clean_bill_of_health(killed_again, damage):
    """SIGKILL mid-apply, then the target's state file is damaged (cut short, garbage, a folder in its place): check
    read it as "no mark" and passed (exit 0) on a half-changed target. Now check says a fix may not have finished
    (exit 1), fix finds the interrupted journal and names its rollback, and the rollback settles everything."""
    python, env_file, pins, env, _before, _found_before = killed_again
    (mark,) = (jr.state_dir() / "fix-unsettled").iterdir()
    body = mark.read_bytes()
    mark.unlink()
    if damage == "folder":
        mark.mkdir()
    else:
        mark.write_bytes(body[: len(body) // 2] if damage == "truncated" else b"\x00\xff" * 40)
    res = scenario.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--no-kernels", "--format", "json"], env=env)
    found = {f["id"]: f for f in json.loads(res.stdout)["findings"]}
    assert res.returncode == 1 and str(mark) in found["fix-unfinished"]["evidence"][0], res.stdout[-2000:]
    (journal,) = scenario.journals(jr.state_dir())
    again = fix_cli(python, "--env-file", str(env_file), "--yes", env=env)
    assert again.returncode == 4 and f"sparkdoctor fix --rollback {journal.name}" in one_line(again.stderr)
    if damage == "folder":  # the rollback cannot write its own mark there: one line, nothing changed; the user removes it
        refused = fix_cli(None, "--rollback", env={**env, **OFFLINE})
        assert refused.returncode == 6 and "Is a directory; nothing was changed" in one_line(refused.stderr), refused.stderr
        mark.rmdir()
    assert fix_cli(None, "--rollback", env={**env, **OFFLINE}).returncode == 0
    assert "fix-unfinished" not in [f["id"] for f in check_json(python, env)["findings"]]


def _held(fix: subprocess.Popen, err: Path) -> None:
    """Waits until the fix stops itself at its SPARKDOCTOR_FIX_STOP_AT boundary (waitpid with WUNTRACED: no polling,
    no clock). A fix that ends first (a plan without steps, an error) fails the test with its stderr."""
    _pid, status = os.waitpid(fix.pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        fix.returncode = os.waitstatus_to_exitcode(status)
        raise AssertionError(f"the fix ended (exit {fix.returncode}) before its boundary: {err.read_text()[-2000:]}")


def test_check_while_a_fix_runs_says_it_is_running_not_that_it_did_not_finish(tmp_path, wheels):
    """`check` while an apply runs (a real second process): the target is half-changed, so an error finding, but
    it said the fix "did not finish" and told the user to roll it back (which the running fix's lock refuses).
    The apply stops itself (SIGSTOP) at its first step's boundary, so the check runs exactly while the fix holds
    the target. (A FIFO handshake here raced: under load the fix could pass the next boundary, clear its mark and
    finish the step while the test still held the FIFO open, and check then rightly saw no fix under way.)"""
    python = scenario.make_target(tmp_path, "uv", wheels)
    env_file, _pins = scenario.files_for(tmp_path)
    small = scenario.DATA / "small"
    argv = [sys.executable, "-m", "sparkdoctor", "fix", "--python", str(python), "--no-kernels", "--matrix", str(small / "matrix"),
            "--fixes", str(small / "fixes"), "--env-file", str(env_file), "--yes"]
    out, err = tmp_path / "fix.out", tmp_path / "fix.err"  # files, not pipes: a fix never waits on a full pipe
    with open(out, "w") as stdout, open(err, "w") as stderr:
        fix = subprocess.Popen(argv, env={**os.environ, "SPARKDOCTOR_FIX_STOP_AT": "apply:step-1-"}, stdout=stdout, stderr=stderr)
    try:
        _held(fix, err)
        found = {f["id"]: f for f in check_json(python)["findings"]}
        unfinished = found["fix-unfinished"]
        assert f"is running now (process {fix.pid}, journal" in unfinished["evidence"][0], unfinished
        assert unfinished["remedy"] == "wait for that fix to end, then check again" and "did not finish" not in unfinished["title"]
        rollback = fix_cli(None, "--rollback")
        assert rollback.returncode == 6 and "another sparkdoctor fix or rollback is running" in one_line(rollback.stderr)
        assert f": pid {fix.pid} (" in rollback.stderr  # the running fix is named: the user knows what to wait for
    finally:
        if fix.returncode is None:
            os.kill(fix.pid, signal.SIGCONT)
            try:
                fix.wait(timeout=600)
            finally:
                fix.kill()
    assert fix.returncode == 0, out.read_text() + err.read_text()
    assert "fix-unfinished" not in [f["id"] for f in check_json(python)["findings"]]


def test_a_full_state_disk_during_the_automatic_rollback_still_puts_everything_back(tmp_path, wheels, monkeypatch):
    """The installer fails at step 5 and from then on the state dir's disk is full: every journal marker write is
    ENOSPC. The reverse wrote a marker first and after each step, and a marker that failed ended it: nothing was put
    back ("the automatic rollback failed too"), the target was left half-changed. Now every reverse runs and is
    verified; the journal and the target stay marked unsettled (the markers could not be written) until a rollback
    settles them, which finds the target as it was."""
    import errno

    from sparkdoctor.check import CheckRequest
    from sparkdoctor.fix.envfile import EnvFileTarget
    from sparkdoctor.fix.pipeline import apply_and_recheck, make_plan
    from sparkdoctor.fix.plan import FixOptions
    from sparkdoctor.targets.local import resolve_python_target

    python = scenario.make_target(tmp_path, "uv", wheels)
    env_file, pins = scenario.files_for(tmp_path)
    before = scenario.state(python, [env_file, pins])
    real_mark = jr.Journal.mark

    def full_disk(journal, marker, detail=None):
        if marker in (jr.ROLLING_BACK, jr.ROLLED_BACK):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_mark(journal, marker, detail)

    monkeypatch.setenv("PIP_CONSTRAINT", str(pins))
    monkeypatch.setenv("SPARKDOCTOR_FIX_FAULT", "bad-version:5")
    request = CheckRequest(target=EnvFileTarget(resolve_python_target(str(python)), env_file), matrix=scenario.DATA / "matrix",
                           fixes=scenario.DATA / "fixes", kernels=False)
    planned = make_plan(request, FixOptions(env_file=env_file))
    assert len(planned.plan.steps) >= 5 and not planned.plan.refusals
    monkeypatch.setattr(jr.Journal, "mark", full_disk)
    result = apply_and_recheck(request, planned)
    monkeypatch.setattr(jr.Journal, "mark", real_mark)  # the disk has room again
    assert result.error and result.rolled_back, result
    verified = result.rollback_verified or {}
    assert verified.get("ok") and all(r["ok"] for r in verified["reversed"]) and len(verified["reversed"]) >= 4, verified
    assert "the journal's rolling-back marker could not be written (No space left on device)" in verified["notes"]
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []
    env = {"PIP_CONSTRAINT": str(pins)}
    assert "fix-unfinished" in [f["id"] for f in check_json(python, env)["findings"]]
    settle = fix_cli(None, "--rollback", env={**env, **OFFLINE})
    assert settle.returncode == 0, settle.stdout + settle.stderr
    assert "fix-unfinished" not in [f["id"] for f in check_json(python, env)["findings"]]
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []


# ---- 5. only what the plan names is touched ---------------------------------------------------------------


def test_another_file_outside_the_plan_is_put_back_from_its_released_wheel(tmp_path, wheels):
    """A .py of another dist deleted mid-apply: written again from that dist's own wheel (exact
    version, the member checked against the wheel's RECORD hash), so the apply stands."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    site = next((tmp_path / "pip").glob("lib/python*/site-packages"))
    victim = site / "attr" / "validators.py"
    original = victim.read_bytes()
    env_file, pins = scenario.files_for(tmp_path)
    res = fix_cli(python, "--env-file", str(env_file), "--yes", "--format", "json",
                  env={"PIP_CONSTRAINT": str(pins), "PIP_FIND_LINKS": str(wheels), "SPARKDOCTOR_FIX_FAULT": f"unlink:4:{victim}"})
    body = as_json(res)
    assert res.returncode == 0 and body["error"] is None, res.stdout + res.stderr
    assert body["outside_restored"] == [str(victim)] and victim.read_bytes() == original
    record("the installer deletes a .py of a registry dist outside the plan", "written again from its released wheel; the apply stands")


def test_a_file_outside_the_plan_that_cannot_be_put_back_undoes_the_apply(tmp_path, wheels):
    """A file of a dist that did not come from the registry (no wheel to take it from): the apply is
    undone, and both the error and the rollback's verification name the file."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    site = next((tmp_path / "pip").glob("lib/python*/site-packages"))
    local = pure_wheel(tmp_path, "local-thing", "1.0")  # installed from a file: direct_url.json, no registry wheel
    scenario.must([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(local)])
    victim = site / "local_thing" / "__init__.py"
    env_file, pins = scenario.files_for(tmp_path)
    before = scenario.state(python, [env_file, pins])
    res = fix_cli(python, "--env-file", str(env_file), "--yes", "--format", "json",
                  env={"PIP_CONSTRAINT": str(pins), "SPARKDOCTOR_FIX_FAULT": f"unlink:4:{victim}"})
    body = as_json(res)
    assert res.returncode == 5 and "of dists the plan does not name" in body["error"] and str(victim) in body["error"]
    assert body["rolled_back"] and f"{victim} (outside the plan)" in body["rollback_verified"]["files_differ"]
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == [f"file {victim.relative_to(site)}"]
    record("the installer deletes a file of a non-registry dist outside the plan", "apply undone; the file named (exit 5): no source to restore it from",
           [f"{victim.name} of local-thing (named in the error, not restorable)"])


# ---- 6. history sizes; prune never removes an unsettled journal -------------------------------------------


def test_history_shows_sizes_and_prune_spares_the_unsettled(applied_again):
    python, env_file, pins, _before, _after, first = applied_again
    assert fix_cli(None, "--rollback", env=OFFLINE).returncode == 0
    killed = fix_cli(python, "--env-file", str(env_file), "--yes", env={"PIP_CONSTRAINT": str(pins), "SPARKDOCTOR_FIX_KILL_AT": "apply:10"})
    assert killed.returncode == -9
    hist = as_json(fix_cli(None, "--history", "--format", "json"))["result"]
    assert [h["status"] for h in hist] == ["interrupted", "rolled back"]
    assert all(h["bytes"] > 10_000 for h in hist)  # the saved wheels
    assert re.search(r" [0-9.]+ [KM]B  ", fix_cli(None, "--history").stdout)
    pruned = fix_cli(None, "--prune", "--keep", "0", "--format", "json")
    result = as_json(pruned)["result"]
    assert pruned.returncode == 0 and [r["journal"] for r in result["removed"]] == [first.name]
    assert [r["journal"] for r in result["kept_unsettled"]] == [hist[0]["journal"]] and result["freed_bytes"] == hist[1]["bytes"]
    assert [p.name for p in scenario.journals(jr.state_dir())] == [hist[0]["journal"]]
    assert fix_cli(None, "--prune", "--older-than", "0s").returncode == 0
    assert [p.name for p in scenario.journals(jr.state_dir())] == [hist[0]["journal"]], "never the unsettled one"
    record("fix --prune --keep 0 / --older-than 0s beside an interrupted apply", "the interrupted journal kept")
    assert fix_cli(None, "--prune").returncode == 2
    bad = fix_cli(None, "--prune", "--older-than", "soon")
    assert bad.returncode == 2 and "--older-than 'soon'" in one_line(bad.stderr)


def test_prune_removes_the_link_of_a_journal_kept_elsewhere_never_what_it_points_at(tmp_path, applied_once):
    """A journal moved to another disk and linked back into the state dir: `fix --prune` was an internal error
    (rmtree refuses a symbolic link). Now the link goes and the journal where it lies is left whole."""
    _python, _env_file, _pins, _before, _after, first = applied_once
    elsewhere = tmp_path / "other-disk" / first.name
    elsewhere.parent.mkdir()
    shutil.move(str(first), str(elsewhere))
    first.symlink_to(elsewhere)
    files = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    assert [h["journal"] for h in as_json(fix_cli(None, "--history", "--format", "json"))["result"]] == [first.name]
    pruned = fix_cli(None, "--prune", "--keep", "0", "--format", "json")
    assert pruned.returncode == 0, pruned.stderr
    assert [r["journal"] for r in as_json(pruned)["result"]["removed"]] == [first.name]
    assert not os.path.lexists(first) and sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == files


# ---- 7. exit codes ----------------------------------------------------------------------------------------


def test_a_rollback_with_no_journal_at_all_is_a_usage_error_not_a_failed_apply():
    """`fix --rollback` on a machine where fix never applied anything: like `--rollback NOSUCH`, exit 2 (it was 5,
    "the apply failed and was rolled back", though nothing was applied), one line, and the JSON error document."""
    res = fix_cli(None, "--rollback", "--format", "json")
    assert res.returncode == 2 and "no fix journals in" in one_line(res.stderr), (res.returncode, res.stderr)
    assert as_json(res)["exit_code"] == 2


def test_a_stderr_that_cannot_be_written_changes_neither_the_plan_nor_the_exit_code():
    """`fix 2> /dev/full` exited 2: its progress lines went straight to stderr and the write failed. Progress that
    cannot be written is dropped; the plan and its exit code stand."""
    argv = [sys.executable, "-m", "sparkdoctor", "fix", "--python", sys.executable, "--no-kernels", "--matrix",
            str(scenario.DATA / "matrix"), "--fixes", str(scenario.DATA / "fixes"), "--format", "json"]
    seen = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert "sparkdoctor fix: " in seen.stderr, seen.stderr  # the progress the second run cannot write
    # stderr block-buffered as on a user's machine (no PYTHONUNBUFFERED): what the failed writes left in its buffer
    # failed again at the interpreter's final flush, exit 120
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    for env in (buffered, {**buffered, "PYTHONUNBUFFERED": "1"}):
        with open("/dev/full", "w") as full:
            blind = subprocess.run(argv, stdout=subprocess.PIPE, stderr=full, text=True, timeout=600, env=env)
        assert blind.returncode == seen.returncode != 2, (blind.returncode, seen.returncode)
        assert json.loads(blind.stdout)["plan"] == json.loads(seen.stdout)["plan"]


def test_exit_codes_of_what_changed_nothing(tmp_path, wheels):
    nosuch = fix_cli(None, "--rollback", "NOSUCH")
    assert nosuch.returncode == 2 and "no such fix journal" in one_line(nosuch.stderr)
    python = scenario.make_target(tmp_path, "uv", wheels)
    before = scenario.state(python, [])
    down = fix_cli(python, "--yes", env={"UV_INDEX_URL": "http://127.0.0.1:9/simple", "UV_NO_CACHE": "1",
                                         "PIP_INDEX_URL": "http://127.0.0.1:9/simple"})
    assert down.returncode == 6 and "nothing was changed" in down.stderr, down.stdout + down.stderr
    fixes = tmp_path / "fixes-conflict"
    shutil.copytree(scenario.DATA / "fixes", fixes)
    (fixes / "six-old.toml").write_text('schema = 1\nid = "six-old"\ntitle = "t"\nsummary = "s"\n\n[[action]]\n'
                                        'kind = "install"\nrequirements = ["six==1.16.0"]\n')
    matrix = tmp_path / "matrix"
    shutil.copytree(scenario.DATA / "matrix", matrix)
    text = (matrix / "small.toml").read_text()
    first = text.index("[[entry]]")
    (matrix / "small.toml").write_text(text + text[first:text.index("[[entry]]", first + 1)]
                                       .replace('id = "small-six-old"', 'id = "small-six-old-2"').replace('fix = "six-upgrade"', 'fix = "six-old"'))
    conflict = fix_cli(python, "--yes", "--fixes", str(fixes), data=tmp_path)
    assert conflict.returncode == 6, conflict.stdout + conflict.stderr
    line = one_line(conflict.stderr)
    assert "the requirements conflict" in line and "six==1.16.0" in line and "six==1.17.0" in line
    assert scenario.diff(before, scenario.state(python, [])) == [] and not scenario.journals(jr.state_dir())
    record("the package index unreachable (--yes)", "exit 6 before any change")
    record("two requirements that conflict (--yes)", "exit 6 before any change, the conflict in one line")


# ---- 3. sibling pins; a failed resolution names the conflict ----------------------------------------------


FAM_FIX = """schema = 1
id = "fam-unpin"
title = "Lift the fam pin, reinstall the family at 2.x"
summary = "pin + reinstall-family, as cutlass-dsl-unpin-upgrade."

[[action]]
kind = "pin"
package = "fam"
specifier = ">=2.0"

[[action]]
kind = "reinstall-family"
packages = ["fam", "fam-libs"]
requirement = "fam"
version = ">=2.0"
"""
FAM_MATRIX = """component = "fam"

[[entry]]
id = "fam-old"
title = "fam is older than 2"
severity = "error"
action = "fix"
fix = "fam-unpin"
summary = "A test entry."
remedy = "upgrade"
when.packages = { fam = "<2" }
refs = ["https://pypi.org/project/six/"]
"""


@pytest.fixture
def family(tmp_path, wheels):
    """A pip venv with fam 1.0 (which requires fam-libs==1.0), a wheelhouse with 1.0 and 2.0 of both,
    and a fixes/matrix folder whose one fix lifts the fam pin and reinstalls the family at 2.x."""
    house = tmp_path / "house"
    house.mkdir()
    for v in ("1.0", "2.0"):
        pure_wheel(house, "fam", v, (f"fam-libs=={v}",))
        pure_wheel(house, "fam-libs", v)
    venv = tmp_path / "v"
    scenario.must([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    scenario.must([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
                   "--find-links", str(house), "fam==1.0"])
    data = tmp_path / "data"
    (data / "fixes").mkdir(parents=True)
    (data / "matrix").mkdir()
    (data / "fixes" / "fam-unpin.toml").write_text(FAM_FIX)
    (data / "matrix" / "fam.toml").write_text(FAM_MATRIX)
    return python, house, data


def test_sibling_pins_move_together(tmp_path, family):
    python, house, data = family
    pins = tmp_path / "constraints.txt"
    pins.write_text("# the mod's pins\nfam==1.0\nfam-libs==1.0  # with fam\n")
    env = {"PIP_CONSTRAINT": str(pins), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(house)}
    res = fix_cli(python, "--yes", env=env, data=data)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "pins fam-libs with fam (one family, one version): its pin moves too" in res.stdout
    assert pins.read_text() == "# the mod's pins\nfam>=2.0\nfam-libs>=2.0  # with fam\n"
    assert "fam==2.0" in scenario.must([str(python), "-m", "pip", "freeze", "--all"]).stdout
    assert "fam-libs==2.0" in scenario.must([str(python), "-m", "pip", "freeze", "--all"]).stdout
    record("a constraints file pins two members of one family", "both pins moved together; applied")


def test_a_sibling_pinned_elsewhere_is_refused_naming_the_line(tmp_path, family):
    python, house, data = family
    pins = tmp_path / "constraints.txt"
    pins.write_text("fam==1.0\nfam-libs<=1.0\n")
    env = {"PIP_CONSTRAINT": str(pins), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(house)}
    res = fix_cli(python, "--yes", env=env, data=data)
    assert res.returncode == 4, res.stdout + res.stderr
    assert f"{pins}:2 (fam-libs<=1.0) pins a member of fam's family" in one_line(res.stderr)
    assert pins.read_text() == "fam==1.0\nfam-libs<=1.0\n"
    record("a constraints file pins a family member to another version", "refused (exit 4) naming the file and line")


def test_a_resolution_conflict_is_named_in_one_line_by_real_pip(tmp_path, wheels):
    from sparkdoctor.fix.installers import resolution_conflict

    constraint = tmp_path / "c.txt"
    constraint.write_text("six==1.16.0\n")
    common = ["--no-index", "--find-links", str(wheels), "-c", str(constraint), "six==1.17.0"]
    pip = scenario.run([sys.executable, "-m", "pip", "install", "--dry-run", *common])
    assert not pip.ok
    assert resolution_conflict(pip.stderr + pip.stdout) == "The user requested six==1.17.0; The user requested (constraint) six==1.16.0"
    assert resolution_conflict("ERROR: No matching distribution found for six==9") is None


def test_zz_fault_table():
    """The faults of this module and their outcome (run the whole module: it needs them all)."""
    width = max((len(f) for f, _, _ in FAULTS), default=10)
    print(f"\n{len(FAULTS)} injected faults")
    for fault, outcome, broken in FAULTS:
        print(f"  {fault:<{width}}  {outcome}{'  LEFT: ' + broken if broken else ''}")
    print(f"  environments left broken: {sum(1 for f in FAULTS if f[2])}")
