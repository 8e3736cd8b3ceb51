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

from sparkdoctor import proc
from sparkdoctor.errors import BenchFailure
from sparkdoctor.inputs import json_answer
from sparkdoctor.targets.early import NO_CWD

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


def all_listeners(root: Path = Path("/proc")) -> dict[int, tuple[str, int]]:
    """Every LISTEN socket (state 0A) of /proc/net/tcp and tcp6: inode -> (local address, port)."""
    found: dict[int, tuple[str, int]] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = (root / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A":
                continue
            with contextlib.suppress(IndexError, ValueError):
                address, at = fields[1].rsplit(":", 1)
                found[int(fields[9])] = (_address(address), int(at, 16))
    return found


def _address(text: str) -> str:
    """An address as /proc/net/tcp* writes it (hex, each 32-bit word in host order: little-endian here) in words."""
    raw = b"".join(bytes.fromhex(text[i:i + 8])[::-1] for i in range(0, len(text), 8))
    return str(ipaddress.ip_address(raw))


def listening_inodes(port: int, root: Path = Path("/proc")) -> set[int]:
    """Inodes of the LISTEN sockets (state 0A) on `port` (any address), from /proc/net/tcp and tcp6."""
    return {inode for inode, (_, at) in all_listeners(root).items() if at == port}


def wide_listeners(pids: Iterable[int], root: Path = Path("/proc")) -> list[tuple[str, int]]:
    """(address, port) of every socket one of `pids` listens on at an address other than loopback, on any port: the
    chosen one, and those a server opens beside it (a metrics port, Ray's, a distributed store's)."""
    wide = {inode: where for inode, where in all_listeners(root).items() if not _loopback(where[0])}
    held: set[int] = set()
    for pid in pids if wide else ():
        held |= sockets_of(pid, root) & wide.keys()
    return sorted({wide[inode] for inode in held})


def exposed(port: int, pids: Iterable[int], root: Path = Path("/proc"),
            wide: list[tuple[str, int]] | None = None) -> str | None:
    """What the server's processes listen on beyond loopback (`wide`, else read from `pids`), in words (None: 127.0.0.1
    only), for the one line that fails its launch: servers sparkdoctor starts listen on 127.0.0.1 only, a side port as
    much as the served one."""
    wide = wide_listeners(pids, root) if wide is None else wide
    own = sorted({address for address, at in wide if at == port})
    side = [f"{address} port {at}" for address, at in wide if at != port]
    said = [f"the server listens on {' and '.join(own)} port {port}"] if own else []
    if side:
        said.append(f"{'it' if own else 'the server'} also listens on {', '.join(side[:4])}{' ...' if len(side) > 4 else ''}"
                    " (a port it opens beside the served one: a metrics, Ray or other side port)")
    if not said:
        return None
    why = f" (its command ignored --host {LOCALHOST})" if own else " (bind it to 127.0.0.1 in the recipe, or switch it off)"
    return f"{'; '.join(said)}, not on {LOCALHOST} only{why}"


# Run as root in a container by its own interpreter: every LISTEN socket a process of the container holds, as
# [address in /proc/net/tcp's hex, port], from the container's own /proc (its processes; its network, the host's under
# --network host, the runtime's own namespace for a rootless docker).
HELD_INSIDE = r"""
import json, os
held = set()
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        continue
    for fd in fds:
        try:
            link = os.readlink("/proc/%s/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            held.add(link[8:-1])
out = []
for name in ("tcp", "tcp6"):
    try:
        lines = open("/proc/net/" + name).read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        f = line.split()
        if len(f) > 9 and f[3] == "0A" and f[9] in held:
            out.append([f[1].rsplit(":", 1)[0], int(f[1].rsplit(":", 1)[1], 16)])
print(json.dumps(out))
"""


def wide_inside(exec_prefix: list[str], timeout: float = 10.0) -> list[tuple[str, int]] | None:
    """(address, port) of the sockets a container's processes listen on beyond loopback, asked of the container
    itself (`exec_prefix`: RUNTIME exec -u 0 NAME) by its python3 or python; None when neither answers."""
    for python in ("python3", "python"):
        res = proc.run([*exec_prefix, python, "-S", "-c", NO_CWD + HELD_INSIDE], timeout=timeout)
        if res.ok:
            try:
                held = [(_address(str(a)), int(p)) for a, p in json_answer(res.stdout.strip().splitlines()[-1])]  # type: ignore[attr-defined]
            except (ValueError, IndexError, TypeError):  # NotJSON too: no list of sockets, nothing known of them
                return None
            return sorted({(a, p) for a, p in held if not _loopback(a)})
    return None

def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def holds(pid: int, inodes: set[int], root: Path = Path("/proc")) -> bool:
    """Whether process `pid` holds one of these socket inodes (False when its fds cannot be read: another user's)."""
    return bool(sockets_of(pid, root) & {i for i in inodes if i})


def sockets_of(pid: int, root: Path = Path("/proc")) -> set[int]:
    """The inodes of the sockets process `pid` holds (none when its fds cannot be read: another user's)."""
    found: set[int] = set()
    try:
        fds = os.scandir(root / str(pid) / "fd")
    except OSError:
        return found
    with fds:
        for fd in fds:
            with contextlib.suppress(OSError):
                link = os.readlink(fd.path)
                if link.startswith("socket:[") and link.endswith("]") and link[8:-1].isdigit():
                    found.add(int(link[8:-1]))
    return found


def listener_of(port: int, pids: Iterable[int]) -> bool | None:
    """Whether one of `pids` holds the socket listening on `port`: False when another process does (it took the
    port between free_port() and the server's bind), None when nothing listens or /proc cannot tell."""
    inodes = listening_inodes(port)
    return any(holds(pid, inodes) for pid in pids) if inodes else None


class RebindRefused(BenchFailure):
    """The command's --host/--port cannot be put where its server reads them (str(): one line, why and what to do)."""

    code = "rebind"


# vLLM's parser keeps argparse's abbreviations (a unique prefix is the option): `--hos 0.0.0.0` after the replaced
# `--host` would be the address it binds, the last one winning
ABBREVIATED = {"--ho": "--host", "--hos": "--host", "--po": "--port", "--por": "--port"}


def rebind(argv: list[str], host: str, port: int) -> list[str]:
    """argv with every --host/--port (both `--flag VALUE` and `--flag=VALUE`, and vLLM's abbreviations `--hos`, `--por`)
    replaced by host and port, appended when the command had none.

    RebindRefused when one must be added and the command holds a `--`: appended after it, a server reads them as
    positional arguments (`python srv.py -- x`: it binds its own default address and port; vLLM refuses them), while
    for a wrapper (`uv run -- vllm serve M`) after it is right; which one it is cannot be told from the argv, but where
    vLLM's own command line follows the last `--` (_vllm_after_last_separator)."""
    out: list[str] = []
    seen = {"--host": False, "--port": False}
    value = {"--host": host, "--port": str(port)}
    i = 0
    while i < len(argv):
        arg = ABBREVIATED.get(argv[i], argv[i])
        name, eq, given = arg.partition("=")
        if eq and name in ABBREVIATED:
            arg = f"{ABBREVIATED[name]}={given}"
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
    missing = [flag for flag, was in seen.items() if not was]
    if missing and "--" in argv[1:] and not _vllm_after_last_separator(argv):
        raise RebindRefused(f"its command has a `--` and no {' or '.join(missing)}: sparkdoctor cannot tell whether "
                            "the server reads its options before or after that `--`; write `--host 127.0.0.1 --port "
                            f"8000` where the server reads them (sparkdoctor replaces the values with {host} and a free "
                            "port)")
    for flag in missing:
        out += [flag, value[flag]]
    return out


def _vllm_after_last_separator(argv: list[str]) -> bool:
    """Whether what follows the last `--` is a vLLM server's own command line (`uv run -- vllm serve M`, `... --
    python -m vllm.entrypoints.openai.api_server`): then that `--` is a wrapper's and vLLM reads the flags after it."""
    last = len(argv) - 1 - argv[::-1].index("--")
    rest = argv[last + 1:]
    if rest[:1] and Path(rest[0]).name == "vllm":
        return rest[1:2] == ["serve"]
    return bool(rest[:1]) and Path(rest[0]).name.startswith("python") and rest[1:2] == ["-m"] and \
        rest[2:3] != [] and rest[2].split(".")[0] == "vllm"
