"""What a sandboxed script may leave on the caller's disk, all files together.

The script's scratch folder (its site copy, its own copy of the mod, its home) is on the caller's disk, bound into
the sandbox writable. `ulimit -f` bounds each file, not their sum: a script writing one file under the limit after
another filled the disk in its 60 s. So while it runs, its scratch folder is measured every WATCH_EVERY seconds (the
blocks its files take, so a sparse file counts for what it holds) and the sandbox is killed the first time the
folder holds more than MAX_BYTES or more than MAX_ENTRIES names, or folders more than MAX_DEPTH deep. Files it
deleted but still holds (open, mapped, or run) have no name in the folder: they are found through the sandbox's
processes (/proc/PID/fd, maps and exe: a target ending " (deleted)") and count towards MAX_BYTES too; processes whose
files cannot be read, or that hold too many to read, stop it. The disk's free space falling far beyond all that is
counted stops it too, without blaming the mod (DISK_FILLED: the rest of the machine writes there as well).

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
MAX_DESCRIPTORS = 100_000  # open files looked at in one pass: `ulimit -n` bounds each process (sandbox.LIMITS)
MAX_MAPS = 16 * 2**20  # of /proc/PID/maps read
# A backstop for what no count reaches (a file kept by a mount in a namespace of the script's own): the disk's free
# space falling this far beyond what was counted stops the script, without blaming the mod (the rest of the machine
# writes to that disk too: a download beside a mod check is no fault of the mod).
MAX_UNEXPLAINED = 2 * MAX_BYTES
DISK_FILLED = "the disk under its scratch folder filled while it ran"
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


def held_deleted(pid: int, device: int) -> tuple[int, str | None]:
    """Bytes of the files on `device` that pid or a process under it holds after they were deleted, and why they
    cannot be told (the script is then stopped, as for a folder that cannot be measured). What a script writes
    through a descriptor or a shared mapping of a file it removed (or runs as a removed program) has no name in its
    folder. Each file is counted once: by its blocks where it can be opened, else by the extent mapped."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as fh:
                    stat_line = fh.read(4096)
                children.setdefault(int(stat_line[stat_line.rindex(b")") + 2:].split()[1]), []).append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    seen: dict[int, int] = {}
    looked = 0
    todo = [pid]
    try:
        while todo:
            current = todo.pop()
            todo += children.get(current, [])
            links = [f"/proc/{current}/exe"] + [f"/proc/{current}/fd/{fd}" for fd in _listdir(f"/proc/{current}/fd")]
            looked += len(links)
            if looked > MAX_DESCRIPTORS:
                return 0, f"holds more than {MAX_DESCRIPTORS:,} open files, too many to measure"
            for link in links:
                st = _deleted(link)
                if st is not None and st.st_dev == device and stat.S_ISREG(st.st_mode):
                    seen[st.st_ino] = st.st_blocks * 512
            for inode, size in _mapped_deleted(current, device):
                seen[inode] = max(seen.get(inode, 0), size)
    except PermissionError as exc:  # the caller may not read its processes (no CAP_SYS_PTRACE in a container)
        return 0, f"runs processes whose open files cannot be read here ({exc.strerror or exc})"
    return sum(seen.values()), None


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except (FileNotFoundError, ProcessLookupError):
        return []  # the process is gone


def _deleted(link: str) -> os.stat_result | None:
    """The file a /proc link names, if it has no name left (never read by its path: one deeper than PATH_MAX has
    none that readlink can return)."""
    try:
        st = os.stat(link)
    except (FileNotFoundError, ProcessLookupError):
        return None
    return st if st.st_nlink == 0 else None


def _mapped_deleted(pid: int, device: int) -> list[tuple[int, int]]:
    """(inode, bytes) of the deleted files on `device` that pid maps: their blocks through /proc/PID/map_files where
    the caller may open it (root), else the extent mapped (a shared mapping writes no further than it reaches)."""
    want = f"{os.major(device):02x}:{os.minor(device):02x}"
    try:
        with open(f"/proc/{pid}/maps", "rb") as fh:
            text = fh.read(MAX_MAPS).decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return []
    out = []
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].endswith(" (deleted)") or fields[3] != want:
            continue
        try:
            low, high = (int(x, 16) for x in fields[0].split("-"))
            inode = int(fields[4])
        except ValueError:
            continue
        try:
            size = os.stat(f"/proc/{pid}/map_files/{fields[0]}").st_blocks * 512
        except OSError:
            size = high - low
        out.append((inode, size))
    return out


def _free(root: Path) -> int | None:
    try:
        st = os.statvfs(root)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def run(argv: list[str], timeout: float, env: dict[str, str], pass_fds: tuple[int, ...], scratch: Path) -> proc.ProcResult:
    """proc.run, the process group killed (and the result saying why) the first time `scratch` holds too much."""
    try:
        device: int | None = os.stat(scratch).st_dev
    except OSError:
        device = None
    start = _free(scratch)
    running = proc.start(argv, env=env, pass_fds=pass_fds)
    done, why = threading.Event(), []

    def watch() -> None:
        while not done.wait(WATCH_EVERY):
            try:
                reason = look()
            except Exception as exc:  # a watch that cannot go on does not let the script run on unwatched
                reason = f"could not be measured in its scratch folder ({type(exc).__name__}: {exc})"
            if reason:
                why.append(reason)
                running.kill()
                return

    def look() -> str | None:
        reason, named = over(scratch)
        if reason is None and running.popen is not None and device is not None:
            hidden, reason = held_deleted(running.popen.pid, device)
            now = _free(scratch)
            if reason is None and named + hidden > MAX_BYTES:
                reason = (f"wrote more than {MAX_BYTES >> 20} MiB into its scratch folder on this machine's disk "
                          f"({hidden >> 20} MiB of it in files deleted while still open)")
            elif reason is None and start is not None and now is not None and start - now - named - hidden > MAX_UNEXPLAINED:
                reason = f"{DISK_FILLED} ({(start - now) >> 20} MiB, more than it can be shown to hold)"
        return reason

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
