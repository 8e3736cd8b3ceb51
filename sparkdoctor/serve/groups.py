"""Tear a server's whole process group down and prove it is gone.

A vLLM server is a tree (API server, engine core, workers); killing the first pid leaves the rest
holding memory and the port. The launcher starts the server in a session of its own, so its process
group id is its pid and every child inherits it: SIGTERM to the group, a grace period, SIGKILL to the
group, then a look in /proc for any process still in the group. A process that is left is reported,
never assumed gone. A process the server started outside its group (setsid: a daemon) is found and stopped by
serve/reaper.py; the Teardown here reports it too (`escaped`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field

from sparkdoctor import orphans
from sparkdoctor.serve.supervisor import group_members, stat_of

members = group_members  # pids of the live processes of a group, in order (read from /proc)


def tree(pid: int) -> list[int]:
    """`pid` and every live (non-zombie) process descended from it, read from /proc: a container's processes as the
    host sees them (its first process's pid is the runtime's State.Pid); [] for pid 0 or one that is gone."""
    if pid <= 0 or not stat_of(pid):
        return []
    return sorted([pid, *(c.pid for c in orphans.descendants({pid}) if c.state != "Z")])  # a zombie has no children


@dataclass
class Escaped:
    """A process the server started outside its process group, found at teardown (serve/reaper.py)."""

    pid: int
    command: str
    how: str = ""  # "SIGTERM", "SIGKILL after 5s", or "had exited" (a zombie, reaped)
    gone: bool = False  # reaped: it no longer exists

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command}): {self.how}" + ("" if self.gone else ", still alive")

    def to_dict(self) -> dict[str, object]:
        return {"pid": self.pid, "command": self.command, "how": self.how, "gone": self.gone}


@dataclass
class Teardown:
    """How a group was taken down: the signals sent, how long it took, and any process left in it."""

    pgid: int
    signals: list[str] = field(default_factory=list)
    seconds: float = 0.0
    leader_exit: int | None = None
    left: list[int] = field(default_factory=list)
    escaped: list[Escaped] = field(default_factory=list)  # started outside the group (setsid), found and stopped
    note: str = ""  # what this teardown could not look for (e.g. no subreaper: escaped daemons not tracked)

    @property
    def clean(self) -> bool:
        return not self.left

    def describe(self) -> str:
        how = " then ".join(self.signals) or "no signal needed (it had exited)"
        text = f"process group {self.pgid}: {how}"
        if self.escaped:
            text += (f"; {len(self.escaped)} process(es) it started outside the group: "
                     + "; ".join(e.describe() for e in self.escaped))
        if self.left:
            text += (f"; {len(self.left)} process(es) still alive after {self.seconds:.1f}s: "
                     f"pids {', '.join(map(str, self.left))}")
        elif self.escaped:
            text += f"; none of them left ({self.seconds:.1f}s)"  # never "nothing left": something was
        else:
            text += f"; nothing left ({self.seconds:.1f}s)"
        return f"{text}; {self.note}" if self.note else text

    def to_dict(self) -> dict[str, object]:
        return {"pgid": self.pgid, "signals": list(self.signals), "seconds": round(self.seconds, 3),
                "leader_exit": self.leader_exit, "left": list(self.left),
                "escaped": [e.to_dict() for e in self.escaped], "note": self.note}


def _signal(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _wait_gone(pgid: int, leader: subprocess.Popen[bytes] | None, until: float) -> bool:
    while True:
        if leader is not None:
            leader.poll()  # reap the leader, or it stays a zombie we would wait on forever
        if not members(pgid):
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.1)


def terminate(pgid: int, leader: subprocess.Popen[bytes] | None = None, grace: float = 15.0, kill_wait: float = 5.0) -> Teardown:
    """SIGTERM the group, SIGKILL it after `grace` seconds, and report what (if anything) is left."""
    start = time.monotonic()
    report = Teardown(pgid)
    if members(pgid):
        if _signal(pgid, signal.SIGTERM):
            report.signals.append("SIGTERM")
        if not _wait_gone(pgid, leader, time.monotonic() + grace):
            if _signal(pgid, signal.SIGKILL):
                report.signals.append(f"SIGKILL after {grace:g}s")
            _wait_gone(pgid, leader, time.monotonic() + kill_wait)
    if leader is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            leader.wait(timeout=max(0.1, kill_wait))
        report.leader_exit = leader.returncode
    report.left = members(pgid)
    report.seconds = time.monotonic() - start
    return report
