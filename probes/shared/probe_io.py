"""What every probe needs to read a target safely and to answer the host; standard library only.

A target holds odd files: a FIFO or /dev/zero where METADATA should be, a 200 GB sparse file listed
in a RECORD, a RECORD row longer than the csv module allows. A probe must never block on one, read
one without bound, or let it cost more than its own package, so every file a probe reads goes
through read_regular(), which opens without blocking, refuses anything but a regular file and reads
at most a given size. And site's .pth files run before any probe and may print to stdout, so the
answer goes last, on a line of its own (answer()), and the host reads the last line.

Each probe's __main__.py puts this folder on sys.path; the `probe_` prefix keeps it from shadowing a
module of the target.
"""

import errno
import hashlib
import json
import os
import stat
import sys

KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class OddFile(OSError):
    """Not a regular file, or larger than the caller will read: reported like any unreadable file."""

    def __init__(self, message):
        OSError.__init__(self, errno.EINVAL, message)


def kind_of(mode):
    """'a FIFO', 'a directory', ...; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in KINDS:
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path):
    """(binary file object, stat) of a regular file; OddFile for anything else. Never blocks: a FIFO
    is opened non-blocking and refused before anything is read from it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        kind = kind_of(st.st_mode)
        if kind is not None:
            raise OddFile("%s, not a regular file" % kind)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, limit):
    """(bytes, stat) of a regular file of at most `limit` bytes; OddFile when it is larger or not a
    regular file, OSError when it cannot be read."""
    fh, st = open_regular(path)
    with fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OddFile("larger than %d bytes" % limit)
    return data, st


def read_head(path, limit):
    """The first `limit` bytes of a regular file (the rest is never read); OddFile / OSError as above."""
    fh, st = open_regular(path)
    with fh:
        return fh.read(limit), st


def read_text(path, limit, errors="replace"):
    """read_regular() decoded as UTF-8."""
    return read_regular(path, limit)[0].decode("utf-8", errors)


def source_hash(*folders):
    """sha256 of every .py file in these folders (a probe's own code): a cache keyed on it misses
    as soon as any part of the probe changes."""
    h = hashlib.sha256()
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                h.update(name.encode("utf-8") + b"\0")
                data, _ = read_regular(os.path.join(folder, name), 1 << 22)
                h.update(data + b"\0")
    return h.hexdigest()


def answer(obj):
    """Write the probe's JSON answer as the last line of stdout, after whatever a .pth printed."""
    sys.stdout.write("\n" + json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()
