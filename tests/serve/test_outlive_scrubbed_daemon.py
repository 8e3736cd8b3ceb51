"""A daemon the server starts that double-forks, calls setsid, clears its environment and keeps listening on
127.0.0.1 does not outlive sparkdoctor, nor a SIGKILL of the supervisor (serve/supervisor.py).

Before: with sparkdoctor SIGKILLed the supervisor stopped the group and what carried the launch's token, and this
daemon carries nothing: it ran on under init, holding its port, and no sweep could tell it from an unrelated
process. With the supervisor SIGKILLed the server itself ran on under init until the next launch. Now the supervisor
is a child subreaper (the daemon stays in its tree), the server gets SIGTERM when the supervisor dies, and the
supervisor records its tree (pid, start time) for the sweep. Every wait is a bounded count of looks, never a verdict
on seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor.serve import registry
from sparkdoctor.serve.groups import members
from sparkdoctor.serve.supervisor import stat_of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and a child subreaper are Linux's")

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).resolve().parent / "fake_server.py"
LOOKS = 2400  # 0.05 s apart: a safety net for a loaded machine, not a measure

# fork (the parent returns), setsid, fork again (the middle exits), clear the environment and re-exec with none (so
# /proc/PID/environ is empty too), then listen on 127.0.0.1 and write "pid port" once listening
SCRUBBED = """
import os, socket, sys
out = sys.argv[1]
if sys.argv[2:] == ["scrubbed"]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    with open(out + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {s.getsockname()[1]}")
    os.rename(out + ".tmp", out)
    while True:
        s.accept()[0].close()
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.environ.clear()
os.execve(sys.executable, [sys.executable, __file__, out, "scrubbed"], os.environ)
"""

DRIVER = """
import sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import launch
script = "{python} {daemon} {out}; exec {python} {fake} ready \\"$@\\""
r = Recipe(name="scrub", source_path="t", format="sparkdoctor",
           argv=["sh", "-c", script, "sh", "--host", "0.0.0.0", "--port", "8000"])
with launch(r, run_dir=Path({run_dir!r}), matrix=[], ready_timeout=60, grace=2) as s:
    print(s.pgid, s.pid, flush=True)
    sys.stdin.readline()  # the test says when to leave
print("left", flush=True)
sys.stdin.readline()
"""


def _until(predicate, what: str) -> None:
    for _ in range(LOOKS):
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _running(pid: int, start: str) -> bool:
    """That very process exists and has not ended (a zombie has ended: init here may be slow to reap it)."""
    found = stat_of(pid)
    return found is not None and found[1][19] == start and found[1][0] != "Z"


def _ended(pid: int) -> bool:
    found = stat_of(pid)
    return found is None or found[1][0] == "Z"


def _start(pid: int) -> str:
    found = stat_of(pid)
    assert found is not None, f"pid {pid} should be running"
    return found[1][19]


class Launch:
    """sparkdoctor's launcher in a driver process, its server starting the scrubbed daemon."""

    def __init__(self, tmp_path: Path):
        daemon, self.out = tmp_path / "scrubbed.py", tmp_path / "daemon"
        daemon.write_text(SCRUBBED)
        self.state = tmp_path / "state"
        script = DRIVER.format(repo=str(REPO), python=sys.executable, daemon=daemon, out=self.out, fake=FAKE,
                               run_dir=str(tmp_path / "run"))
        self.driver = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True,
                                       env={**os.environ, "SPARKDOCTOR_STATE_DIR": str(self.state)})
        assert self.driver.stdout is not None
        line = self.driver.stdout.readline()
        assert line, self.driver.stderr.read() if self.driver.stderr else ""
        self.pgid, self.server = map(int, line.split())
        self.server_start = _start(self.server)
        _until(self.out.exists, "the daemon listening")
        pid, self.port = map(int, self.out.read_text().split())
        self.daemon = (pid, _start(pid))
        assert Path(f"/proc/{pid}/environ").read_bytes() == b"", "the daemon should have no environment at all"
        found = stat_of(pid)
        assert found is not None and found[1][2] != str(self.pgid), "the daemon should have left the server's group"

    def record(self) -> dict:
        docs = [json.loads(p.read_text()) for p in (self.state / "servers").glob("*.json")]
        return next(d for d in docs if d.get("pgid") == self.pgid)

    def kill(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        if self.driver.poll() is None:
            self.driver.kill()
        self.driver.wait(timeout=60)
        for pid, start in (self.daemon, (self.server, self.server_start)):  # a failing run's leftovers
            if _running(pid, start):
                os.kill(pid, signal.SIGKILL)
        for pid in members(self.pgid):
            os.kill(pid, signal.SIGKILL)


def test_sigkill_of_sparkdoctor_stops_a_daemon_that_cleared_its_environment(tmp_path):
    run = Launch(tmp_path)
    try:
        run.kill(run.driver.pid)
        run.driver.wait(timeout=60)
        _until(lambda: _ended(run.pgid), "the supervisor done")
        assert not _running(*run.daemon), "the scrubbed daemon outlived sparkdoctor and its supervisor"
        assert members(run.pgid) == []
    finally:
        run.close()


def test_sigkill_of_the_supervisor_stops_the_server_at_once_and_sparkdoctor_stops_the_daemon(tmp_path):
    run = Launch(tmp_path)
    try:
        run.kill(run.pgid)  # the supervisor leads the group
        _until(lambda: not _running(run.server, run.server_start), "the server stopped by its parent-death signal")
        assert run.driver.poll() is None  # sparkdoctor still runs: the server did not wait for its teardown
        assert run.driver.stdin is not None and run.driver.stdout is not None
        run.driver.stdin.write("\n")
        run.driver.stdin.flush()
        assert run.driver.stdout.readline().strip() == "left"
        # the orphaned daemon was re-parented to sparkdoctor (a child subreaper), whose teardown stopped it
        assert not _running(*run.daemon), "the scrubbed daemon outlived the teardown"
        assert members(run.pgid) == []
    finally:
        run.close()


def test_sigkill_of_supervisor_and_sparkdoctor_leaves_the_daemon_to_the_sweep_which_knows_it(tmp_path):
    run = Launch(tmp_path)
    try:
        _until(lambda: list(run.daemon) in [[p, str(s)] for p, s in run.record().get("tree", [])],
               "the daemon in the launch record's tree")
        run.kill(run.pgid)
        run.kill(run.driver.pid)
        run.driver.wait(timeout=60)
        _until(lambda: not _running(run.server, run.server_start), "the server stopped by its parent-death signal")
        # nothing of sparkdoctor's is left to stop the daemon (docs/serve.md): it runs on until the next launch
        assert _running(*run.daemon)
        swept = registry.sweep(run.state / "servers", grace=2)
        assert len(swept) == 1 and f"process group {run.pgid}" in swept[0]
        _until(lambda: not _running(*run.daemon), "the daemon swept by its recorded pid and start time")
    finally:
        run.close()
