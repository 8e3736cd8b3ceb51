"""The container tests' shared, expensive things: ONE real dockerd per test session (its own socket
and roots, no bridge, no iptables; stopped and cleaned up at the end, see docker_daemon.py), the
skeleton image, and real venvs that the containers mount read-only at their host paths."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import venvs
from tests.container.docker_daemon import Daemon, session_runtime, start_daemon

SMALL = ["idna==3.7", "packaging==24.0"]


@pytest.fixture(scope="session")
def docker_daemon() -> Iterator[Daemon]:
    yield from session_runtime("sd-dockerd-", start_daemon, "no container runtime can run here")


@pytest.fixture(scope="session")
def skeleton(docker_daemon) -> str:
    return docker_daemon.import_skeleton("sparkdoctor-skeleton:1")


@pytest.fixture(scope="session")
def small_venv() -> Path:
    """A real venv with two small real packages (uv, from the registry)."""
    return venvs.uv_venv("container-small", [SMALL]).parent.parent


@pytest.fixture
def docker_env(docker_daemon, monkeypatch) -> dict[str, str]:
    """The environment for a sparkdoctor run that talks to the session's daemon."""
    monkeypatch.setenv("DOCKER_HOST", docker_daemon.env["DOCKER_HOST"])
    return {**os.environ, "DOCKER_HOST": docker_daemon.env["DOCKER_HOST"]}


@pytest.fixture(scope="session")
def podman():
    """A real rootful podman on its own storage (tests/container/podman_runtime.py), with the skeleton image."""
    from tests.container.podman_runtime import start_podman

    yield from session_runtime("sd-podman-", start_podman, "podman cannot run here")
