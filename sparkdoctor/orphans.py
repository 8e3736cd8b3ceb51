"""What a child of sparkdoctor started in a session of its own: adopted while sparkdoctor runs, stopped when it ends.

proc.py gives every child a process group of its own and kills the groups still alive at exit. A process that leaves
its group (setsid, often with a double fork: a `--python` that is a wrapper script starting a daemon, a package a
kernel probe imports) is not in any of them; once its parent exits it is re-parented to the nearest child subreaper
(Linux's prctl PR_SET_CHILD_SUBREAPER), else to init, where nothing sparkdoctor holds leads to it, and it outlived
sparkdoctor (`check --python W`, W running `setsid sleep 600 &`, left the sleep behind).

The command line's entry point makes this process a child subreaper for its whole run (adopt()), so such a process
becomes its child. At exit (proc.kill_all) every child of this process is stopped (SIGKILL, to its process group too
when it leads one) and reaped, again until a look finds none (a double fork re-parents the grandchild only when
the middle process exits), but those it did not start: a process this one inherited (`sh -c 'sleep 9 & exec
sparkdoctor ...'` leaves the sleep a child of sparkdoctor) was there before adopt(), and is left alone.
Where prctl is not there (not Linux) nothing is adopted, as before. serve/reaper.py stops what a launched server
started outside its group at the server's teardown, with its own rules; it leaves the flag set while adopt() holds it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Container
from typing import NamedTuple

PR_SET_CHILD_SUBREAPER = 36
STOP_S = 2.0  # looking for orphans at exit: SIGKILL is immediate, a double fork's grandchild comes within milliseconds
POLL_S = 0.02

_adopted = False
_inherited: set[tuple[int, int]] = set()  # (pid, start) of the children this process had before adopt()


def subreaper(on: bool) -> str | None:
    """Set or clear this process's child-subreaper flag; None when done, else why not."""
    if not sys.platform.startswith("linux"):
        return f"no prctl(PR_SET_CHILD_SUBREAPER): not Linux ({sys.platform})"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            return f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:
        return f"no prctl(PR_SET_CHILD_SUBREAPER): {exc}"
    return None


def adopt() -> str | None:
    """Be a child subreaper until this process ends: None when it is one, else why not."""
    global _adopted
    _inherited.update((c.pid, c.start) for c in children())
    why = subreaper(True)
    _adopted = why is None
    return why


def adopted() -> bool:
    return _adopted


class Child(NamedTuple):
    pid: int
    ppid: int
    state: str  # "Z": a zombie
    pgrp: int
    start: int  # clock ticks since boot
    comm: str


def processes(parents: Container[int] | None = None) -> list[Child]:
    """Every process whose parent is in `parents` (every process for None), zombies included. Plain reads of bytes:
    children() runs at every start and exit (2 ms for 160 processes, against 7 through pathlib and text)."""
    found = []
    try:
        names = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for name in names:
        with contextlib.suppress(OSError, IndexError, ValueError):  # gone while we looked
            with open(f"/proc/{name}/stat", "rb") as f:
                head, _, tail = f.read().rpartition(b")")
            fields = tail.split()
            if parents is None or int(fields[1]) in parents:
                found.append(Child(int(name), int(fields[1]), fields[0].decode(errors="replace"), int(fields[2]),
                                   int(fields[19]), head.partition(b"(")[2].decode(errors="replace")))
    return found


def children() -> list[Child]:
    """Every child of this process, zombies included."""
    return processes({os.getpid()})


def descendants(roots: set[int]) -> list[Child]:
    """Every process below `roots` (children, their children, ...), zombies included, from one scan."""
    kids: dict[int, list[Child]] = {}
    for p in processes():
        kids.setdefault(p.ppid, []).append(p)
    found: dict[int, Child] = {}
    stack = list(roots)
    while stack:
        for k in kids.get(stack.pop(), []):
            if k.pid not in found:
                found[k.pid] = k
                stack.append(k.pid)
    return list(found.values())

def stop() -> list[int]:
    """Kill and reap every child of this process it did not inherit, until a look finds none (or STOP_S passed);
    the pids stopped. A no-op unless adopt() made this process a subreaper."""
    if not _adopted:
        return []
    own_group = os.getpgrp()
    stopped: dict[int, None] = {}
    until = time.monotonic() + STOP_S
    while True:
        found = [c for c in children() if (c.pid, c.start) not in _inherited]
        for pid, _ppid, state, pgrp, _start, _comm in found:
            if state != "Z":
                with contextlib.suppress(OSError):  # it ended meanwhile: the reap below sees it
                    os.kill(pid, signal.SIGKILL)
                if pgrp == pid and pgrp != own_group:  # it leads a group (setsid): what it started there goes too
                    with contextlib.suppress(OSError):
                        os.killpg(pgrp, signal.SIGKILL)
                stopped[pid] = None
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        if not found or time.monotonic() >= until:
            return list(stopped)
        time.sleep(POLL_S)
