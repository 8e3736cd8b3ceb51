"""Debian tools the suite installs when missing (as root, like its dockerd): found on PATH, else apt-get."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from sparkdoctor import proc

APT_TIMEOUT = 600.0


def ensure_tool(binary: str, package: str) -> str | None:
    """The tool's path, installing its Debian package when missing (one installer at a time across xdist
    workers); None when this user cannot install it."""
    found = shutil.which(binary)
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    with open(Path(tempfile.gettempdir()) / "sparkdoctor-tests-apt.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shutil.which(binary):
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            argv = ["apt-get", "install", "-y", "-q", "--no-install-recommends", package]
            if not proc.run(argv, timeout=APT_TIMEOUT, env=env).ok:
                proc.run(["apt-get", "update", "-q"], timeout=APT_TIMEOUT, env=env)
                proc.run(argv, timeout=APT_TIMEOUT, env=env)
    return shutil.which(binary)


def tool_or_skip(binary: str, package: str) -> str:
    """ensure_tool, or skip the test where this user cannot install the package (not root, no apt-get)."""
    found = ensure_tool(binary, package)
    if found is None:
        pytest.skip(f"{binary} is not installed and this user cannot apt-get install {package}")
    return found
