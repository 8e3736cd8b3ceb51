"""Tear a server's whole process group down and prove it is gone.

A vLLM server is a tree (API server, engine core, workers); killing the first pid leaves the rest
holding memory and the port. The launcher starts the server in a session of its own, so its process
group id is its pid and every child inherits it: SIGTERM to the group, a grace period, SIGKILL to the
group, then a look in /proc for any process still in the group. A process that is left is reported,
never assumed gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")


def members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes whose process group is pgid, read from /proc."""
    found: list[int] = []
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return found
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone while we looked
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) >= 3 and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return sorted(found)


@dataclass
class Teardown:
    """How a group was taken down: the signals sent, how long it took, and any process left in it."""

    pgid: int
    signals: list[str] = field(default_factory=list)
    seconds: float = 0.0
    leader_exit: int | None = None
    left: list[int] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.left

    def describe(self) -> str:
        how = " then ".join(self.signals) or "no signal needed (it had exited)"
        if self.left:
            return (f"process group {self.pgid}: {how}; {len(self.left)} process(es) still alive after "
                    f"{self.seconds:.1f}s: pids {', '.join(map(str, self.left))}")
        return f"process group {self.pgid}: {how}; nothing left ({self.seconds:.1f}s)"

    def to_dict(self) -> dict[str, object]:
        return {"pgid": self.pgid, "signals": list(self.signals), "seconds": round(self.seconds, 3),
                "leader_exit": self.leader_exit, "left": list(self.left)}


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
        try:
            leader.wait(timeout=max(0.1, kill_wait))
        except subprocess.TimeoutExpired:
            pass
        report.leader_exit = leader.returncode
    report.left = members(pgid)
    report.seconds = time.monotonic() - start
    return report
