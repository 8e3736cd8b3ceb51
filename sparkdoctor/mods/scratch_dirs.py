"""A sandboxed script's scratch folder, and the removal of those that runs killed outright left behind.

A script's scratch folder (its site copy, its own copy of the mod, its home) may hold up to scratch_watch.MAX_BYTES
(2 GiB) while it runs. A run ended by SIGKILL (an OOM kill, `kill -9`, a CI job's hard timeout) never removes it, and
each such run left one in $TMPDIR. So each one is made as

    $TMPDIR/sparkdoctor-mod-XXXXXXXX/          mode 0711, this run's
        .sparkdoctor-mod-owner                 "pid N": the run holds flock(LOCK_EX) on it while the folder lives
        scratch/                               what the sandbox is given (bound writable), nothing above it

and the first scratch folder a process makes removes those of dead runs first: a folder whose owner file can be
locked belongs to a run that is gone (the kernel drops a lock with the last descriptor of its holder, however that
process ended). Only this user's folders of that name, real folders (a link is never followed: the folder and the
owner file are opened with O_NOFOLLOW), with an owner file that is a plain file; a folder without one (another
program's, or one being made: the owner file is locked before it gets its name) is left alone. The script cannot
reach the owner file: only scratch/ is bound into its sandbox. Anything left (a folder the script made unreadable to
a non-root caller) is named by its prefix: `rm -rf $TMPDIR/sparkdoctor-mod-*` while no `mods check` runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "sparkdoctor-mod-"
OWNER = ".sparkdoctor-mod-owner"
MAX_LOOKED_AT = 1000  # folders of that name looked at in one pass: a $TMPDIR full of them costs one pass, bounded
_SWEPT: list[bool] = []  # once per process


@contextlib.contextmanager
def scratch_folder() -> Iterator[Path]:
    """A fresh scratch folder (scratch/ of a folder this run owns, see the module doc), removed at the end."""
    if not _SWEPT:
        _SWEPT.append(True)
        remove_stale()
    fds: list[int] = []
    try:
        with tempfile.TemporaryDirectory(prefix=PREFIX) as top:
            os.chmod(top, 0o711)  # `nobody` (sandbox.py's root caller) reaches scratch/, and lists nothing here
            fds.append(_claim(top))
            scratch = Path(top) / "scratch"
            scratch.mkdir(mode=0o700)
            yield scratch
    finally:  # the lock goes after the folder: never a folder of a live run that looks dead
        for fd in fds:
            os.close(fd)


def _claim(top: str) -> int:
    """The owner file, locked before it has its name (so no sweep ever sees it unlocked); its descriptor."""
    part = os.path.join(top, OWNER + ".new")
    fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"pid {os.getpid()}\n".encode())
    os.rename(part, os.path.join(top, OWNER))
    return fd


def remove_stale(root: str | None = None) -> list[str]:
    """Remove the scratch folders under root (default $TMPDIR) whose runs are gone; the paths removed."""
    root = root or tempfile.gettempdir()
    try:
        names = sorted(n for n in os.listdir(root) if n.startswith(PREFIX))[:MAX_LOOKED_AT]
    except OSError:
        return []
    return [os.path.join(root, n) for n in names if _remove_if_dead(os.path.join(root, n))]


def _remove_if_dead(path: str) -> bool:
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return False
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        try:
            owner = os.open(OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=top)
        except OSError:  # none (not ours, or being made), or a link
            return False
        try:
            if not stat.S_ISREG(os.fstat(owner).st_mode):
                return False
            try:
                fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # its run holds it: alive
                return False
            # what the script had; the owner file last, so a folder that could not be emptied is tried again next time
            shutil.rmtree(os.path.join(path, "scratch"), ignore_errors=True)  # never follows a link (fd-based walk)
            with contextlib.suppress(OSError):
                os.rmdir("scratch", dir_fd=top)  # an empty one rmtree left (or none)
            if "scratch" in os.listdir(top):
                return False
            for name in os.listdir(top):  # the owner file, and an `.new` one a run killed while claiming left
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=top)
            os.rmdir(path)
            return True
        finally:
            os.close(owner)
    except OSError:
        return False
    finally:
        os.close(top)
