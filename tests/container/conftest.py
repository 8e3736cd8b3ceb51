"""The container tests' shared, expensive things: ONE real dockerd per test session (its own socket
and roots, no bridge, no iptables; stopped and cleaned up at the end, see docker_daemon.py), the
skeleton image, and real venvs that the containers mount read-only at their host paths."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests import venvs
from tests.container.docker_daemon import Daemon, NoRuntime, short_root, start_daemon

SMALL = ["idna==3.7", "packaging==24.0"]


@pytest.fixture(scope="session")
def docker_daemon() -> Daemon:
    root = short_root("sd-dockerd-")
    try:
        daemon = start_daemon(root)
    except NoRuntime as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"no container runtime can run here: {exc}")
    try:
        yield daemon
    finally:
        daemon.stop()


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

    root = short_root("sd-podman-")
    try:
        runtime = start_podman(root)
    except NoRuntime as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"podman cannot run here: {exc}")
    try:
        yield runtime
    finally:
        runtime.stop()
