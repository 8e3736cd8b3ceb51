"""Where a report or snapshot goes: a file the user names (`-o`, `--save-facts`) or stdout.

Files are written atomically and only ever as regular files: a reader never sees half a report, a
failed write leaves neither a half file nor a temporary one behind, and a path that names something
else (a device, a FIFO, a folder, a symlink into /proc) is refused rather than replaced, so
sparkdoctor never turns /dev/null or a terminal into a file. A symlink to a regular file is
followed, so the link stays a link. On stdout, a reader that goes away (`| head`) is not an error,
a closed stdout is one line, and a stream that cannot encode the console's symbols gets ASCII.
"""

from __future__ import annotations

import io
import os
import stat
import sys
import tempfile
from pathlib import Path


class OutputError(OSError):
    """The report or file cannot be written; the message is one line saying why."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def target_of(path: Path) -> Path:
    """The regular file `path` names (through symlinks), or OutputError saying why it is none."""
    if str(path) in ("", "."):
        raise OutputError("is a directory; name a file")
    try:
        st = os.stat(path)  # follows symlinks: what a write would really reach
    except FileNotFoundError:
        if os.path.islink(path):
            raise OutputError("is a dangling symlink") from None
        return Path(path)
    except OSError as exc:
        raise OutputError(exc.strerror or str(exc)) from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError("is a directory; name a file")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError("is not a regular file (a device, FIFO or socket); sparkdoctor writes only regular files")
    return Path(os.path.realpath(path))


def write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) atomically; OutputError (one line) if it cannot be done."""
    final = target_of(Path(path))
    folder = final.parent
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{final.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            mode = stat.S_IMODE(os.stat(final).st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, final)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(exc.strerror or str(exc)) from None
        raise


# ---- reports -------------------------------------------------------------------------------------
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
        # The reader went away (`| head`): point stdout at /dev/null so the interpreter's final
        # flush stays quiet too; the exit code still says what the check found.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except OSError as exc:
        raise OutputError(f"cannot write the report to stdout: {exc.strerror or exc} (use -o FILE)") from None
