"""The sessions tests/container/test_docker_interrupted.py interrupts (tests/interrupted.py): each test takes the
session's dockerd or podman, runs a container on it, says where the runtime's root, its keeper, the container and
this process are, and waits to be interrupted."""

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


@pytest.mark.slow
@pytest.mark.usefixtures("slow_teardown")
def test_podman_waits_to_be_interrupted(podman):
    podman.must("run", "-d", "--init", "--network", "none", "--name", "interrupted-p0", "-v", "/usr:/usr:ro",
                "sparkdoctor-skeleton:1", "sleep", "infinity")
    container = int(podman.must("inspect", "-f", "{{.State.Pid}}", "interrupted-p0"))
    keeper = getattr(podman, "keeper", None)
    say({"root": str(podman.root), "container": container, "pid": os.getpid(),
         "keeper": keeper.pid if keeper is not None else None})
    while True:  # until a signal ends it
        signal.pause()
