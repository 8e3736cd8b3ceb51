"""A daemon the server starts outside its process group (setsid, a double fork: Ray's backend does) does not outlive
the teardown, and the teardown line names it (serve/reaper.py). Before, the group went down, server.log said
"nothing left", and the daemon ran on under init.

Every check is about the state once launch() returned: no wall-clock margin is asserted anywhere."""

from __future__ import annotations

import ctypes
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor import orphans, proc
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import launch, reaper
from sparkdoctor.serve.groups import Escaped, Teardown, members

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")

FAKE = Path(__file__).resolve().parent / "fake_server.py"
PR_GET_CHILD_SUBREAPER = 37

# The classic daemon: fork (the parent returns), setsid, fork again (the middle exits), then the grandchild runs on.
# argv[1]: where it writes its pid; argv[2]: "ignore-term" to make it deaf to SIGTERM.
DAEMON = """
import os, signal, sys
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
if sys.argv[2:] == ["ignore-term"]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
os.execvp("sleep", ["sleep", "300"])
"""


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()[19]


def _wait_pid(pidfile: Path) -> tuple[int, str]:
    """The daemon's pid and start time, once it wrote them (bounded: a safety net, not a verdict)."""
    for _ in range(600):
        if pidfile.exists():
            pid = int(pidfile.read_text())
            start = _start_time(pid)
            assert start is not None, "the daemon should be alive while the server runs"
            return pid, start
        time.sleep(0.05)
    raise AssertionError(f"the daemon never wrote {pidfile}")


def _alive(pid: int, start: str) -> bool:
    """That very process (pid and start time) still exists, zombie or not."""
    return _start_time(pid) == start


def _kill_if_left(pid: int | None, start: str | None) -> None:
    """Clean-up for a failing run (the old code left the daemon under init)."""
    import os
    import signal

    if pid and start and _alive(pid, start):
        os.kill(pid, signal.SIGKILL)


def _recipe(name: str, prelude: str) -> Recipe:
    script = f"{prelude}\nexec {sys.executable} {FAKE} ready \"$@\""
    return Recipe(name=name, source_path="test", format="sparkdoctor",
                  argv=["sh", "-c", script, "sh", "--host", "0.0.0.0", "--port", "8000"])


def _subreaper_flag() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    value = ctypes.c_int(-1)
    assert libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) == 0
    return value.value


@pytest.mark.parametrize("how", ["double-fork", "setsid-shell"])
def test_a_daemon_that_left_the_group_is_stopped_reaped_and_named_in_the_teardown(tmp_path, how):
    pidfile = tmp_path / "daemon.pid"
    if how == "double-fork":
        prelude = f"{sys.executable} -c '{DAEMON}' {pidfile}"
    else:  # as a shell script does it: a background `setsid` (a new session, so a new process group)
        prelude = f"setsid sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 300' &"
    pid = start = None
    try:
        with launch(_recipe(f"fake-{how}", prelude), run_dir=tmp_path / "run", matrix=[], ready_timeout=60) as s:
            pid, start = _wait_pid(pidfile)
            assert Path(f"/proc/{pid}/stat").read_text().split()[4] != str(s.pgid)  # it left the group
        report = s.teardown
        assert isinstance(report, Teardown)
        assert not _alive(pid, start), "the daemon outlived the teardown"
        assert members(s.pgid) == [] and report.clean
        named = [e for e in report.escaped if e.pid == pid]
        assert named and named[0].gone and named[0].command == "sleep 300" and named[0].how == "SIGTERM"
        line = report.describe()
        assert f"pid {pid} (sleep 300): SIGTERM" in line and "nothing left" not in line
        log = (tmp_path / "run" / "server.log").read_text()
        assert f"teardown: process group {s.pgid}: SIGTERM; " in log and f"pid {pid} (sleep 300)" in log
        assert report.to_dict()["escaped"]
        # every process found was reaped (the double fork's middle process too): no zombie child is left behind
        assert all(e.gone for e in report.escaped)
        children = orphans.children()
        assert not {c.pid for c in children} & {e.pid for e in report.escaped}
        assert [c for c in children if c.state == "Z"] == []
    finally:
        _kill_if_left(pid, start)


def test_a_daemon_deaf_to_sigterm_is_killed(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    recipe = _recipe("fake-deaf", f"{sys.executable} -c '{DAEMON}' {pidfile} ignore-term")
    pid = start = None
    try:
        with launch(recipe, run_dir=tmp_path / "run", matrix=[], ready_timeout=60, grace=1) as s:
            pid, start = _wait_pid(pidfile)
        assert not _alive(pid, start) and s.teardown.clean
        named = [e for e in s.teardown.escaped if e.pid == pid]
        assert named and named[0].how == "SIGTERM then SIGKILL after 1s" and named[0].gone
    finally:
        _kill_if_left(pid, start)


def test_a_child_sparkdoctor_started_itself_is_left_alone_and_the_flag_is_cleared(tmp_path):
    """A probe another part of sparkdoctor runs while the server does (registered in proc.py) is not the server's;
    and once no launched server runs, this process is no subreaper any more."""
    assert _subreaper_flag() == 0
    own = None
    try:
        with launch(_recipe("fake-plain", "true"), run_dir=tmp_path / "run", matrix=[], ready_timeout=60) as s:
            assert _subreaper_flag() == 1
            own = proc.start(["sleep", "300"])
            assert own.popen is not None
        assert own.popen.poll() is None, "a child sparkdoctor started itself was stopped as the server's"
        assert s.teardown.escaped == [] and "nothing left" in s.teardown.describe()
        assert _subreaper_flag() == 0
    finally:
        if own is not None:
            own.cancel()


def test_where_there_is_no_subreaper_the_teardown_line_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(reaper.orphans, "subreaper", lambda on: "no prctl(PR_SET_CHILD_SUBREAPER): not Linux (test)")
    with launch(_recipe("fake-noprctl", "true"), run_dir=tmp_path / "run", matrix=[], ready_timeout=60) as s:
        pass
    line = s.teardown.describe()
    assert s.teardown.clean and line.endswith(
        "; processes it started outside the group were not looked for (no prctl(PR_SET_CHILD_SUBREAPER): not Linux (test))")
    assert line in (tmp_path / "run" / "server.log").read_text()


def test_the_line_never_says_nothing_left_when_something_was():
    report = Teardown(42, ["SIGTERM"], 0.25, escaped=[Escaped(7, "sleep 777", "SIGTERM", gone=True)])
    assert report.clean and report.describe() == (
        "process group 42: SIGTERM; 1 process(es) it started outside the group: pid 7 (sleep 777): SIGTERM; "
        "none of them left (0.2s)")
    report.escaped.append(Escaped(8, "raylet", "SIGTERM then SIGKILL after 5s"))
    report.left = [8]
    assert not report.clean and "pid 8 (raylet): SIGTERM then SIGKILL after 5s, still alive" in report.describe()
    assert "1 process(es) still alive after 0.2s: pids 8" in report.describe()
