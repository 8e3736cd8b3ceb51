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


def test_an_alone_test_waits_for_the_running_one_and_the_next_waits_for_it(tmp_path):
    procs = [_start(tmp_path, "shared", 1.5, "running")]
    time.sleep(0.5)  # "running" holds its shared turn
    procs.append(_start(tmp_path, "alone", 1.0, "alone"))
    time.sleep(0.5)  # "alone" is waiting at the gate's far side
    procs.append(_start(tmp_path, "shared", 0.1, "next"))
    for p in procs:
        assert p.wait(timeout=30) == 0
    t = _events(tmp_path)
    assert t["start", "alone"] >= t["end", "running"]  # it waited for the test already running
    assert t["start", "next"] >= t["end", "alone"]  # and a test that came later did not slip in beside it


def test_ordinary_tests_share_their_turns(tmp_path):
    procs = [_start(tmp_path, "shared", 1.0, name) for name in ("a", "b")]
    for p in procs:
        assert p.wait(timeout=30) == 0
    t = _events(tmp_path)
    assert t["start", "b"] < t["end", "a"] and t["start", "a"] < t["end", "b"]


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
    import time

    def test_quick():
        pass

    def test_stuck_in_a_sleep():
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
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--rootdir",
                            str(tmp_path), "--basetemp", str(tmp_path / "bt"), str(tmp_path / "test_stuck.py")],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        for _ in range(600):  # until a worker notes it is in the stuck test (a bound on polls, not a verdict)
            if any("test_stuck_in_a_sleep" in p.read_text() for p in (tmp_path / "bt").glob("running-*.txt")):
                break
            time.sleep(0.2)
        time.sleep(0.5)  # in the sleep, past the note
        if whom == "controller":
            run.send_signal(signal.SIGTERM)
        else:
            os.killpg(run.pid, signal.SIGTERM)
        out, _ = run.communicate(timeout=300)
    finally:  # whatever happened, nothing of the inner run outlives the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
    line = next((x for x in out.splitlines() if "stopped in" in x), None)
    assert line and "test_stuck.py::test_stuck_in_a_sleep after" in line, out[-3000:]
    assert "in test_stuck_in_a_sleep" in line.split("innermost:")[1], line
