"""What an exec in a container left running when it ran out of time, stopped from this machine.

`docker exec` (and podman's) passes no end on: killing the container CLI leaves what it started running in the
container, and an interpreter that hangs before it reads the probe's bootstrap never reaches the bootstrap's own
deadline. Every exec of a container target carries a token in its environment (TOKEN_ENV), inherited by everything it
starts there; reap() finds those processes in this machine's /proc and stops them. That works where this machine sees
the container's processes and may signal them (a local rootful runtime run as root, a rootless one run as its user);
elsewhere nothing is found, and the container's own BOUNDED (targets/container.py, where the image has a sh) is all
there is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import replace

from sparkdoctor import proc

TOKEN_ENV = "SPARKDOCTOR_EXEC"  # in the environment of everything one exec starts in the container: what reap() finds
REAP_GRACE = 2.0  # seconds between reap()'s TERM (the bootstrap removes its folder) and its KILL


def reaped(res: proc.ProcResult, token: str) -> proc.ProcResult:
    """res, after reap(token) where the exec did not end by itself (timed out, or its client was killed)."""
    if res.timed_out or (res.returncode is not None and res.returncode < 0):
        left = reap(token)
        if left:
            note = (f"sparkdoctor: {len(left)} process(es) it started in the container could not be stopped from this "
                    f"machine (pids {', '.join(map(str, left[:4]))} here)")
            return replace(res, stderr=(res.stderr.rstrip("\n") + "\n" + note).lstrip("\n"))
    return res


def reap(token: str) -> list[int]:
    """Stop the processes of this machine whose environment holds TOKEN_ENV=token (what an exec left running in a
    container: `docker exec` passes no end on, and a hung interpreter never reads the bootstrap's deadline): TERM, then
    KILL after REAP_GRACE. The pids it could not signal; where the container's processes are not this machine's to
    read (a remote daemon, another user's), none are found and the container's own BOUNDED is all there is."""
    needle = f"{TOKEN_ENV}={token}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            with contextlib.suppress(OSError), open(f"/proc/{name}/environ", "rb") as fh:
                if needle in fh.read(1 << 20).split(b"\0"):
                    found.append(int(name))
    left = _signal_all(found, signal.SIGTERM)
    until = time.monotonic() + REAP_GRACE
    while time.monotonic() < until and any(_alive(pid) for pid in found if pid not in left):
        time.sleep(0.05)
    _signal_all([pid for pid in found if pid not in left and _alive(pid)], signal.SIGKILL)
    return left


def _signal_all(pids: list[int], sig: int) -> list[int]:
    denied = []
    for pid in pids:
        try:
            os.kill(pid, sig)
        except PermissionError:
            denied.append(pid)
        except OSError:
            pass
    return denied


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie does not: its parent, in the container, reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[:1] != [b"Z"]
    except OSError:
        return False

