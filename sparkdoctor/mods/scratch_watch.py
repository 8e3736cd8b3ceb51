"""What a sandboxed script may leave on the caller's disk, all files together.

The script's scratch folder (its site copy, its own copy of the mod, its home) is on the caller's disk, bound into
the sandbox writable. `ulimit -f` bounds each file, not their sum: a script writing one file under the limit after
another filled the disk in its 60 s. So while it runs, its scratch folder is measured every WATCH_EVERY seconds (the
blocks its files take, so a sparse file counts for what it holds) and the sandbox is killed the first time the
folder holds more than MAX_BYTES or more than MAX_ENTRIES names, or folders more than MAX_DEPTH deep. Files it
deleted but still holds open have no name in the folder: they are found through the open descriptors of the
sandbox's processes (/proc/PID/fd, a link whose target ends " (deleted)") and count towards MAX_BYTES too.

A folder the script shut the caller out of (mode 000, as the caller's own user through the sandbox's user namespace)
cannot be measured and stops the script: it is never made readable, as a chmod by name could be turned, by a
symlink swapped in between, onto any file the caller owns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from sparkdoctor import proc

MAX_BYTES = 2 * 2**30  # two of the 1 GiB files ulimit -f allows; a mod edits a few source files
MAX_ENTRIES = 100_000
MAX_DEPTH = 128  # folders in folders: a mod's patches are a few levels deep; each level open costs two descriptors
WATCH_EVERY = 0.2  # seconds: at a disk's speed, what can be written between two looks is far below MAX_BYTES


def over(root: Path) -> tuple[str | None, int]:
    """Why the folder holds too much (or cannot be measured), or None; and the bytes its files hold. Walked through
    folder descriptors, never by path: a folder deeper than PATH_MAX (made by `cd`-ing down) could not be listed by
    its path, and what it held went uncounted."""
    size = count = 0
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None, 0
    except OSError as exc:  # the script shut the caller out of its scratch folder itself (chmod 000)
        return f"made its scratch folder one that cannot be measured ({exc.strerror or exc})", 0
    stack: list[tuple[int, Iterator[os.DirEntry[str]]]] = []
    try:
        stack.append((top, os.scandir(top)))
        while stack:
            fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                _close(fd, entries)
                continue
            count += 1
            if count > MAX_ENTRIES:
                return f"made more than {MAX_ENTRIES:,} files and folders in its scratch folder", size
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            size += st.st_blocks * 512
            if size > MAX_BYTES:
                return f"wrote more than {MAX_BYTES >> 20} MiB into its scratch folder on this machine's disk", size
            if stat.S_ISDIR(st.st_mode):
                if len(stack) >= MAX_DEPTH:
                    return f"made folders more than {MAX_DEPTH} deep in its scratch folder", size
                try:
                    child = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if isinstance(exc, PermissionError):
                        return "made a folder in its scratch folder that shuts the caller out, so it cannot be measured", size
                    if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                        continue  # gone or swapped for a link since it was listed: the next look sees what is there
                    raise
                stack.append((child, _scandir(child)))
    except OSError as exc:  # out of descriptors, an I/O error: what cannot be measured is not let run on
        return f"could not be measured in its scratch folder ({exc.strerror or exc})", size
    finally:
        for fd, entries in stack:
            _close(fd, entries)
    return None, size


def _scandir(fd: int) -> Iterator[os.DirEntry[str]]:
    try:
        return os.scandir(fd)
    except OSError:
        os.close(fd)
        raise


def _close(fd: int, entries: Iterator[os.DirEntry[str]]) -> None:
    with contextlib.suppress(OSError):
        entries.close()  # type: ignore[attr-defined]
    with contextlib.suppress(OSError):
        os.close(fd)


def held_deleted(pid: int, device: int) -> int:
    """Bytes of the files on `device` that pid or a process under it holds open after they were deleted: what a
    script writes through a descriptor of a file it removed has no name in its folder. Each file is counted once."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    stat_line = fh.read(4096)
                children.setdefault(int(stat_line[stat_line.rindex(b")") + 2:].split()[1]), []).append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    seen: dict[tuple[int, int], int] = {}
    todo = [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            fds = os.listdir(f"/proc/{current}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if not os.readlink(f"/proc/{current}/fd/{fd}").endswith(" (deleted)"):
                    continue
                st = os.stat(f"/proc/{current}/fd/{fd}")
            except OSError:
                continue
            if st.st_dev == device and stat.S_ISREG(st.st_mode):
                seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
    return sum(seen.values())


def run(argv: list[str], timeout: float, env: dict[str, str], pass_fds: tuple[int, ...], scratch: Path) -> proc.ProcResult:
    """proc.run, the process group killed (and the result saying why) the first time `scratch` holds too much."""
    try:
        device: int | None = os.stat(scratch).st_dev
    except OSError:
        device = None
    running = proc.start(argv, env=env, pass_fds=pass_fds)
    done, why = threading.Event(), []

    def watch() -> None:
        while not done.wait(WATCH_EVERY):
            reason, named = over(scratch)
            if reason is None and running.popen is not None and device is not None:
                hidden = held_deleted(running.popen.pid, device)
                if named + hidden > MAX_BYTES:
                    reason = (f"wrote more than {MAX_BYTES >> 20} MiB into its scratch folder on this machine's disk "
                              f"({hidden >> 20} MiB of it in files deleted while still open)")
            if reason:
                why.append(reason)
                running.kill()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = running.result(timeout)
    finally:
        done.set()
        watcher.join()
    if why:
        return dataclasses.replace(result, returncode=None, timed_out=False, out_of_budget=False, stopped=why[0])
    return result
