"""Console entry point. Starts the target probe and GPU helper of `check` and `recipe check` (and the
latter's flags probe) before the CLI framework is imported (sparkdoctor/targets/early.py): the target
probe is the long pole of a warm run, and typer + rich + the rest of sparkdoctor load while it runs.

Before anything starts a child, it makes sure SIGTERM unwinds like Ctrl-C (so every child is
killed on the way out) and that fds 0-2 are taken, so a pipe to a child never lands on the fd of a
closed stdout.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from types import FrameType


def _hold_std_fds() -> None:
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:  # closed by the caller (`>&-`): park /dev/null there; sys.stdout stays None
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def read_recipe(ref: str) -> tuple[list[str], dict[str, str]] | None:
    """A recipe's command line and env for `recipe check`'s head start (targets/early.py), read through the
    recipes' own reader; None for a file over early.EARLY_RECIPE_BYTES (the ordinary path reads it)."""
    # PyYAML: ~15 ms, paid only by `recipe check`
    from sparkdoctor.recipes import find, load
    from sparkdoctor.targets.early import EARLY_RECIPE_BYTES

    if os.path.getsize(find(ref)) > EARLY_RECIPE_BYTES:
        return None
    recipe = load(ref, {})
    return [str(a) for a in recipe.argv], dict(recipe.env)


def _hold_signals() -> list[int]:
    """Until the real handlers are in (proc.install_signal_handlers), a SIGINT, SIGTERM or SIGHUP is kept, to be
    raised once they are: while typer, rich and the rest load (half a second on a busy box) Python printed a
    KeyboardInterrupt traceback, or SIGTERM ended the process with no line and, under --format json, no document.
    A signal the parent ignores stays ignored."""
    held: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        held.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, hold)
    return held


def main() -> None:
    held = _hold_signals()
    if sys.argv[1:2] == ["check"] or sys.argv[1:3] == ["recipe", "check"]:
        # A check lives well under a second and builds ~100k objects at import; the cycle collector's
        # passes over them are pure overhead there (~4% of its CPU). Reference counting still frees.
        gc.disable()

    from sparkdoctor import orphans, proc
    from sparkdoctor.cli import interrupted
    from sparkdoctor.cli import main as cli_main
    from sparkdoctor.targets import early

    _hold_std_fds()
    proc.install_signal_handlers()
    orphans.adopt()  # before the first probe starts: a daemon one starts is stopped at exit (orphans.py)
    try:
        if held:
            raise proc.Interrupted(held[0])
        try:
            early.start(sys.argv, read_recipe)  # a live `check` or `recipe check`: its probes and GPU helper start now
        except Exception:  # never let the head start break the CLI: the ordinary path starts what it needs
            early.drop()
    except (KeyboardInterrupt, proc.Interrupted) as exc:  # before the CLI could take over: its line and document
        interrupted(exc)
    try:
        cli_main()
    finally:
        _flush_quietly()


def _flush_quietly() -> None:
    """Flush stdout and stderr before the interpreter does. Where a stream cannot take what is left in its buffer
    (`2> /dev/full`, a closed reader), that is dropped: the fd goes to /dev/null. Left to the interpreter's own final
    flush (block-buffered streams, no PYTHONUNBUFFERED), it printed "Exception ignored ..." and exited 120, whatever
    the command's exit code."""
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            # imported only here: a run whose streams flush never loads emit for this
            from sparkdoctor.emit import reader_left

            reader_left(fd)
