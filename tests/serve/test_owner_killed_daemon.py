"""SIGKILL of sparkdoctor takes down what the server started outside its group, not only the group.

With sparkdoctor SIGKILLed nothing of its teardown runs and the child subreaper that would have found a daemon (a
double fork, setsid) is gone with it; the supervisor stopped only the process group, and the daemon (which kept the
server's listening socket) ran on under init, serving the port, until the next launch's sweep. The supervisor now
stops every process that carries the launch's token too. The check is about the state once the supervisor has
exited: no wall-clock margin is asserted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor.serve.groups import members
from sparkdoctor.serve.supervisor import stat_of
from tests.serve.test_second_signal import SERVER, _line
from tests.serve.test_teardown_reaps_daemons import _start_time, _wait_pid

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and a child subreaper are Linux's")

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_server.py"

DRIVER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import launch
r = Recipe(name="forks", source_path="t", format="sparkdoctor", argv=[sys.executable, {server!r}, {pids!r}])
with launch(r, run_dir=Path({run_dir!r}), matrix=[], ready_timeout=60, grace=60) as s:
    print("pgid", s.pgid, flush=True)
    time.sleep(300)
"""


def _running(pid: int, start: str) -> bool:
    """That very process exists and has not ended (a zombie has ended)."""
    found = stat_of(pid)
    return found is not None and found[1][19] == start and found[1][0] != "Z"


def _supervisor_gone(pgid: int) -> bool:
    found = stat_of(pgid)
    return found is None or found[1][0] == "Z"


def test_sigkill_of_sparkdoctor_stops_the_daemons_its_server_started_outside_the_group(tmp_path):
    # a child in a process group of its own (sleep 301) and a classic daemon (sleep 302), both carrying the launch's
    # token; here the server does not ignore SIGTERM, so the supervisor's SIGTERM ends everything it reaches
    server, pids = tmp_path / "server.py", tmp_path / "pid"
    server.write_text(SERVER.replace("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n", "").replace("FAKE", repr(str(FAKE))))
    script = DRIVER.format(repo=str(REPO), server=str(server), pids=str(pids), run_dir=str(tmp_path / "run"))
    env = {**os.environ, "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
    left: list[tuple[int, str]] = []
    pgid = 0
    try:
        pgid = int(_line(driver, "pgid").split()[1])
        left = [_wait_pid(Path(f"{pids}.{name}")) for name in ("pgrp", "daemon")]
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=120)
        for _ in range(6000):  # the supervisor stops everything, then exits (a safety net, not a verdict)
            if _supervisor_gone(pgid):
                break
            time.sleep(0.05)
        assert _supervisor_gone(pgid)
        assert [p for p, start in left if _running(p, start)] == []  # nothing outlived sparkdoctor and its supervisor
        assert members(pgid) == []
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid, start in left:  # clean-up for a failing run (before the fix both ran on under init)
            if _start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)
        if pgid and members(pgid):
            os.killpg(pgid, signal.SIGKILL)
