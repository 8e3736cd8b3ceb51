"""Ctrl-C while an apply's installer starts: the automatic rollback completes and nothing is lost.

A terminal's Ctrl-C reaches sparkdoctor only (every child runs in a session of its own, sparkdoctor.proc). When it
lands while a child is being started (between fork and exec, where the handler only notes it), proc.start raised it
after registering the child and left that child running: the installer went on installing beside the automatic
rollback, which then found a target neither as planned nor as before (journal "rollback interrupted", `check`'s
fix-unfinished until `fix --rollback`). Held deterministically: the installer's own child sends SIGINT to sparkdoctor's
main process from its pre-exec hook, while sparkdoctor waits for that exec.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from sparkdoctor import proc
from sparkdoctor.fix import apply as apply_mod
from sparkdoctor.fix import journal as jr
from sparkdoctor.fix import pdeath
from tests.fix import scenario
from tests.fix.test_fix_faults import Target, built  # noqa: F401 (the module's template fixture)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fix-faults")]


def test_ctrl_c_to_the_process_group_as_the_installer_starts_is_rolled_back_whole(tmp_path, built, monkeypatch):  # noqa: F811
    from sparkdoctor.check import CheckRequest
    from sparkdoctor.fix.envfile import EnvFileTarget
    from sparkdoctor.fix.pipeline import apply_and_recheck, make_plan
    from sparkdoctor.fix.plan import FixOptions
    from sparkdoctor.targets.local import resolve_python_target

    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    t = Target(tmp_path / "case", *built)
    monkeypatch.setenv("PIP_CONSTRAINT", str(t.pins))
    once = tmp_path / "sigint-sent"
    armed: list[str] = []  # the boundary after which the next child started sends the SIGINT
    alive_at_rollback: list[list[int]] = []
    other_tests: set[int] = set()  # children this worker's other tests keep running (a session's dockerd)
    real_preexec = pdeath._preexec

    def preexec_with_sigint(parent: int):
        die_with_parent = real_preexec(parent)

        def preexec() -> None:  # in the child, between fork and exec: sparkdoctor waits in proc.start
            if die_with_parent is not None:
                die_with_parent()
            if armed:
                try:
                    os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    return
                # a terminal sends it to the whole foreground group; every child sparkdoctor starts is in a session
                # of its own, so of that group only sparkdoctor gets it (pytest's own group is not signalled)
                os.kill(parent, signal.SIGINT)

        return preexec

    class Held(apply_mod.Boundaries):
        def __call__(self, name: str) -> None:
            if self.phase == "apply" and name.startswith("step-5"):  # install six==1.17.0: pip is the next child
                armed.append(name)
            if self.phase == "auto-rollback" and name == "start":
                alive_at_rollback.append([pid for pid in proc.live_pids() if _running(pid) and pid not in other_tests])
            super().__call__(name)

    monkeypatch.setattr(pdeath, "_preexec", preexec_with_sigint)
    monkeypatch.setattr(apply_mod, "Boundaries", Held)
    target = EnvFileTarget(resolve_python_target(str(t.python)), t.env_file)
    request = CheckRequest(target=target, matrix=t.data / "matrix", fixes=t.data / "fixes", kernels=False)
    planned = make_plan(request, FixOptions(env_file=t.env_file))
    assert [s.op.value for s in planned.plan.steps][4] == "install" and not planned.plan.refusals, planned.plan.steps
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    # a child the caller started before the apply (in-process, as a test session's dockerd is): not the apply's to stop
    other_tests.update(proc.live_pids())
    theirs = proc.start(["sleep", "600"])
    try:
        proc.install_signal_handlers()
        result = apply_and_recheck(request, planned)
        assert theirs.popen is not None and theirs.popen.poll() is None, "the caller's own child was killed by the rollback"
    finally:
        theirs.cancel()
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert once.exists(), "the installer's child never sent the SIGINT"
    assert alive_at_rollback == [[theirs.popen.pid]], f"the interrupted installer still ran when the rollback started: {alive_at_rollback}"
    assert result.error == "interrupted (SIGINT)", result.error
    assert result.rolled_back and result.rollback_verified and result.rollback_verified["ok"], result.rollback_verified
    found = scenario.journals(jr.state_dir())
    assert jr.load(str(found[0])).status() == "rolled back"
    assert t.lost() == [], t.lost()


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_target_changed_between_the_plan_and_the_lock_is_refused(tmp_path, built, monkeypatch):  # noqa: F811
    """The plan is made before the lock is taken: a fix that finished in between (six upgraded) left the second one
    applying a plan for a target that was no more, which failed and wedged the target ("rollback interrupted",
    every later rollback refused). The target is read again under the lock now: refused, nothing changed."""
    from sparkdoctor.check import CheckRequest
    from sparkdoctor.fix.envfile import EnvFileTarget
    from sparkdoctor.fix.interface import UnchangedError
    from sparkdoctor.fix.pipeline import apply_and_recheck, make_plan
    from sparkdoctor.fix.plan import FixOptions
    from sparkdoctor.targets.local import resolve_python_target

    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    t = Target(tmp_path / "case", *built)
    monkeypatch.setenv("PIP_CONSTRAINT", str(t.pins))
    target = EnvFileTarget(resolve_python_target(str(t.python)), t.env_file)
    request = CheckRequest(target=target, matrix=t.data / "matrix", fixes=t.data / "fixes", kernels=False)
    planned = make_plan(request, FixOptions(env_file=t.env_file))
    assert planned.plan.steps and not planned.plan.refusals
    site = next(Path(t.python).parent.parent.glob("lib/python*/site-packages"))
    late = site / "late_arrival-1.0.dist-info"  # what another fix or a pip left while this one planned
    late.mkdir()
    (late / "METADATA").write_text("Metadata-Version: 2.1\nName: late-arrival\nVersion: 1.0\n")
    (late / "RECORD").write_text("late_arrival-1.0.dist-info/METADATA,,\n")
    with pytest.raises(UnchangedError, match=r"the target changed since the plan was made \(late-arrival - -> 1.0\)"):
        apply_and_recheck(request, planned)
    assert scenario.journals(jr.state_dir()) == []
