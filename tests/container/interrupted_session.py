"""A test session for tests/container/test_docker_interrupted.py to interrupt (not collected on its own: its name does
not start with test_; that test passes this file to a pytest of its own). Its one test takes the session's dockerd,
runs a container on it, writes one JSON line to the FIFO $SD_READY saying where the daemon, its keeper, the
container and this process are (the readiness signal) and waits to be interrupted. Its own teardown, which runs
before the daemon's, writes a second line and then waits too: a teardown slower than the run is given (xdist kills a
worker 10 s after it told it to stop; a second Ctrl-C cuts a teardown short)."""

from __future__ import annotations

import json
import os
import signal

import pytest

_fifo: list[int] = []  # the FIFO's write end, open until this process ends: its end is the outer test's EOF


def _say(data: dict[str, object]) -> None:
    if not _fifo:
        _fifo.append(os.open(os.environ["SD_READY"], os.O_WRONLY))
    os.write(_fifo[0], (json.dumps(data) + "\n").encode())


@pytest.fixture
def slow_teardown():
    yield
    _say({"teardown": os.getpid()})
    while True:  # until a signal (or xdist's kill) ends it
        signal.pause()


@pytest.mark.slow
def test_waits_to_be_interrupted(docker_daemon, skeleton, slow_teardown):
    docker_daemon.run_container("interrupted-c0", skeleton, docker_daemon.host_mounts())
    container = int(docker_daemon.must("inspect", "-f", "{{.State.Pid}}", "interrupted-c0"))
    keeper = getattr(docker_daemon, "keeper", None)
    _say({"root": str(docker_daemon.root), "daemon": docker_daemon.pid, "container": container, "pid": os.getpid(),
          "keeper": keeper.pid if keeper is not None else None})
    while True:  # until a signal ends it: no CPU spent, no time limit of its own
        signal.pause()
