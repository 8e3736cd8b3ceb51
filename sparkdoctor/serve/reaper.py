"""What a local server started outside its process group: made sparkdoctor's children while the server runs, then
found, stopped, reaped and reported at teardown.

A server may start a daemon in a session of its own (setsid, often with a double fork: Ray's backend does). It
leaves the group the teardown signals (serve/groups.py), and once its parent exits it is re-parented to the
nearest child subreaper above it (Linux's prctl PR_SET_CHILD_SUBREAPER), else to init, where nothing sparkdoctor
holds leads to it. The supervisor is one (serve/supervisor.py): it adopts such orphans while it runs and passes
them on when it exits. While a launched local server runs, sparkdoctor is one too, so they come to sparkdoctor
then. After the group is stopped, every child of sparkdoctor (its parent pid in /proc/PID/stat) that

- sparkdoctor did not start itself: every child it starts goes through proc.py, which registers it until it is
  reaped (`proc.live_pids()`: a probe of another thread, another launch's supervisor); the supervisor that led
  this group is excluded by pid as well;
- started no earlier than this launch's supervisor (field 22 of /proc/PID/stat);
- carries this launch's token in its environment (SPARKDOCTOR_SERVER_TOKEN, inherited by every process of the
  server) or, when it carries none (a daemon that scrubbed its environment; a zombie, with nothing left to
  read), belongs to the only local launch running

gets SIGTERM, a short grace, SIGKILL, and is reaped (waitpid: no zombie stays). Orphans are looked for until a
look finds no new one (a double fork re-parents the grandchild only when the middle process exits). Each one is
reported in the teardown line (pid and command); one still alive after SIGKILL is a leftover (`left`). Their
pids cannot be recycled under the signals: they are this process's children, unreaped.

The flag is process-wide: set while at least one local launch runs, cleared after the last one's teardown
(what was re-parented meanwhile stays a child), unless the command line's entry point holds it for its whole run
(orphans.py: it stops what is left at exit). Where prctl is not there (not Linux) nothing is set, and the
teardown line says such processes were not looked for. A container's processes are its runtime's (the shim,
podman's conmon) and go with `stop`/`rm`: the flag is never set for a container launch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

from sparkdoctor import orphans, proc
from sparkdoctor.serve.groups import Escaped, Teardown
from sparkdoctor.serve.supervisor import token_of

GRACE_S = 5.0  # SIGTERM to SIGKILL for a process found outside the group (the group already had its grace)
KILL_WAIT_S = 5.0
POLL_S = 0.05
COMMAND_MAX = 200
PROC = Path("/proc")

_lock = threading.Lock()
_active: set[str] = set()  # the tokens of the local launches running now (the flag is set while there are any)


def hold(token: str) -> str:
    """Be a child subreaper while the launch `token` runs: '' when this process is one, else the note for its
    teardown line (processes that leave its group then go to init, out of reach)."""
    with _lock:
        if not _active:
            why = orphans.subreaper(True)
            if why:
                return f"processes it started outside the group were not looked for ({why})"
        _active.add(token)
        return ""


def release(token: str) -> None:
    """The launch `token` is over; the flag is cleared with the last one."""
    with _lock:
        if token not in _active:
            return
        _active.discard(token)
        if not _active and not orphans.adopted():  # the entry point holds it for the whole run (orphans.py)
            orphans.subreaper(False)


def _command(pid: int, comm: str) -> str:
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        argv = []
    text = " ".join(a.decode(errors="replace") for a in argv).strip() or f"[{comm}]"
    return text if len(text) <= COMMAND_MAX else text[:COMMAND_MAX] + "..."


def _reap(pid: int) -> bool:
    """Whether `pid` is gone: reaped now, or no longer a child of this process."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


class _Search:
    """The children of this process that the launch `token` started outside its group, as they are found."""

    def __init__(self, pgid: int, token: str, floor: int | None, exclude: set[int]):
        self.pgid, self.token, self.floor, self.exclude = pgid, token, floor, exclude
        with _lock:
            self.alone = _active == {token}
        self.found: dict[int, Escaped] = {}
        self.others: set[int] = set()  # children that are not this launch's: looked at once, left alone

    def _ours(self, child: orphans.Child) -> bool:
        if self.floor is not None and child.start < self.floor:
            return False
        carried = token_of(child.pid) if child.state != "Z" else None
        return carried == self.token if carried is not None else self.alone

    def look(self, sig: int, how: str) -> int:
        """Signal each new one (a zombie is only reaped), reap what ended; the count of new ones."""
        children = orphans.children()  # first: a child listed here that proc started is registered by the next line
        skip = set(proc.live_pids()) | self.exclude | self.others
        new = 0
        for child in children:
            if child.pid in self.found or child.pid in skip:
                continue
            if child.pgrp == self.pgid:  # of the group (re-parented when its parent died first): the group's teardown
                if child.state == "Z" and self._ours(child):  # stopped it; it only needs reaping
                    _reap(child.pid)
                continue  # one still alive is already in the group's `left`
            if not self._ours(child):
                self.others.add(child.pid)
                continue
            new += 1
            self.found[child.pid] = Escaped(child.pid, _command(child.pid, child.comm),
                                            "had exited" if child.state == "Z" else how)
            if child.state != "Z":
                with contextlib.suppress(OSError):  # it ended meanwhile: the reap below sees it
                    os.kill(child.pid, sig)
        for e in self.pending():
            e.gone = _reap(e.pid)
        return new

    def pending(self) -> list[Escaped]:
        return [e for e in self.found.values() if not e.gone]

    def run(self, sig: int, how: str, until: float) -> None:
        while True:
            new = self.look(sig, how)
            if (not new and not self.pending()) or time.monotonic() >= until:
                return
            time.sleep(POLL_S)


def settle(report: Teardown, token: str, floor: int | None, exclude: set[int], grace: float = GRACE_S) -> None:
    """After the group `report.pgid` is stopped: stop, reap and add to `report` what the launch `token` started
    outside it. A zombie of the group itself (re-parented here when its parent died first) is only reaped."""
    t0 = time.monotonic()
    search = _Search(report.pgid, token, floor, exclude)
    search.run(signal.SIGTERM, "SIGTERM", t0 + grace)
    if search.pending():
        for e in search.pending():
            with contextlib.suppress(OSError):
                os.kill(e.pid, signal.SIGKILL)
            e.how += f" then SIGKILL after {grace:g}s"
        search.run(signal.SIGKILL, "SIGKILL", time.monotonic() + KILL_WAIT_S)
    report.escaped = sorted(search.found.values(), key=lambda e: e.pid)
    report.left = sorted({*report.left, *(e.pid for e in search.pending())})
    report.seconds += time.monotonic() - t0
