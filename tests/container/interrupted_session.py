"""The session tests/container/test_docker_interrupted.py interrupts (tests/interrupted.py): its test takes the
session's dockerd, runs a container on it, says where the daemon, its keeper, the container and this process are,
and waits to be interrupted."""

from __future__ import annotations

import os
import signal

import pytest

from tests.interrupted import say, slow_teardown  # noqa: F401 (a fixture)


@pytest.mark.slow
@pytest.mark.usefixtures("slow_teardown")
def test_waits_to_be_interrupted(docker_daemon, skeleton):
    docker_daemon.run_container("interrupted-c0", skeleton, docker_daemon.host_mounts())
    container = int(docker_daemon.must("inspect", "-f", "{{.State.Pid}}", "interrupted-c0"))
    keeper = getattr(docker_daemon, "keeper", None)
    say({"root": str(docker_daemon.root), "daemon": docker_daemon.pid, "container": container, "pid": os.getpid(),
         "keeper": keeper.pid if keeper is not None else None})
    while True:  # until a signal ends it: no CPU spent, no time limit of its own
        signal.pause()
