"""What a sandboxed script may leave on the caller's disk, all files together.

The script's scratch folder (its site copy, its own copy of the mod, its home) is on the caller's disk, bound into
the sandbox writable. `ulimit -f` bounds each file, not their sum: a script writing one file under the limit after
another filled the disk in its 60 s. So while it runs, its scratch folder is measured every WATCH_EVERY seconds (the
blocks its files take, so a sparse file counts for what it holds) and the sandbox is killed the first time the
folder holds more than MAX_BYTES or more than MAX_ENTRIES names, or folders more than MAX_DEPTH deep. A folder the
script made unreadable is made readable to be measured (its files are the caller's, through the sandbox's user
namespace).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import threading
from pathlib import Path

from sparkdoctor import proc

MAX_BYTES = 2 * 2**30  # two of the 1 GiB files ulimit -f allows; a mod edits a few source files
MAX_ENTRIES = 100_000
MAX_DEPTH = 128  # folders in folders: a mod's patches are a few levels deep; each level open costs two descriptors
WATCH_EVERY = 0.2  # seconds: at a disk's speed, what can be written between two looks is far below MAX_BYTES


def over(root: Path) -> str | None:
    """Why the folder holds too much, or None. Walked through folder descriptors, never by path: a folder deeper than
    PATH_MAX (made by `cd`-ing down) could not be listed by its path, and what it held went uncounted."""
    size = count = 0
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    stack = [(top, os.scandir(top))]
    try:
        while stack:
            fd, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(fd)
                stack.pop()
                continue
            count += 1
            if count > MAX_ENTRIES:
                return f"made more than {MAX_ENTRIES:,} files and folders in its scratch folder"
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            size += st.st_blocks * 512
            if size > MAX_BYTES:
                return f"wrote more than {MAX_BYTES >> 20} MiB into its scratch folder on this machine's disk"
            if stat.S_ISDIR(st.st_mode):
                if len(stack) >= MAX_DEPTH:
                    return f"made folders more than {MAX_DEPTH} deep in its scratch folder"
                child = _open_folder(fd, entry.name, st.st_mode)
                if child is not None:
                    stack.append((child, os.scandir(child)))
    finally:
        for fd, entries in stack:
            entries.close()
            os.close(fd)
    return None


def _open_folder(parent: int, name: str, mode: int) -> int | None:
    for _ in range(2):
        try:
            return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        except PermissionError:  # a folder the script made unreadable: the caller's own, through the user namespace
            with contextlib.suppress(OSError):
                os.chmod(name, stat.S_IMODE(mode) | stat.S_IRWXU, dir_fd=parent)
        except OSError:
            return None
    return None


def run(argv: list[str], timeout: float, env: dict[str, str], pass_fds: tuple[int, ...], scratch: Path) -> proc.ProcResult:
    """proc.run, the process group killed (and the result saying why) the first time `scratch` holds too much."""
    running = proc.start(argv, env=env, pass_fds=pass_fds)
    done, why = threading.Event(), []

    def watch() -> None:
        while not done.wait(WATCH_EVERY):
            reason = over(scratch)
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
