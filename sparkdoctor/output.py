"""Where a report or snapshot goes: a file the user names (`-o`, `--save-facts`) or stdout.

Files go through sparkdoctor.files (atomic, regular files only). On stdout, a reader that goes away
(`| head`) is not an error, a closed stdout is one line, and a stream that cannot encode the
console's symbols gets ASCII.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from sparkdoctor.files import OutputError, write_text


def render_document(report, fmt: str, verbose: bool) -> str:
    """The whole report as text; console output for a file is plain (no colour), 110 columns."""
    if fmt == "console":
        from rich.console import Console

        from sparkdoctor.render.console import render_console

        buffer = io.StringIO()
        render_console(report, Console(file=buffer, width=110, no_color=True, force_terminal=False), verbose=verbose)
        return buffer.getvalue()
    from sparkdoctor.render import render_text

    return render_text(report, fmt) + "\n"


def write_report(report, fmt: str, output: Path | None, verbose: bool) -> None:
    """The report to `output` (atomically) or to stdout; OutputError (one line, naming the option) if
    it cannot be delivered. A reader that leaves early is not an error: the verdict stands."""
    if output is not None:
        try:
            write_text(output, render_document(report, fmt, verbose))
        except OutputError as exc:
            raise OutputError(f"--output {output}: {exc}") from None
        return
    if sys.stdout is None:
        raise OutputError("stdout is closed: nowhere to write the report (use -o FILE)")
    try:
        if fmt == "console":
            from rich.console import Console

            from sparkdoctor.render.console import render_console
            from sparkdoctor.render.terminal_text import needs_ascii

            # the renderer spells its symbols in ASCII on such a stream; a fact's own non-ASCII
            # characters are replaced rather than crash the write
            if needs_ascii(sys.stdout) and hasattr(sys.stdout, "reconfigure"):
                sys.stdout.reconfigure(errors="replace")  # never a crash on a character the stream cannot carry
            render_console(report, Console(), verbose=verbose)
        else:
            sys.stdout.write(render_document(report, fmt, verbose))
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_left()
    except OSError as exc:
        raise OutputError(f"cannot write the report to stdout: {exc.strerror or exc} (use -o FILE)") from None


def write_stdout(text: str) -> None:
    """A whole document to stdout, with the same rules as a report (sparkdoctor.emit.write_stdout)."""
    from sparkdoctor.emit import write_stdout as write

    write(text)


def _reader_left() -> None:
    from sparkdoctor.emit import reader_left

    reader_left()
