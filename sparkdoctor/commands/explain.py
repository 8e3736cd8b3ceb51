"""`sparkdoctor explain [FILE|-]`: which known problems does this error text or server log show?

Reads pasted text (stdin, `-`) or a log file, matches it against every matrix entry's symptoms
(sparkdoctor.matrix.symptoms: exact, then tolerant of wrapping, colour, paths and numbers) and
prints each matched entry with its evidence level, what to do and its references. A line that
several entries explain is reported as ambiguous, with the candidates and the conditions that tell
them apart (`sparkdoctor check` decides). Nothing about the box is probed: the text alone is the
evidence.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal, time_limited, timeout_option
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format

MAX_BYTES = 256 * 1024 * 1024  # a server log can be big; past this it is surely not text to explain
EXPLAIN_SCHEMA = 1
_TOO_BIG = f"more than {MAX_BYTES // (1024 * 1024)} MiB; pass the part of the log around the error"


def register(app: typer.Typer) -> None:
    app.command("explain")(explain)


def explain(
    source: str = typer.Argument("-", metavar="[FILE|-]", help="A log or pasted error text; '-' (default) reads stdin."),
    matrix_path: Path | None = typer.Option(None, "--matrix", help="Matrix folder or file (default: bundled)."),
    fmt: str = format_option(Format.console, Format.json),
    timeout: float = timeout_option(),
) -> None:
    """Match error text or a server log against every entry's symptoms; print what they mean and what to do.
    Exit 0: something matched; 1: no known symptom in the text; 2: unreadable input or matrix, or --timeout ran out."""
    if fmt not in ("console", "json"):
        raise Fatal(f"--format {fmt}: choose one of console, json")
    with time_limited(timeout, "explain"):
        _explain(source, matrix_path, fmt)


def _explain(source: str, matrix_path: Path | None, fmt: str) -> None:
    from sparkdoctor.exitcodes import EXIT_EXPLAIN_NO_MATCH, EXIT_OK

    text, label = _read(source)
    from sparkdoctor.matrix import load
    from sparkdoctor.matrix.symptoms import match_text

    matrix = load(matrix_path)
    from sparkdoctor.matrix.ambiguity import ambiguous_lines

    matches = match_text(text, matrix.entries)
    groups = ambiguous_lines(matches)  # one line, several known causes: never shown as one exact match
    lines = len(text.splitlines())
    if fmt == "json":
        from sparkdoctor.emit import emit_json
        from sparkdoctor.render.explain import explain_json

        emit_json("explain", "explain", explain_json(matches, label, lines, EXPLAIN_SCHEMA, groups),
                  EXIT_OK if matches else EXIT_EXPLAIN_NO_MATCH)
    else:
        from sparkdoctor.emit import emit_console
        from sparkdoctor.render.explain import render_explain

        emit_console(lambda console: render_explain(matches, label, lines, console, groups))
    raise typer.Exit(EXIT_OK if matches else EXIT_EXPLAIN_NO_MATCH)


def _read(source: str) -> tuple[str, str]:
    """The text and how to name it; Fatal with one line when it cannot be read."""
    if source == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise Fatal("explain reads stdin: paste the error text and end with Ctrl-D, or give a FILE")
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
        label = "stdin"
    else:
        from sparkdoctor.inputs import TooBig, read_bytes

        path = Path(source)
        try:  # a log file, or a pipe with a writer (`explain <(journalctl ...)`); never a FIFO nobody writes
            data = read_bytes(path, MAX_BYTES, stream=True)
        except TooBig:
            raise Fatal(f"{path}: {_TOO_BIG}") from None
        except OSError as exc:
            raise Fatal(f"{path}: cannot read: {exc.strerror or exc}") from None
        label = str(path)
    if len(data) > MAX_BYTES:
        raise Fatal(f"{label}: {_TOO_BIG}")
    if b"\x00" in data[:8192]:
        raise Fatal(f"{label}: binary data, not log text")
    return data.decode("utf-8", errors="replace"), label
