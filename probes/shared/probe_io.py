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


# Bounds on what a probe reads. Real files sit far below them (torch's RECORD is ~3 MB, a METADATA
# header block a few KB); only a broken or hostile file reaches one, and then costs its own package.
MAX_RECORD = 64 << 20
MAX_HEADER = 64 << 10
MAX_SOURCE = 16 << 20


def parse_record(text):
    """RECORD rows [path, hash, size] (CSV). Hash and size never hold a comma, so only a quoted path
    needs the csv module; ValueError names the first line it cannot read (e.g. a field over the csv
    module's limit) instead of letting csv.Error end the probe."""
    if '"' not in text:  # no quoted path anywhere (nearly every RECORD): the same rows, ~1.5x faster
        return [row for row in (line.rsplit(",", 2) for line in text.splitlines() if line) if len(row) == 3]
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line.startswith('"'):
            import csv  # rare (a path with a comma or quote): not worth its import on every run

            try:  # a quoted line is a row only with its three fields, as an unquoted one (`"x.py` alone is none)
                rows.extend(row for row in csv.reader([line]) if len(row) == 3)
            except csv.Error as exc:
                raise ValueError("RECORD line %d: %s" % (number, exc)) from None
            continue
        row = line.rsplit(",", 2)
        if len(row) == 3:
            rows.append(row)
    return rows


def read_record(path, only=None):
    """(rows, stat) of a RECORD file (only the lines containing `only`, if given); OSError when it
    cannot be read or is not a regular file, ValueError when a line cannot be parsed."""
    data, st = read_regular(path, MAX_RECORD)
    text = data.decode("utf-8", "replace")
    if only is not None:
        text = "\n".join(line for line in text.splitlines() if only in line)
    return parse_record(text), st


def bound_metadata_reads(metadata):
    """Every file importlib `metadata` reads from a distribution's folder (METADATA, RECORD, direct_url.json, ...) read
    through read_regular(), at most MAX_RECORD bytes: fix's inventory and every pip run in the target read the target's
    distributions with it, and a METADATA that was /dev/zero, a FIFO or a 64 GB sparse file held that process until
    its time limit, its memory growing all the while (17 GB in 60 s). Such a file reads as a missing one (None), as
    the module itself answers for a file it may not read: pip skips that distribution, as check leaves it out. A
    distribution in a zip archive (a zipped egg on sys.path) is read as before."""
    cls = metadata.PathDistribution
    original = cls.read_text

    def read_text(self, filename):
        folder = getattr(self, "_path", None)
        if not isinstance(folder, os.PathLike):
            return original(self, filename)
        try:
            data = read_regular(os.path.join(os.fspath(folder), filename), MAX_RECORD)[0]
        except OSError:
            return None
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as Path.read_text (universal newlines)

    cls.read_text = read_text


def record_size(field):
    """A RECORD size field as an int; None when empty or not a plausible size (int() of a string of
    thousands of digits raises past Python's digit limit)."""
    if field and len(field) <= 20 and field.isdigit():
        return int(field)
    return None


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


def replace_file(path, data):
    """Replace `path` with `data` (bytes) atomically: a temporary file beside it, renamed over it, so a link at
    `path` is replaced, never written through. False when it cannot be done (a full disk, a quota, a read-only
    folder); nothing is left behind then, and the caller's cache is a miss next time."""
    import tempfile  # only on a write: a warm probe writes nothing

    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def answer(obj):
    """Write the probe's JSON answer as the last line of stdout, after whatever a .pth printed."""
    sys.stdout.write("\n" + json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()
