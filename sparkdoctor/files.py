"""Writing a file the user names, safely: atomically, and only ever as a regular file.

A reader never sees half a file, a failed write leaves neither a half file nor a temporary one
behind, and a path that names something else (a device, a FIFO, a folder, a symlink into /proc) is
refused rather than replaced, so sparkdoctor never turns /dev/null or a terminal into a file. A
symlink to a regular file is followed, so the link stays a link. Used for reports, snapshots, and
every file a later stage writes; it imports nothing of sparkdoctor, so anything may use it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from sparkdoctor.errors import UsageError, seconds_from_env
from sparkdoctor.text import one_line


class OutputError(UsageError, OSError):
    """The report or file cannot be written; the message is one line saying why."""

    code = "output"


class LockedError(UsageError):
    """Another run holds the lock on a file or folder sparkdoctor writes, past the wait (exit 2)."""

    code = "locked"


def _started(pid: str) -> str:
    """", running since HH:MM:SS UTC" for a process (its start time from /proc, against the boot time); "" if unknown."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime "))
        return time.strftime(", running since %Y-%m-%d %H:%M:%S UTC", time.gmtime(boot + ticks / os.sysconf("SC_CLK_TCK")))
    return ""


def lock_holder(fd: int) -> str:
    """Who holds the flock on the file open at `fd`: "pid N (its command line), running since ...", from /proc/locks;
    else "another run"."""
    st = os.fstat(fd)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == dev and fields[4].isdigit() and fields[4] != "0":
                with contextlib.suppress(OSError):
                    cmd = Path(f"/proc/{fields[4]}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                    return f"pid {fields[4]} ({cmd[:120]}){_started(fields[4])}"
                return f"pid {fields[4]}{_started(fields[4])}"
    return "another run"


def folder_lock(folder: Path, what: str) -> contextlib.AbstractContextManager[None]:
    """Hold flock(LOCK_EX) on `folder` itself (no file is added to it) while `what` writes into it.

    Another sparkdoctor run holding it is waited for, up to $SPARKDOCTOR_LOCK_WAIT seconds (default 60; said once
    on stderr), then LockedError names the run that holds it."""
    return _held(folder, os.O_RDONLY | os.O_DIRECTORY, what, folder)


def file_lock(path: Path, what: str, writing: Path, default_wait: float = 60) -> contextlib.AbstractContextManager[None]:
    """folder_lock's wait, on the lock file `path` (made when missing; a link there is never written through) that
    guards `writing`: one `matrix update` at a time waited forever, with nothing said, behind one stopped (Ctrl-Z).
    `default_wait` (when $SPARKDOCTOR_LOCK_WAIT is unset): a holder that builds or downloads is given its own time
    limit, so a second run beside a working one waits for it and only one stopped or hung is an error."""
    return _held(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, what, writing, default_wait)


@contextlib.contextmanager
def _held(path: Path, flags: int, what: str, writing: Path, default_wait: float = 60) -> Iterator[None]:
    wait = seconds_from_env("SPARKDOCTOR_LOCK_WAIT", default_wait, zero=True)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise OutputError(f"{what}: {path}: {exc.strerror or exc}") from None
    try:
        deadline, said = time.monotonic() + wait, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = lock_holder(fd)
                if time.monotonic() >= deadline:
                    raise LockedError(f"{what}: {writing} is locked by {holder}, still running after {wait:g} s "
                                      "($SPARKDOCTOR_LOCK_WAIT); nothing was written") from None
                if not said:
                    print(one_line(f"sparkdoctor: {what}: waiting for {holder}, which is writing {writing}"), file=sys.stderr,
                          flush=True)
                    said = True
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)  # releases the lock


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def target_of(path: Path) -> Path:
    """The regular file `path` names (through symlinks), or OutputError saying why it is none; /dev/null (itself or
    through a link) is taken as it is: what is written there is discarded."""
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
    real = os.path.realpath(path)
    if real == os.devnull and stat.S_ISCHR(st.st_mode):
        return Path(os.devnull)  # the one device named to discard what is written: write_text writes nothing
    if not stat.S_ISREG(st.st_mode):
        raise OutputError("is not a regular file (a device, FIFO or socket); sparkdoctor writes only regular files")
    return Path(real)


def write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) atomically (/dev/null: nothing is written); OutputError (one line) if it
    cannot be done."""
    final = target_of(Path(path))
    if final == Path(os.devnull):
        return
    folder = final.parent
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{final.name}.", suffix=".tmp")
    except OSError as exc:  # the folder's error, not the file's: /proc/version exists, a file beside it cannot be made
        why = exc.strerror or str(exc)
        if final.exists():
            raise OutputError(f"no file can be made beside it in {folder} ({why}), where it is written before it is "
                              f"renamed over {final.name}") from None
        # a folder that is there but takes no new file (/proc says ENOENT): not "no such file"
        raise OutputError(f"no file can be made in {folder} ({why})" if folder.is_dir() else f"{folder}: {why}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())  # the bytes are on disk before the name points at them
        try:
            mode = stat.S_IMODE(os.stat(final).st_mode)
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, final)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(exc.strerror or str(exc)) from None
        raise


def write_cache_entry(path: Path, data: bytes) -> bool:
    """Replace a cache entry (sparkdoctor's own file) with `data` atomically; False when it cannot be done.

    Unlike write_text, whatever is at `path` (a symlink, a file of another version) is replaced, never written
    through, and a failure (a full disk, a quota, a read-only or odd folder) is no error: it leaves neither a half
    entry nor a temporary file behind, so the next run finds a miss and computes the entry again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
