"""The one-line messages on stderr: `sparkdoctor: error: ...` and `sparkdoctor: warning: ...`.

At the base, so that emit (a result's notes) and the commands (through sparkdoctor/cli_support.py) say them the
same way without importing upward.
"""

from __future__ import annotations

import contextlib
import sys

from sparkdoctor.text import error_line


def say(kind: str, message: str) -> None:
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):  # a closed stderr: the exit code is all that is left
            sys.stderr.write(f"sparkdoctor: {kind}: {error_line(message)}\n")
            sys.stderr.flush()


def err(message: str) -> None:
    say("error", message)


def warn(message: str) -> None:
    say("warning", message)
