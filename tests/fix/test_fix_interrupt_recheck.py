"""Ctrl-C (or SIGTERM) in the check `fix --yes` runs after a finished apply: the apply stays (it finished and is
journaled), and the one line says so with the command that undoes it. It said only "interrupted (SIGINT); every probe
it started was stopped", as if nothing had been changed."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest

from sparkdoctor import errors, proc
from sparkdoctor.check import CheckRequest
from sparkdoctor.fix import pipeline
from sparkdoctor.fix.apply import Outcome


@pytest.mark.parametrize(("outcome", "said"), [
    (Outcome("J1", done=["step-1"]),
     "the fix was applied (journal J1) and not checked again; `sparkdoctor fix --rollback J1` undoes it"),
    (Outcome("J2", rolled_back=True, error="pip failed"), "the apply had failed and was rolled back (journal J2)"),
])
@pytest.mark.parametrize("signal_", [KeyboardInterrupt(), proc.Interrupted(signal.SIGTERM)])
def test_an_interrupted_check_after_the_apply_says_what_the_apply_left(monkeypatch, outcome, said, signal_):
    def interrupted_check(request):
        raise signal_

    monkeypatch.setattr(pipeline.apply_mod, "apply", lambda *args, **kwargs: outcome)
    monkeypatch.setattr(pipeline, "check", interrupted_check)
    monkeypatch.setattr(proc, "kill_all", lambda: None)  # nothing of this test's to stop
    planned = SimpleNamespace(plan=None, inventory=None, installer=None)
    with pytest.raises(proc.Interrupted) as caught:
        pipeline.apply_and_recheck(CheckRequest(target=object()), planned)  # type: ignore[arg-type]
    signum = signal.SIGINT if isinstance(signal_, KeyboardInterrupt) else signal.SIGTERM
    name = signal.Signals(signum).name
    assert proc.interrupted(caught.value) == (128 + signum,
                                              f"interrupted ({name}); every process it started was stopped; {said}")
    assert errors.describe(caught.value)["message"] == f"interrupted ({name}); {said}"
