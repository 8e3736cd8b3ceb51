"""Bind a server command to 127.0.0.1 on a free port: whatever host and port the recipe says, the
launcher replaces them, so a benchmark never exposes a server on the network and two launches never
collide on a port."""

from __future__ import annotations

import socket

LOCALHOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port nothing listens on right now on 127.0.0.1 (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        return sock.getsockname()[1]


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
