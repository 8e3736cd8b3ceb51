"""A second Ctrl-C or SIGTERM while sparkdoctor takes a server down cuts the grace period short, never the teardown.

Before, the second signal ended the teardown mid-way (and released the child subreaper first): the group was left to
the supervisor, and what the server had started outside its group (a double-forked daemon, a child that moved to a
process group of its own) ran on under init after sparkdoctor had exited. Every check is about the state once the
driver (a stand-in for sparkdoctor, with its signal handlers) has exited: no wall-clock margin is asserted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.serve.groups import members
from tests.serve.test_teardown_reaps_daemons import _start_time, _wait_pid

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_server.py"

# The server: deaf to SIGTERM (so the teardown waits out its grace), with a child that moved to a process group of
# its own and a classic daemon (fork, setsid, fork); each writes its pid to argv[1] + ".NAME".
SERVER = """
import os, signal, sys
pids = sys.argv[1]
def spawn(name, setup, seconds):
    if os.fork() == 0:
        setup()
        if name == "daemon" and os.fork():
            os._exit(0)
        with open(f"{pids}.{name}.tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(f"{pids}.{name}.tmp", f"{pids}.{name}")
        os.execvp("sleep", ["sleep", seconds])
spawn("pgrp", lambda: os.setpgid(0, 0), "301")
spawn("daemon", os.setsid, "302")
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.execv(sys.executable, [sys.executable, FAKE, "ready", *sys.argv[2:]])
"""

DRIVER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from sparkdoctor import proc
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import launch
proc.install_signal_handlers()  # as sparkdoctor's entry point does: SIGTERM unwinds like Ctrl-C
r = Recipe(name="deaf", source_path="t", format="sparkdoctor", argv=[sys.executable, {server!r}, {pids!r}])
with launch(r, run_dir=Path({run_dir!r}), matrix=[], ready_timeout=60, grace=300,
            progress=lambda line: print(line, flush=True)) as s:
    print("pgid", s.pgid, flush=True)
    time.sleep(300)
"""


def _line(driver: subprocess.Popen[str], starts: str) -> str:
    assert driver.stdout is not None
    for line in driver.stdout:
        if line.startswith(starts):
            return line
    raise AssertionError(f"the driver ended before printing {starts!r}: {driver.stderr.read() if driver.stderr else ''}")


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_during_the_teardown_still_stops_everything_the_server_started(tmp_path, second):
    server, pids = tmp_path / "server.py", tmp_path / "pid"
    server.write_text(SERVER.replace("FAKE", repr(str(FAKE))))
    script = DRIVER.format(repo=str(REPO), server=str(server), pids=str(pids), run_dir=str(tmp_path / "run"))
    env = {**os.environ, "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    left: list[tuple[int, str]] = []
    pgid = 0
    try:
        pgid = int(_line(driver, "pgid").split()[1])
        left = [_wait_pid(Path(f"{pids}.{name}")) for name in ("pgrp", "daemon")]
        driver.send_signal(signal.SIGTERM)
        _line(driver, "stopping the server")  # the teardown now waits out the deaf server's 300 s of grace
        driver.send_signal(second)
        driver.wait(timeout=120)
        assert driver.returncode != 0
        assert [p for p, start in left if _start_time(p) == start] == []  # nothing outlived the driver
        assert members(pgid) == []
        log = (tmp_path / "run" / "server.log").read_text()
        assert "SIGKILL after 0s" in log and "sleep 301" in log and "sleep 302" in log
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        for pid, start in left:  # clean-up for a failing run (the old code left both under init)
            if _start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)
        if pgid and members(pgid):
            os.killpg(pgid, signal.SIGKILL)
