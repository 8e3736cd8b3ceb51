"""The machine sparkdoctor runs on, described like the target probe describes a target's host.

For a Python target the probe's own answer is the host (same machine). For a container target the
probe sees the container's /etc/os-release, so the host's OS, CPU and kernel are read here instead:
what is in the container is the container's, what is under it is the host's.
"""

from __future__ import annotations

import contextlib
import os

from sparkdoctor.collect.hostroot import host_root


def local_host() -> dict[str, object]:
    uname = os.uname()
    host: dict[str, object] = {"os": None, "machine": uname.machine, "kernel": uname.release}
    with contextlib.suppress(OSError), open(host_root() / "etc" / "os-release", encoding="utf-8", errors="replace") as fh:
        for line in fh.read(64 * 1024).splitlines():
            if line.startswith("PRETTY_NAME="):
                host["os"] = line.split("=", 1)[1].strip().strip("\"'")
                break
    return host
