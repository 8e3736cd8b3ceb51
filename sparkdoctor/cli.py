"""The `sparkdoctor` command: the app and `main`. Thin on purpose.

Every verb lives in sparkdoctor/commands/<verb>.py (options, `run(options) -> Result`, registration) and
loads on first use (commands.LazyVerbs). Every failure reaches the user as one line on stderr and an exit
code from sparkdoctor/exitcodes.py; under `--format json` also as a JSON document on stdout.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from typing import NoReturn

import typer

from sparkdoctor import __version__, proc
from sparkdoctor.commands import LazyVerbs
from sparkdoctor.errors import SparkdoctorError, UsageError
from sparkdoctor.exitcodes import EXIT_USAGE
from sparkdoctor.stderr import err

app = typer.Typer(
    cls=LazyVerbs,  # every verb loads on first use: sparkdoctor/commands/__init__.py
    name="sparkdoctor",
    help="Toolchain doctor for LLM serving on NVIDIA DGX Spark (GB10, sm_121a).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sparkdoctor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    pass


def _fail(exc: BaseException, message: str, code: int) -> NoReturn:
    """One line on stderr, the JSON error document if JSON was asked for, the exit code."""
    from sparkdoctor import emit

    if message:
        err(message)
    if emit.REQUESTED.format is None:
        emit.REQUESTED.format = emit.requested_from_argv(sys.argv[1:])
    emit.emit_error(exc, code)
    sys.exit(code)


def interrupted(exc: BaseException) -> NoReturn:
    """SIGINT, SIGTERM or SIGHUP: every child killed, one line, the JSON document if asked for, 128 + signal. A second
    signal (Ctrl-C pressed again; `timeout -s INT` signals the process and then its group) is ignored from here to the
    exit: it unwound the clean-up with a traceback and no document."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(sig, signal.SIG_IGN)
    code, why = proc.interrupted(exc)
    _fail(exc, why, code)


def _drop_impossible_sizes() -> None:
    """rich sizes its drawing by COLUMNS and LINES: 0 columns draws nothing at all, 99999999999 exhausts memory and
    "²" (a digit that int() refuses) raises. Ignore such values, as rich ignores "abc": the terminal's own size,
    or 80 columns on a pipe."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and not (value.isascii() and value.isdigit() and 0 < int(value) <= 10_000):
            del os.environ[name]


def _nearest_command(exc: BaseException, message: str) -> str:
    """` Did you mean 'check'?` for `sparkdoctor chek`, in click's words: click says it of a near subcommand
    (`matrix lst`) but typer's top-level group never did."""
    ctx = getattr(exc, "ctx", None)
    list_commands = getattr(getattr(ctx, "command", None), "list_commands", None)
    if not message.startswith("No such command") or "Did you mean" in message or not callable(list_commands):
        return ""
    import difflib

    typed = message.split("'")[1] if message.count("'") >= 2 else ""
    near = difflib.get_close_matches(typed, list_commands(ctx), n=1)
    return f" Did you mean '{near[0]}'?" if near else ""


def main() -> None:
    """Console entry point: every failure is one line and a documented exit code."""
    debug = bool(os.environ.get("SPARKDOCTOR_DEBUG"))
    _drop_impossible_sizes()
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except SparkdoctorError as exc:
        _fail(exc, str(exc), exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, proc.Interrupted) as exc:
        interrupted(exc)
    except Exception as exc:  # click usage errors and real bugs alike get one line
        if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:  # Path.exists() raises it (Python 3.11)
            # wherever a path from the command line is looked at: bad input (the line quotes its start: text.error_line)
            message = f"{exc.filename or ''}: {exc.strerror or 'file name too long'}"
            _fail(UsageError(message), message, EXIT_USAGE)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            # a write nothing else caught (click's --help to `> /dev/full`, a file on a full disk): no bug of ours
            _fail(exc, f"cannot write: {exc.strerror}{f' ({exc.filename})' if exc.filename else ''}", EXIT_USAGE)
        # click's errors (vendored inside typer in recent versions) carry format_message();
        # match by behaviour rather than by a private import path.
        if type(exc).__name__ == "Abort":
            _fail(UsageError("aborted"), "aborted", EXIT_USAGE)
        format_message = getattr(exc, "format_message", None)
        if callable(format_message):
            message = format_message()
            if not message:  # bare `sparkdoctor` (or `matrix`), whose help is already printed
                sys.exit(EXIT_USAGE)
            message += _nearest_command(exc, message)
            _fail(UsageError(message), message, EXIT_USAGE)
        if debug:
            raise
        _fail(exc, f"internal error: {type(exc).__name__}: {exc} (set SPARKDOCTOR_DEBUG=1 for the traceback)", EXIT_USAGE)
