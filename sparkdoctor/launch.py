"""Console entry point. Starts `check`'s target probes and GPU helper before the CLI framework is
imported (sparkdoctor/targets/early.py): the target probe is the long pole of a warm `check`, and
typer + rich + the rest of sparkdoctor load while it runs.

Before anything starts a child, it makes sure SIGTERM unwinds like Ctrl-C (so every child is
killed on the way out) and that fds 0-2 are taken, so a pipe to a child never lands on the fd of a
closed stdout.
"""

from __future__ import annotations

import gc
import os
import sys

from sparkdoctor import proc
from sparkdoctor.cli import main as cli_main
from sparkdoctor.targets import early


def _hold_std_fds() -> None:
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:  # closed by the caller (`>&-`): park /dev/null there; sys.stdout stays None
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        # A check lives well under a second and builds ~100k objects at import; the cycle collector's
        # passes over them are pure overhead there (~4% of its CPU). Reference counting still frees.
        gc.disable()

    _hold_std_fds()
    proc.install_signal_handlers()
    try:

        try:
            early.start(sys.argv)  # a live `check`: its probes and GPU helper start now (standard library + proc)
        except Exception:  # never let the head start break the CLI: the ordinary path starts what it needs
            early.drop()
    except (KeyboardInterrupt, proc.Interrupted) as exc:  # before the CLI could take over
        code, why = proc.interrupted(exc)
        if sys.stderr is not None:
            sys.stderr.write(f"sparkdoctor: error: {why}\n")
        sys.exit(code)
    cli_main()
