"""`sparkdoctor explain [FILE|-]`: which known problems does this error text or server log show?

Reads pasted text (stdin, `-`) or a log file, matches it against every matrix entry's symptoms
(sparkdoctor.matrix.symptoms: exact, then tolerant of wrapping, colour, paths and numbers) and
prints each matched entry with its evidence level, what to do and its references. A line that
several entries explain is reported as ambiguous, with the candidates and the conditions that tell
them apart (`sparkdoctor check` decides). Nothing about the box is probed: the text alone is the
evidence.
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from sparkdoctor.cli_support import DEFAULT_TIMEOUT
from sparkdoctor.commands.options import (
    NAMES_A_FILE,
    Fmt,
    Output,
    Timeout,
    format_option,
    verb,
)
from sparkdoctor.errors import InputError, UsageError
from sparkdoctor.matrix.explanation import Explanation
from sparkdoctor.result import Format, Result
from sparkdoctor.views.explain import VIEW

FORMATS = VIEW.formats
MAX_BYTES = 256 * 1024 * 1024  # a server log can be big; past this it is surely not text to explain
_TOO_BIG = f"more than {MAX_BYTES // (1024 * 1024)} MiB; pass the part of the log around the error"


@dataclass
class ExplainCommand:
    source: Annotated[str, typer.Argument(metavar="[FILE|-]", help="A log, or '-' (default) for stdin; an argument with a space that names no file is the error text itself."), NAMES_A_FILE] = "-"
    matrix: Annotated[Path | None, typer.Option("--matrix", help="Matrix folder or file (default: bundled).")] = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    timeout: Timeout = DEFAULT_TIMEOUT

    def refuse_bad_options(self) -> None:
        from sparkdoctor.runlimit import refuse_bad_timeout

        Format.parse(self.fmt, FORMATS)
        refuse_bad_timeout(self.timeout)


def run(options: ExplainCommand) -> Result[Explanation]:
    """The text matched against every entry's symptoms. Exit 0: something matched; 1: nothing did. Unreadable
    text (InputError), a bad matrix (MatrixError) or a run out of time (OutOfTime) is exit 2 by itself."""
    from sparkdoctor.runlimit import run_limit

    options.refuse_bad_options()
    # pasted at a terminal: read before the run's clock starts (a person types at their own pace)
    pasted = _read_terminal() if options.source == "-" and sys.stdin is not None and sys.stdin.isatty() else None
    with run_limit(options.timeout, "explain"):
        from sparkdoctor.matrix import load
        from sparkdoctor.matrix.ambiguity import ambiguous_lines
        from sparkdoctor.matrix.symptoms import line_count, match_text

        try:
            text, label = pasted or read_text(options.source)
        except InputError:
            _refuse_an_entry_id(options.source, options.matrix)
            raise
        matrix = load(options.matrix)
        matches = match_text(text, matrix.entries)
        groups = ambiguous_lines(matches)  # one line, several known causes: never shown as one exact match
        explanation = Explanation(matches, label, line_count(text), groups)
    return Result("explain", "explain", explanation, exit_code=explanation.exit_code, notes=matrix.notes())


def _refuse_an_entry_id(source: str, matrix_path: Path | None) -> None:
    """`explain torch-cuda-below-128`, a finding's id copied from check, names no file: say where its entry is
    printed, not only "No such file or directory"."""
    if source == "-" or any(c.isspace() or c in "/\\" for c in source) or os.path.lexists(source):
        return
    from sparkdoctor.matrix import load

    if any(entry.id == source for entry in load(matrix_path).entries):
        raise InputError(f"{source}: no such file; it is a matrix entry's id: `sparkdoctor matrix show {source}` prints "
                         "that entry (explain reads a log or error text)")


def read_text(source: str) -> tuple[str, str]:
    """The text and how to name it; one line (exit 2) when it cannot be read."""
    if source == "-":
        if sys.stdin is None:
            raise UsageError("explain reads stdin, and there is none: give a FILE")
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
        label = "stdin"
    else:
        from sparkdoctor.inputs import TooBig, a_url, read_bytes

        if why := a_url(source):
            raise InputError(why)
        path = Path(source)
        try:  # a log file, or a pipe with a writer (`explain <(journalctl ...)`); never a FIFO nobody writes
            data = read_bytes(path, MAX_BYTES, stream=True)
        except TooBig:
            raise InputError(f"{path}: {_TOO_BIG}") from None
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG) and any(c.isspace() for c in source):
                # `explain "RuntimeError: CUDA error: ..."`: the error line itself, not a file's name
                return _decoded(os.fsencode(source), "the text given")
            raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
        label = str(path)
    return _decoded(data, label)


def _read_terminal() -> tuple[str, str]:
    """Text pasted at a terminal, after a one-line prompt on stderr (it was refused with a message that said to
    paste it)."""
    sys.stderr.write("sparkdoctor explain: paste the error text, then Ctrl-D on a line of its own (Ctrl-C stops)\n")
    sys.stderr.flush()
    return _decoded(sys.stdin.buffer.read(MAX_BYTES + 1), "stdin")


def _decoded(data: bytes, label: str) -> tuple[str, str]:
    if len(data) > MAX_BYTES:
        raise InputError(f"{label}: {_TOO_BIG}")
    if b"\x00" in data[:8192]:
        raise InputError(f"{label}: binary data, not log text")
    return data.decode("utf-8", errors="replace"), label


def register(app: typer.Typer) -> None:
    app.command("explain")(verb(ExplainCommand, run, """
        Match error text or a server log against every entry's symptoms; print what they mean and what to do.

        Exit 0: something matched; 1: no known symptom in the text; 2: unreadable input or matrix, or --timeout ran out."""))
