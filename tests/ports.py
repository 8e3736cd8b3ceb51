"""Ports for tests that another process on a busy, shared machine cannot take from them.

A port found by binding port 0 and closing the socket is free only at that moment: another xdist worker's server
(or any program) may bind it before the process it was meant for does. That process then fails to start, or the
test talks to a stranger. Two ways out: a port that must refuse connections stays bound, never listening, for as
long as the test needs it (`refused_port`); a server started on a picked port is waited for until it listens
there itself, and started again on another port when it did not get that one (`start_on_a_free_port`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sparkdoctor.bench.behind import listening_inodes


def free_port() -> int:
    """A port nothing held a moment ago; only for a process that is then checked to have got it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A 127.0.0.1 port that refuses every connection while the block runs: bound and never listening (the kernel
    answers a connection to it with a reset), so no other process can start listening there meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def _group_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[2])


def _holds(pid: int, wanted: set[str]) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                return True
    return False


def owns_listener(pid: int, port: int) -> bool:
    """Whether process `pid`, or a process of the group it leads (a server started in a session of its own that
    listens from a child), holds a socket that listens on `port`."""
    wanted = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    if not wanted:
        return False
    if _holds(pid, wanted):
        return True
    group = [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) != pid and _group_of(int(e)) == pid]
    return any(_holds(member, wanted) for member in group)


def dies_with_me(argv: list[str]) -> list[str]:
    """argv under `setpriv --pdeathsig KILL` (it execs: the pid is the server's): a server a test starts in a session
    of its own goes when the test process dies though the test's `finally` never ran (a worker xdist kills, a second
    Ctrl-C). An interrupted CI-like run left a real vLLM server listening for the rest of the day."""
    return ["setpriv", "--pdeathsig", "KILL", "--", *argv] if shutil.which("setpriv") else argv


def start_on_a_free_port(start: Callable[[int], subprocess.Popen], limit_s: float = 120.0,
                         attempts: int = 5) -> tuple[subprocess.Popen, int]:
    """(server, port): `start(port)` run on a picked port until the process it started listens there itself. One
    that exits first (the port was taken before it bound it) is started again on another port. `limit_s` is a
    safety net for a server that neither listens nor exits, not a verdict on how fast it starts."""
    server: subprocess.Popen | None = None
    for _ in range(attempts):
        port = free_port()
        server = start(port)
        until = time.monotonic() + limit_s
        while server.poll() is None:
            if owns_listener(server.pid, port):
                return server, port
            if time.monotonic() > until:
                server.kill()
                server.wait(timeout=60)
                raise AssertionError(f"{server.args!r} neither listened on port {port} nor exited within {limit_s:.0f} s")
            time.sleep(0.05)
    assert server is not None
    raise AssertionError(f"{server.args!r} exited (code {server.returncode}) before it listened, {attempts} times: "
                         "not a port another process took")
