"""The one writer of stdout: a command's `Result`, rendered whole, then written once.

`emit(result, fmt, output)` renders the document in full into a string first (console output too: rich
draws into a captured console), then writes it in one call, to stdout or atomically to `-o FILE`. So a
reader that leaves early (`| head -1`) cannot change the exit code: the verdict was decided before the
first byte went out, and a broken pipe is not an error. Notes (warnings) go to stderr after the document.

In JSON mode a failure is a document too: `cli.main` calls `emit_error`, which writes the common header
with the error and its exit code, so `sparkdoctor ... --format json | jq` always has something to read.

Rendering itself lives in sparkdoctor/views/ (one view per document class), imported here only when a result
is emitted.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sparkdoctor.files import OutputError, write_text
from sparkdoctor.result import Format, Result, error_document
from sparkdoctor.sink import Sink, unpadded


@dataclass
class Requested:
    """What the command line asked for, recorded while it is parsed (sparkdoctor/commands/options.py), so a
    failure before any Result exists is still answered in the format asked for."""

    command: str | None = None
    format: Format | None = None
    output: Path | None = None


REQUESTED = Requested()


def sink_for(output: Path | None, fmt: Format | None = None) -> Sink:
    if output is not None:
        return Sink(to_file=True)
    if fmt is Format.json:  # json.dumps writes ASCII on any stream; asking the stream loads rich (~45 ms)
        return Sink()
    from sparkdoctor.views.terminal_text import needs_ascii

    return Sink(ascii_only=sys.stdout is not None and needs_ascii(sys.stdout))


def render(result: Result[object], fmt: Format, output: Path | None = None) -> str:
    """The whole document of `result` in `fmt`, as the text `emit` writes."""
    from sparkdoctor import views
    from sparkdoctor.text import shown

    sink = sink_for(output, fmt)
    text = views.render(result, fmt, sink)
    # the text formats carry a snapshot's strings as written; console output is escaped as it is drawn (Sink.console)
    if fmt in (Format.markdown, Format.github, Format.forum):
        return shown(text)
    return unpadded(text) if fmt is Format.console and not sink.at_terminal() else text  # rich pads lines to the width


def emit(result: Result[object], fmt: Format | str, output: Path | None = None) -> int:
    """Render `result` whole, write it once (stdout, or `output` atomically), print its notes on stderr;
    return the exit code the process ends with. OutputError (exit 2, one line) if it cannot be delivered."""
    from sparkdoctor.stderr import warn

    fmt = Format(fmt)
    text = render(result, fmt, output)
    deliver(text, output)
    for note in result.notes:
        warn(note)
    return result.exit_code


def deliver(text: str, output: Path | None) -> None:
    """`text` to `output` (atomically, a regular file only) or to stdout in one write."""
    if output is not None:
        try:
            write_text(output, text)
        except OutputError as exc:
            raise OutputError(f"--output {output}: {exc}") from None
        return
    write_stdout(text)


def write_stdout(text: str) -> None:
    """A whole document to stdout: a closed stdout or a write error is one OutputError line; a reader that
    leaves early (`| head`) is not an error (the exit code still says what the command found)."""
    if sys.stdout is None:
        raise OutputError("stdout is closed: nowhere to write the report (use -o FILE)")
    try:
        _write_whole(sys.stdout, text)
    except BrokenPipeError:
        reader_left()
    except OSError as exc:
        # what the failed write left in a block-buffered stdout (no PYTHONUNBUFFERED) would fail again at the
        # interpreter's final flush: "Exception ignored ..." on stderr and exit 120 instead of this error's 2
        reader_left()
        raise OutputError(f"cannot write the report to stdout: {exc.strerror or exc} (use -o FILE)") from None


def _write_whole(stream: TextIO, text: str) -> None:
    """`text` to `stream`, every byte or an OSError. Through its fd where it has one: under PYTHONUNBUFFERED
    (`python -u`) stdout is an unbuffered file whose text layer drops what a short write left (a disk that fills,
    a file-size limit), and a cut report passed as written. A character the stream's encoding cannot carry is
    replaced, never a crash."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):  # a stream in memory (io.UnsupportedOperation is both)
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
        stream.write(text)
        stream.flush()
        return
    stream.flush()
    left = memoryview(text.encode(stream.encoding or "utf-8", "replace"))
    while left:
        left = left[os.write(fd, left):]


class _Held(io.StringIO):
    """stdout as what the command line's parser prints sees it (a terminal or not, its encoding), kept in memory."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream

    @property
    def encoding(self) -> str:  # type: ignore[override]  # StringIO's is None; rich picks its box characters by it
        return getattr(self._stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return self._stream.isatty()


@contextlib.contextmanager
def written_once() -> Iterator[None]:
    """What is printed inside (the parser's own output: typer's --help, drawn by rich, `--version`) goes to stdout in
    one write as it ends, as a document does: a reader that leaves early (`--help | head -1`) is not an error, and
    the exit code stays the command's (rich's console and click answered a broken pipe with exit 1). Any other write
    error passes on (cli.main: one line, exit 2)."""
    stream = sys.stdout
    if stream is None:  # a closed stdout: as before, nothing to hold
        yield
        return
    held = _Held(stream)
    sys.stdout = held
    try:
        yield
    finally:
        sys.stdout = stream
        text = held.getvalue()
        if text:
            try:
                _write_whole(stream, text)
            except BrokenPipeError:
                reader_left()
            except OSError:
                reader_left()  # the interpreter's final flush stays quiet too
                raise


def reader_left(fd: int | None = None) -> None:
    """The reader went away (`| head`) or the stream cannot take more (`> /dev/full`): point stdout (or `fd`) at
    /dev/null so the interpreter's final flush stays quiet too."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno() if fd is None else fd)
        os.close(devnull)


def emit_error(error: BaseException, exit_code: int) -> None:
    """In JSON mode, the failure as a JSON document on stdout (the one line on stderr is cli.main's); in SARIF mode,
    a failure that carries findings (bench's and rerun's launches) as a SARIF log. Not with
    `-o FILE` (the file is left as it was; stdout is not where the document was asked for), and silent when
    stdout cannot take it: the exit code and the stderr line still tell."""
    if REQUESTED.format is Format.sarif and REQUESTED.output is None and hasattr(error, "findings"):
        # bench, rerun: what judged the launch that failed
        from sparkdoctor.views.sarif import failure_sarif

        with contextlib.suppress(OutputError):
            write_stdout(failure_sarif(REQUESTED.command or _command_from_argv(), error, exit_code))
        return
    if REQUESTED.format is not Format.json or REQUESTED.output is not None:
        return
    from sparkdoctor.views import dump

    with contextlib.suppress(OutputError):
        write_stdout(dump(error_document(REQUESTED.command or _command_from_argv(), error, exit_code)))


def _command_from_argv() -> str:
    words = []
    for arg in sys.argv[1:]:
        if arg.startswith("-"):
            break
        words.append(arg)
        if len(words) == 2 or words[0] not in ("matrix", "recipe"):
            break
    return " ".join(words) or "sparkdoctor"


def note_format(command: str, value: str, allowed: tuple[Format, ...]) -> Format:
    """Record the format the command line asked for (so even its own failure is answered in it), then check
    that the command renders it."""
    REQUESTED.command = command
    try:
        REQUESTED.format = Format(value)
    except ValueError:
        REQUESTED.format = None
    return Format.parse(value, allowed)


def requested_from_argv(argv: list[str]) -> Format | None:
    """`--format json` / `-f json` / `--format=json` in argv: how a usage error found before the options were
    processed (an unknown option) learns that JSON was asked for."""
    for i, arg in enumerate(argv):
        value = None
        if arg in ("--format", "-f") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--format="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-f") and len(arg) > 2 and not arg.startswith("--"):
            value = arg[2:]
        if value == Format.json.value:
            return Format.json
    return None


__all__ = ["REQUESTED", "Sink", "deliver", "emit", "emit_error", "render", "requested_from_argv", "write_stdout"]
