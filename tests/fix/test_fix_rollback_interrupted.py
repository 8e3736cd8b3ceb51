"""Ctrl-C during `fix --rollback`, and `fix --rollback` twice, on a venv made the ordinary way (local wheels, no
network). Before, the interrupted rollback said only "interrupted (SIGINT); every probe it started was stopped" (exit
130): not that the target was left half put back, nor what to run. Now it names the journal and says to run the
rollback again; that second rollback finishes it and verifies, and a third one says it was already rolled back.
Interrupted deterministically: the rollback stops itself (SIGSTOP) after its uninstall, SIGINT is sent, then SIGCONT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fix import scenario
from tests.fix.scenario import fix_cli

pytestmark = pytest.mark.slow


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_an_interrupted_rollback_says_what_to_run_and_that_run_finishes_it(tmp_path, wheels):
    python = scenario.make_target(tmp_path, "pip", wheels)
    env = {**os.environ, "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}
    before = scenario.state(python, [])
    applied = fix_cli(python, "--yes", env=env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    journal = scenario.journals(tmp_path / "state")[0].name

    rollback = subprocess.Popen([sys.executable, "-m", "sparkdoctor", "fix", "--rollback"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**env, "SPARKDOCTOR_FIX_STOP_AT": "rollback:uninstalled"},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while rollback.poll() is None and not _stopped(rollback.pid):
            time.sleep(0.05)
        assert rollback.poll() is None, rollback.communicate()
        rollback.send_signal(signal.SIGINT)
        rollback.send_signal(signal.SIGCONT)
        out, err = rollback.communicate(timeout=600)
    finally:
        if rollback.poll() is None:
            rollback.kill()
    assert rollback.returncode == 130, out + err
    assert err.strip().splitlines()[-1] == (
        f"sparkdoctor: error: interrupted (SIGINT); every process it started was stopped; the rollback of journal {journal} "
        f"may have stopped part way: run `sparkdoctor fix --rollback {journal}` again, which puts back what is left and "
        "verifies it"), err
    assert scenario.diff(before, scenario.state(python, [])), "the interrupted rollback had already finished"

    again = fix_cli(None, "--rollback", journal, env=env)
    assert again.returncode == 0 and "Verified:" in again.stdout, again.stdout + again.stderr
    assert scenario.diff(before, scenario.state(python, [])) == []
    third = fix_cli(None, "--rollback", journal, env=env)
    assert third.returncode == 0 and f"journal {journal} was already rolled back" in third.stdout, third.stdout + third.stderr
    assert scenario.diff(before, scenario.state(python, [])) == []
