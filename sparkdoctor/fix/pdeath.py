"""The installer's children die with `fix`: a parent-death signal (Linux PR_SET_PDEATHSIG, SIGKILL).

A SIGKILL or an OOM kill of sparkdoctor cannot run any handler, and its children live in their own
process group (sparkdoctor.proc), so without this a pip that fix started keeps changing a venv that
nobody watches any more. Children are started from the main thread while inside (the signal follows
the thread that forked). A container target's `docker exec` dies too; the pip inside the container
is the container runtime's to stop (stated in docs/fix.md).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sparkdoctor import proc

PR_SET_PDEATHSIG = 1


def _preexec(parent: int) -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None

    libc = ctypes.CDLL(None, use_errno=True)

    def preexec() -> None:  # in the child, between fork and exec
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl: follow it now
            os._exit(137)

    return preexec


@contextmanager
def children_die_with_parent() -> Iterator[None]:
    before = proc.child_setup
    proc.child_setup = _preexec(os.getpid())
    try:
        yield
    finally:
        proc.child_setup = before
