"""Debian tools the suite installs when missing (as root): found on PATH, else apt-get."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkdoctor import proc

APT_TIMEOUT = 600.0


def install(packages: tuple[str, ...], find: Callable[[], str | None]) -> str | None:
    """What `find` finds, after installing the Debian `packages` where it finds nothing; None where this user cannot
    install them (not root, or no apt-get).

    On a fresh machine the xdist workers reach docker.io, podman, bubblewrap and openssh-server at once, and apt-get
    refuses a second caller ("Unable to acquire the dpkg frontend lock"): every container test skipped. So one
    installer runs at a time across the workers (a file lock), and each also waits for any other apt on the machine
    (DPkg::Lock::Timeout). An install that fails as root fails the test, not skips it: a clean machine runs every
    test."""
    found = find()
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    with open(Path(tempfile.gettempdir()) / "sparkdoctor-tests-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find()
        if found:
            return found
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        apt = ["apt-get", "-q", "-o", f"DPkg::Lock::Timeout={APT_TIMEOUT:.0f}"]
        argv = [*apt, "install", "-y", "--no-install-recommends", *packages]
        done = proc.run(argv, timeout=2 * APT_TIMEOUT, env=env)
        if not done.ok:
            proc.run([*apt, "update"], timeout=2 * APT_TIMEOUT, env=env)
            done = proc.run(argv, timeout=2 * APT_TIMEOUT, env=env)
    return find() or pytest.fail(f"apt-get install {' '.join(packages)} failed: {done.describe_failure()}")


def ensure_tool(binary: str, package: str) -> str | None:
    """The tool's path, installing its Debian package when missing; None when this user cannot install it."""
    return install((package,), lambda: shutil.which(binary))


def tool_or_skip(binary: str, package: str) -> str:
    """ensure_tool, or skip the test where this user cannot install the package (not root, no apt-get)."""
    found = ensure_tool(binary, package)
    if found is None:
        pytest.skip(f"{binary} is not installed and this user cannot apt-get install {package}")
    return found
