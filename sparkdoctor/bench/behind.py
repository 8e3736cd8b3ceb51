"""What serves a local URL: the process listening on its port, and the toolchain that process runs.

`bench --url` without --python must not file a run under sparkdoctor's own venv. For a server on this
machine the listening socket is found in /proc/net/tcp and tcp6 (serve/binding.py), its inode in some
process's /proc/PID/fd, and that process tells the toolchain: its interpreter (argv[0] when it is a path
to a Python, else the venv of its script, else $VIRTUAL_ENV), or, when its cgroup names a container, that
container. Anything else (a remote host, a socket owned by another user, docker-proxy in front of a
container) is "toolchain unknown", said with the reason, and such a run stays out of conclusions.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
from pathlib import Path
from typing import TypedDict
from urllib.parse import urlsplit

from sparkdoctor import lookup
from sparkdoctor.serve.binding import holds, listening_inodes
from sparkdoctor.targets.early import python_of_command

LOOKUP_TIMEOUT = 5.0  # seconds for the name of a --url host
CONTAINER_ID = re.compile(r"(?:docker|containerd|libpod|crio)[-/:]?([0-9a-f]{64})")


def is_local(host: str) -> bool:
    """127.0.0.0/8, ::1, 0.0.0.0, localhost, or an address of this machine."""
    if host in ("localhost", ""):
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        try:  # a name whose lookup does not answer soon is taken for another machine's, not waited on
            ip = ipaddress.ip_address(lookup.getaddrinfo(host, None, LOOKUP_TIMEOUT, socket.AF_INET)[0][4][0])
        except (OSError, ValueError, IndexError):
            return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    try:
        with socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((str(ip), 0))  # only an address of this machine can be bound
        return True
    except OSError:
        return False


def _python_of(pid: int, root: Path) -> tuple[str | None, str]:
    try:
        argv = [a.decode(errors="replace") for a in (root / str(pid) / "cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return None, "its command line cannot be read"
    cwd = None
    with contextlib.suppress(OSError):
        cwd = os.readlink(root / str(pid) / "cwd")

    def absolute(p: str) -> Path:
        return Path(p) if os.path.isabs(p) or cwd is None else Path(cwd) / p

    if argv and Path(argv[0]).name.startswith("python") and os.sep in argv[0] and absolute(argv[0]).exists():
        return str(absolute(argv[0])), f"argv[0] of the process serving the port (pid {pid})"

    for arg in argv[:2]:
        if os.sep in arg:
            found = python_of_command([str(absolute(arg))])
            if found:
                return str(found), f"the venv of {arg}, run by the process serving the port (pid {pid})"
    try:
        env = dict(kv.split("=", 1) for kv in (root / str(pid) / "environ").read_bytes().decode(errors="replace").split("\0")
                   if "=" in kv)
    except OSError:
        env = {}
    venv = env.get("VIRTUAL_ENV")
    if venv and (Path(venv) / "bin" / "python").exists():
        return str(Path(venv) / "bin" / "python"), f"$VIRTUAL_ENV of the process serving the port (pid {pid})"
    return None, f"the process serving the port (pid {pid}, {' '.join(argv[:3])[:120]}) runs no Python sparkdoctor can find"


class Serving(TypedDict):
    """What serves a URL: at most one of python/container is set; `why` says how it was found, or why the
    toolchain is unknown."""

    pid: int | None
    python: str | None
    container: str | None
    why: str


def serving_process(url: str, root: Path = Path("/proc")) -> Serving:
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    out: Serving = {"pid": None, "python": None, "container": None, "why": ""}
    if not is_local(host):
        out["why"] = f"{host} is not this machine: its toolchain cannot be read from here (give --python)"
        return out
    inodes = listening_inodes(port, root)
    pids = sorted(int(e.name) for e in os.scandir(root) if e.name.isdigit() and holds(int(e.name), inodes, root))
    if not pids:
        out["why"] = (f"no process of this user listens on port {port} (another user's, or a container's port "
                      "published without a proxy): give --python")
        return out
    pid = out["pid"] = pids[0]
    cgroup = ""
    with contextlib.suppress(OSError):
        cgroup = (root / str(pid) / "cgroup").read_text()
    match = CONTAINER_ID.search(cgroup)
    if match:
        out["container"], out["why"] = match.group(1), f"the container of the process serving the port (pid {pid})"
        return out
    out["python"], out["why"] = _python_of(pid, root)
    return out
