"""Reading a file the user names: never opened in a way that can block, never a device, always bounded.

files.py is the writing half. This is the reading half, used by every file input (explain's LOG, recipe
files, audit's config.json and safetensors headers, snapshots): the path is opened O_NONBLOCK, so a FIFO
with no writer cannot hang the open, and then judged by what the open file really is (fstat, not a
racy stat of the name):

  * a regular file is read (to `max_bytes` at most, where the caller gives a limit);
  * a FIFO or pipe is read only where a stream makes sense (`stream=True`: explain LOG, a snapshot from
    `<(...)`), and only when it has a writer: one with none is refused at once, never waited on; the
    reading of a live one is bounded by the run's time limit (runlimit.py), and outside any run limit (`diff`,
    `fleet check --inventory`) by PIPE_SECONDS, however it trickles; and by STREAM_BYTES where the caller gives
    no limit;
  * a directory, a device, a socket is refused.

Every refusal is an UnreadableInput: an OSError whose strerror is one line saying why, so the callers' existing
`except OSError as exc: ... exc.strerror` turns it into their own one-line error naming the file.
Imports nothing of sparkdoctor at module level (the run's deadline is read from proc when a pipe waits).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib
import json
import math
import os
import re
import select
import stat
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

from sparkdoctor import proc

MiB = 1024 * 1024
PIPE_SECONDS = 120.0  # a pipe read outside any run limit ends by then, however slowly its writer trickles
STREAM_BYTES = 256 * MiB  # a pipe read with no limit of its caller's (a snapshot) ends there


class UnreadableInput(OSError):
    """A file input that cannot be read; `strerror` is one line saying why (without the path)."""

    def __init__(self, why: str, code: int = errno.EINVAL):
        super().__init__(code, why)


class TooBig(UnreadableInput):
    """Larger than the caller's limit."""

    def __init__(self, limit: int):
        super().__init__(f"larger than {byte_size(limit)}; sparkdoctor reads at most that of this input", errno.EFBIG)
        self.limit = limit


def byte_size(n: int) -> str:
    """A size limit in words: `16 MiB`, or `1,000 bytes` where it is no whole number of MiB."""
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n:,} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def kind_of(path: Path | str) -> str:
    """What `path` is, for a message ("a directory", "a FIFO (named pipe)", "a device", ...; "a link to X, a device" for a
    link): stat only, nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"not readable ({exc.strerror or exc.__class__.__name__})"
    kind = "a regular file" if stat.S_ISREG(mode) else _kind(mode)
    return f"a link to {os.path.realpath(path)}, {kind}" if os.path.islink(path) else kind


# the kernel's own file systems, whose "regular files" are interfaces (/dev is not here: its devices are refused by what
# they are, and /dev/shm holds real files, models copied there among them)
KERNEL_TREES = ("/proc", "/sys")


def a_url(text: str) -> str | None:
    """The one line for a URL where a local file is read (a recipe or a log on a web page): `Path` made `https://x`
    `https:/x`, "no such file"; None for anything else."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", text):
        return f"{text}: a URL; sparkdoctor reads local files: download it first (curl -fLO URL) and give the file"
    return None


def kernel_file(path: Path | str) -> str | None:
    """Where `path` really is when that is inside /proc or /sys, or on their file systems mounted elsewhere (a kernel
    interface, however it is named or linked: /proc/self/environ, /proc/kmsg, whose read waits for the next kernel
    message), else None. Follows links; opens nothing."""
    real = os.path.realpath(path)
    if any(real == tree or real.startswith(tree + "/") for tree in KERNEL_TREES):
        return real
    try:  # the same file system mounted elsewhere too (a container's /host/proc): one device
        device = os.stat(path).st_dev
    except OSError:  # not there (yet): nothing to read
        return None
    devices = set()
    for tree in KERNEL_TREES:
        with contextlib.suppress(OSError):  # a minimal container without /sys
            devices.add(os.stat(tree).st_dev)
    return real if device in devices else None


def _open(path: Path) -> tuple[int, os.stat_result]:
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise UnreadableInput("is a directory; name a file", errno.EISDIR) from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a device with nothing behind it
            raise UnreadableInput("is a socket or a device, not a regular file", errno.ENXIO) from None
        raise
    try:
        return fd, os.fstat(fd)
    except OSError:
        os.close(fd)
        raise


def _blocking(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)


def open_regular(path: Path | str) -> BinaryIO:
    """An unbuffered binary handle on `path`, which must be a regular file (a FIFO, device, socket or
    folder is refused without blocking); the caller closes it (a `with` block)."""
    fd, st = _open(Path(path))
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnreadableInput(f"is {_kind(st.st_mode)}, not a regular file; sparkdoctor reads only regular files here")
    _blocking(fd)
    return os.fdopen(fd, "rb", buffering=0)


def read_bytes(path: Path | str, max_bytes: int | None = None, stream: bool = False) -> bytes:
    """The bytes of `path` (a regular file; with `stream`, also a pipe that has a writer); TooBig past
    `max_bytes`, UnreadableInput for anything else it will not read."""
    fd, st = _open(Path(path))
    try:
        if stat.S_ISREG(st.st_mode):
            if max_bytes is not None and st.st_size > max_bytes:  # said before a byte is read (a 20 GB sparse file)
                raise TooBig(max_bytes)
            _blocking(fd)
            return _read_all(fd, max_bytes)
        if stat.S_ISFIFO(st.st_mode) and stream:
            return _read_pipe(fd, max_bytes)
        raise UnreadableInput(f"is {_kind(st.st_mode)}, not a regular file; sparkdoctor reads only regular files here")
    finally:
        os.close(fd)


def read_text(path: Path | str, max_bytes: int | None = None, stream: bool = False) -> str:
    """read_bytes decoded as UTF-8 (UnicodeDecodeError as Path.read_text raises it)."""
    return read_bytes(path, max_bytes, stream).decode("utf-8")


def toml_module() -> ModuleType:
    """tomllib (tomli before Python 3.11), imported on first use (~10 ms): a warm check reads its matrix from the cache."""
    return importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")


def read_toml(path: Path | str, max_bytes: int, error: type[Exception]) -> dict[str, object]:
    """A TOML file the user names (config, matrix, recipe, fix definition) as a dict, read as read_bytes reads it; else
    `error`, one line naming the file. A UTF-8 byte-order mark at its start (Windows editors write one) is passed over:
    tomllib refused it as an "Invalid statement (at line 1, column 1)"."""
    tomllib = toml_module()
    try:
        return dict(tomllib.loads(read_bytes(path, max_bytes).decode("utf-8-sig")))
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {(str(exc).splitlines() or ['unparsable'])[0]}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start}): TOML files are UTF-8") from None
    except RecursionError:
        raise error(f"{path}: not usable TOML: nested too deeply") from None
    except ValueError as exc:  # tomllib's int() of a number past Python's 4,300-digit limit
        raise error(f"{path}: not valid TOML: {str(exc).splitlines()[0][:160]}") from None


def _read_all(fd: int, max_bytes: int | None) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, MiB if max_bytes is None else min(MiB, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise TooBig(max_bytes)


def _wait(poller: select.poll, end: float) -> None:
    """Wait for the writer, at most until the run's deadline (proc.set_deadline) or `end` (outside any run limit)."""

    left = proc.time_left()
    if left is not None and left <= 0:
        raise UnreadableInput("the run's time limit (--timeout) ran out waiting for the pipe's writer", errno.ETIMEDOUT)
    own = end - time.monotonic()
    if left is None and own <= 0:
        raise UnreadableInput(f"its writer did not finish in {PIPE_SECONDS:g} s; sparkdoctor does not wait longer on a pipe",
                              errno.ETIMEDOUT)
    poller.poll(max(1, int((own if left is None else left) * 1000)))


def _read_pipe(fd: int, max_bytes: int | None) -> bytes:
    """A pipe opened O_NONBLOCK: EOF at the first read means nobody holds its write end (refused);
    otherwise wait for data with poll, which the run's time limit (or PIPE_SECONDS) interrupts."""
    chunks: list[bytes] = []
    total, first = 0, True
    end, limit = time.monotonic() + PIPE_SECONDS, STREAM_BYTES if max_bytes is None else max_bytes
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        try:
            chunk = os.read(fd, MiB)
        except BlockingIOError:
            first = False
            _wait(poller, end)
            continue
        if not chunk:
            if first:
                raise UnreadableInput("is a FIFO with no writer: nothing to read (sparkdoctor does not wait on one)", errno.EPIPE)
            return b"".join(chunks)
        first = False
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise TooBig(limit)
        if proc.time_left() is None and time.monotonic() > end:  # a writer that never pauses
            _wait(poller, end)


class NonFinite(ValueError):
    """NaN, Infinity or a number past a float's range (1e999) in JSON: Python reads them, strict JSON has none."""


def _non_finite(constant: str) -> float:
    raise NonFinite(constant)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFinite(text[:40])
    return value


NUMBER_TOO_LONG = "has a number too long to read (more digits than Python reads as an integer)"


class NotJSON(ValueError):
    """Text from outside (a child's output, a server's answer, another program's file) that is no JSON; str(): one line."""


class NumberTooLong(NotJSON):
    """JSON with an integer of more digits than int() reads (sys.get_int_max_str_digits, 4,300 by default)."""


def loads_finite(text: str | bytes) -> object:
    """json.loads that raises NonFinite on NaN, Infinity and 1e999: what sparkdoctor reads, it may write again
    as `--format json`, which is strict."""
    return json.loads(text, parse_constant=_non_finite, parse_float=_finite_float)


def json_answer(text: str | bytes, finite: bool = False) -> object:
    """The JSON value of untrusted `text` (bounded where it was read); NotJSON, one line, where it is none: not JSON, an
    integer past int()'s digits (json.loads' plain ValueError, once taken for "not JSON" or let out as a traceback) or
    nesting too deep. With `finite`, NonFinite on NaN, Infinity and 1e999 (loads_finite)."""
    try:
        return loads_finite(text) if finite else json.loads(text)
    except NonFinite:
        raise
    except RecursionError:  # arrays in arrays thousands deep
        raise NotJSON("is nested too deeply to read (arrays or objects inside each other thousands deep)") from None
    except ValueError as exc:
        if type(exc) is ValueError and "integer string conversion" in str(exc):  # a plain ValueError, no JSONDecodeError
            raise NumberTooLong(NUMBER_TOO_LONG) from None
        raise NotJSON(f"is not valid JSON ({' '.join(str(exc).split())[:120]})") from None


def json_lines(lines: Iterable[str]) -> tuple[list[object], bool]:
    """The JSON values among `lines` (a record a line), in order, and whether a line passed over had a number too long."""
    values: list[object] = []
    too_long = False
    for line in lines:
        try:
            values.append(json_answer(line))
        except NotJSON as exc:
            too_long = too_long or isinstance(exc, NumberTooLong)
    return values, too_long
