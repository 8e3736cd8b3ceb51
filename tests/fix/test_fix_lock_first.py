"""`fix --yes` on a target another fix is applying to is refused before it checks and plans: it takes the target's
lock first. Before, the second apply ran its whole check and plan (about 10 s on a GB10 box) and only then met the lock.
The plan without --yes takes no lock and still plans. A venv made as users make it (python -m venv, its pip), local
wheels, no network."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from sparkdoctor import proc
from tests.fix import scenario
from tests.fix.scenario import DATA, fix_cli

pytestmark = pytest.mark.slow


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_second_apply_is_refused_before_its_check_and_a_plan_still_plans(tmp_path, wheels):
    python = scenario.make_target(tmp_path, "pip", wheels)
    env = {**os.environ, "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1"}
    argv = [sys.executable, "-m", "sparkdoctor", "fix", "--python", str(python), "--no-kernels", "--matrix", str(DATA / "matrix"),
            "--fixes", str(DATA / "fixes"), "--yes"]
    # the first apply stops itself (SIGSTOP) once it holds the lock, before it changes anything
    first = proc.start(argv, env={**env, "SPARKDOCTOR_FIX_STOP_AT": "apply:locked"})
    assert first.popen is not None
    try:
        for _ in range(6000):  # its check and plan: polled every 0.1 s, at most 10 min on a loaded machine
            if first.popen.poll() is not None or _stopped(first.popen.pid):
                break
            time.sleep(0.1)
        assert first.popen.poll() is None and _stopped(first.popen.pid)

        second = fix_cli(python, "--yes", env=env)
        assert second.returncode == 6, second.stdout + second.stderr
        lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("sparkdoctor: error: another sparkdoctor fix or rollback is running on"), lines
        assert f"pid {first.popen.pid} " in lines[0] and second.stdout == "", second.stdout

        planned = fix_cli(python, env=env)  # a plan alone takes no lock
        assert planned.returncode == 1 and "Dry run: nothing was changed." in planned.stdout, planned.stdout + planned.stderr
        assert "planning with pip" in planned.stderr, planned.stderr
    finally:
        os.kill(first.popen.pid, signal.SIGCONT)
    done = first.result(600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Verdict after:" in done.stdout
