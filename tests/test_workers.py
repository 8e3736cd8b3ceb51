"""The suite's own scheduling (tests/workers.py): an `alone` test waits for the running tests and holds new ones off."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import workers

REPO = Path(__file__).resolve().parents[1]

HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from tests import workers
    from pathlib import Path
    folder, alone, seconds, log = Path(sys.argv[2]), sys.argv[3] == "alone", float(sys.argv[4]), sys.argv[5]
    with workers.hold(folder, alone):
        with open(log, "a") as f:
            f.write(f"start {sys.argv[6]} {time.monotonic()}\\n")
        time.sleep(seconds)
        with open(log, "a") as f:
            f.write(f"end {sys.argv[6]} {time.monotonic()}\\n")
""")


def _start(tmp_path, kind, seconds, name):
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(REPO), str(tmp_path), kind, str(seconds),
                             str(tmp_path / "log"), name])


def _events(tmp_path):
    rows = [line.split() for line in (tmp_path / "log").read_text().splitlines()]
    return {(what, name): float(t) for what, name, t in rows}


def _until(condition, polls: int = 600) -> None:
    """Poll `condition` every 0.1 s until it holds (a bound on polls, not a verdict: the order is what is tested)."""
    for _ in range(polls):
        if condition():
            return
        time.sleep(0.1)


def _gate_held(folder: Path) -> bool:
    import fcntl

    with open(folder / "turns-gate.lock", "a") as gate:
        try:
            fcntl.flock(gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(gate, fcntl.LOCK_UN)
        return False


def test_an_alone_test_waits_for_the_running_one_and_the_next_waits_for_it(tmp_path):
    procs = [_start(tmp_path, "shared", 3.0, "running")]
    _until(lambda: (tmp_path / "log").exists())  # "running" holds its shared turn
    procs.append(_start(tmp_path, "alone", 1.0, "alone"))
    _until(lambda: _gate_held(tmp_path))  # "alone" waits at the gate's far side (or, on a slow box, already runs)
    procs.append(_start(tmp_path, "shared", 0.1, "next"))
    for p in procs:
        assert p.wait(timeout=60) == 0
    t = _events(tmp_path)
    assert t["start", "alone"] >= t["end", "running"]  # it waited for the test already running
    assert t["start", "next"] >= t["end", "alone"]  # and a test that came later did not slip in beside it


def test_ordinary_tests_share_their_turns(tmp_path):
    a = _start(tmp_path, "shared", 600, "a")
    try:
        _until(lambda: (tmp_path / "log").exists())  # "a" holds its shared turn, and keeps it
        b = _start(tmp_path, "shared", 0.1, "b")
        assert b.wait(timeout=120) == 0  # "b" had its turn beside "a"
        t = _events(tmp_path)
        assert ("end", "b") in t and ("end", "a") not in t
    finally:
        a.kill()
        a.wait(timeout=30)


def test_a_grouped_test_that_lost_its_group_is_named_on_a_worker(monkeypatch):
    class Item:
        nodeid = "tests/test_fuzz.py::test_cli_check"

        def get_closest_marker(self, name):
            return pytest.mark.xdist_group("fuzz").mark if name == "xdist_group" else None

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert "pytest-xdist#1386" in workers.lost_group(Item())
    Item.nodeid += "@fuzz"
    assert workers.lost_group(Item()) is None


STUCK = textwrap.dedent("""
    import os
    import time

    def test_quick():
        pass

    def test_stuck_in_a_sleep():
        os.close(os.open(os.environ["STUCK_READY"], os.O_CREAT | os.O_WRONLY))  # C calls: no frame above this one
        time.sleep(600)
""")


@pytest.mark.parametrize("whom", ["controller", "process group"])
def test_a_run_stopped_by_sigterm_says_which_test_each_worker_was_in_and_where(tmp_path, whom):
    """A CI job killed at its time limit printed only pytest's KeyboardInterrupt. A real xdist run (two workers, this
    suite's conftest) with a test that never ends gets SIGTERM once that test runs, sent to pytest alone or to its
    whole process group (as a CI runner sends it): it names the test, its time, and the frame it was stopped in."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_stuck.py").write_text(STUCK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(REPO)
    ready = env["STUCK_READY"] = str(tmp_path / "ready")
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--rootdir",
                            str(tmp_path), "--basetemp", str(tmp_path / "bt"), str(tmp_path / "test_stuck.py")],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        for _ in range(3000):  # until the stuck test's body runs (a bound on polls, not a verdict): a pause after the
            if os.path.exists(ready) or run.poll() is not None:  # worker's note raced it under load (CI, 2026-11-29)
                break
            time.sleep(0.2)
        if whom == "controller":
            run.send_signal(signal.SIGTERM)
        else:
            os.killpg(run.pid, signal.SIGTERM)
        out, _ = run.communicate(timeout=300)
    finally:  # whatever happened, nothing of the inner run outlives the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
    line = next((x for x in out.splitlines() if "stopped in test_stuck.py::test_stuck_in_a_sleep after" in x), None)
    assert line, out[-3000:]  # the other worker may be named too: still in test_quick, on a loaded machine
    assert "in test_stuck_in_a_sleep" in line.split("innermost:")[1], line


@pytest.mark.parametrize("first, refused", [("shared", [True]), ("alone", [True, False])])
def test_a_turn_never_had_is_given_up_after_its_wait(tmp_path, first, refused):
    """A test that never ends (holding a shared turn, or alone) used to stall every worker: an alone test waited at the
    gate for it, and every other test behind that one. Past its wait a test runs without the turn, and says so."""
    holder = _start(tmp_path, first, 600, "stuck")
    try:
        for _ in range(3000):  # until the holder has its turn (a bound on polls, wide enough for a loaded machine)
            if (tmp_path / "log").exists() or holder.poll() is not None:
                break
            time.sleep(0.1)
        for alone in refused:  # an alone test behind a shared one; any test behind an alone one
            with workers.hold(tmp_path, alone, wait=1.0) as had:
                assert had is False
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with workers.hold(tmp_path, True, wait=30) as had:  # the holder gone, its lock went with it
        assert had is True


def test_alone_tests_go_last_and_the_rest_keep_their_order():
    class Item:
        def __init__(self, name, alone):
            self.name, self.alone = name, alone

        def get_closest_marker(self, name):
            return pytest.mark.alone.mark if name == "alone" and self.alone else None

    items = [Item("a1", True), Item("s1", False), Item("a2", True), Item("s2", False), Item("s3", False)]
    workers.alone_last(items)
    assert [i.name for i in items] == ["s1", "s2", "s3", "a1", "a2"]
