"""Bind a server command to 127.0.0.1 on a free port: whatever host and port the recipe says, the
launcher replaces them, so a benchmark never exposes a server on the network and two launches never
collide on a port. A port is free when it is chosen, not after: listener_of() tells whether what answers on it
is the launched server."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import socket
from collections.abc import Iterable
from pathlib import Path

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
            if listening_inodes(port):
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


def listeners(port: int, root: Path = Path("/proc")) -> dict[int, str]:
    """The LISTEN sockets (state 0A) on `port` at any address, from /proc/net/tcp and tcp6: inode -> local address."""
    found: dict[int, str] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = (root / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":
                continue
            try:
                address, at = fields[1].rsplit(":", 1)
                if int(at, 16) == port:
                    found[int(fields[9])] = _address(address)
            except (IndexError, ValueError):
                continue
    return found


def _address(text: str) -> str:
    """An address as /proc/net/tcp* writes it (hex, each 32-bit word in host order: little-endian here) in words."""
    raw = b"".join(bytes.fromhex(text[i:i + 8])[::-1] for i in range(0, len(text), 8))
    return str(ipaddress.ip_address(raw))


def listening_inodes(port: int, root: Path = Path("/proc")) -> set[int]:
    """Inodes of the LISTEN sockets (state 0A) on `port` (any address), from /proc/net/tcp and tcp6."""
    return set(listeners(port, root))


def exposed(port: int, pids: Iterable[int], root: Path = Path("/proc")) -> list[str]:
    """The addresses other than loopback on which one of `pids` listens on `port` (0.0.0.0, ::, a network's): a
    server whose command ignored the launcher's --host 127.0.0.1 answers other machines too."""
    wide = {inode: address for inode, address in listeners(port, root).items() if not _loopback(address)}
    pids = list(pids)
    return sorted({address for inode, address in wide.items() if any(holds(pid, {inode}, root) for pid in pids)})


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def holds(pid: int, inodes: set[int], root: Path = Path("/proc")) -> bool:
    """Whether process `pid` holds one of these socket inodes (False when its fds cannot be read: another user's)."""
    wanted = {f"socket:[{i}]" for i in inodes if i}
    try:
        fds = os.scandir(root / str(pid) / "fd")
    except OSError:
        return False
    with fds:
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(fd.path) in wanted:
                    return True
    return False


def listener_of(port: int, pids: Iterable[int]) -> bool | None:
    """Whether one of `pids` holds the socket listening on `port`: False when another process does (it took the
    port between free_port() and the server's bind), None when nothing listens or /proc cannot tell."""
    inodes = listening_inodes(port)
    return any(holds(pid, inodes) for pid in pids) if inodes else None


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
