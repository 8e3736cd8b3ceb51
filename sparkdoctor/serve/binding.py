"""Bind a server command to 127.0.0.1 on a free port: whatever host and port the recipe says, the
launcher replaces them, so a benchmark never exposes a server on the network and two launches never
collide on a port. A port is free when it is chosen, not after: listener_of() tells whether what answers on it
is the launched server."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterable

LOCALHOST = "127.0.0.1"


FIRST_PORT = 20000  # above the ports services ask for by number (Ray's workers take 10002-19999 by default)
END_PORT = 30000  # below Kubernetes' NodePorts (30000-32767), which kube-proxy answers on 127.0.0.1 with no socket
TRIES = 32


def free_port() -> int:
    """A TCP port nothing holds right now on 127.0.0.1, chosen at random below the kernel's ephemeral range.

    The server binds it seconds later. A port the kernel chose (bind to port 0) is one it hands out again to any other
    program's bind to port 0, and to every outgoing connection, in the meantime: on a busy machine (a test suite's
    parallel workers) one of them took it, and the launch failed with "Address already in use". Below that range only
    a program that asks for that very number can. A port something listens on at any address is passed over, and
    the range stops below Kubernetes' NodePorts (forwarded by the firewall, so bind() does not see them taken).
    Where the ephemeral range starts too low to leave room, the kernel chooses."""
    end = min(_ephemeral_low() or FIRST_PORT, END_PORT)
    if end - FIRST_PORT >= TRIES:
        for port in random.sample(range(FIRST_PORT, end), TRIES):
            if _listening(port):
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind((LOCALHOST, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        return sock.getsockname()[1]


def _ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int | None:
    """The first port of the range the kernel hands out to bind(0) and connect(), or None if it cannot be read."""
    try:
        with open(path, encoding="ascii") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _listening(port: int) -> set[str]:
    """The inodes of the TCP sockets listening on `port`, any address (/proc/net/tcp and tcp6; state 0A)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as fh:
                rows = [line.split() for line in fh.readlines()[1:]]
        except OSError:
            continue
        found.update(f[9] for f in rows if len(f) > 9 and f[3] == "0A" and f[1].rsplit(":", 1)[-1] == f"{port:04X}")
    return found


def listener_of(port: int, pids: Iterable[int]) -> bool | None:
    """Whether one of `pids` holds the socket listening on `port`: False when another process does (it took the
    port between free_port() and the server's bind), None when nothing listens or /proc cannot tell."""
    inodes = _listening(port)
    if not inodes:
        return None
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return True
    return False


def rebind(argv: list[str], host: str, port: int) -> list[str]:
    """argv with every --host/--port (both `--flag VALUE` and `--flag=VALUE`) replaced by host and port,
    appended when the command had none."""
    out: list[str] = []
    seen = {"--host": False, "--port": False}
    value = {"--host": host, "--port": str(port)}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in value and i + 1 < len(argv):
            out += [arg, value[arg]]
            seen[arg] = True
            i += 2
            continue
        flag = next((f for f in value if arg.startswith(f + "=")), None)
        if flag:
            out.append(f"{flag}={value[flag]}")
            seen[flag] = True
        else:
            out.append(arg)
        i += 1
    for flag, was in seen.items():
        if not was:
            out += [flag, value[flag]]
    return out
