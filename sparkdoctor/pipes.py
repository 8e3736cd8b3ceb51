"""A child's output pipes, read without blocking and kept bounded (sparkdoctor/proc.py runs the children).

Each stream keeps its head (where tools print what parsers read) and its tail (where they print the error that made
them stop); a flood in between is counted, not kept. A child that exits while something it left (`setsid daemon &`)
still holds its pipes is told apart from one whose pipes reached EOF, so its caller need not wait for the daemon.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import selectors
import subprocess
import time
from typing import IO

HEAD_BYTES = 8 * 1024 * 1024
TAIL_BYTES = 256 * 1024
_CHUNK = 64 * 1024
_PIPE_CAPACITY = 1024 * 1024  # the most a Linux pipe holds (fcntl F_SETPIPE_SZ up to /proc/sys/fs/pipe-max-size)
_PIPE_BUF = getattr(select, "PIPE_BUF", 512)


class Capped:
    """One output stream: the first HEAD bytes, the last TAIL bytes, and a count of what fell between."""

    def __init__(self, head: int, tail: int):
        self.head_max, self.tail_max = head, tail
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail and self.tail_size - len(self.tail[0]) >= self.tail_max:
            gone = self.tail.popleft()
            self.tail_size -= len(gone)
            self.dropped += len(gone)

    def text(self, encoding: str) -> str:
        def decode(b: bytes) -> str:
            return b.decode(encoding, errors="replace").replace("\r\n", "\n").replace("\r", "\n")

        tail = b"".join(self.tail)
        if len(tail) > self.tail_max:  # whole chunks were kept while reading; trim to the byte here
            self.dropped += len(tail) - self.tail_max
            tail = tail[len(tail) - self.tail_max:]
            self.tail, self.tail_size = collections.deque([tail]), len(tail)
        if not self.dropped:
            return decode(bytes(self.head) + tail)
        return f"{decode(bytes(self.head))}\n[... {self.dropped} bytes of output dropped ...]\n{decode(tail)}"


_EXIT_POLL_S = 0.2  # while no output comes, how often whether the child has exited is asked
EXITED_HOLDING = "exited"  # pump's answer for a child that exited while something it left holds its pipes


def pump(popen: subprocess.Popen[bytes], data: bytes | None, out: Capped, err: Capped, until: float,
         eof_only: bool = False) -> bool | str:
    """Feed stdin and read stdout/stderr until both reach EOF (True), the child has exited while something it left
    still holds the pipes (EXITED_HOLDING, also true; not with `eof_only`), or `until` passes (False)."""
    sel = selectors.DefaultSelector()
    try:
        for stream, sink in ((popen.stdout, out), (popen.stderr, err)):
            if stream is not None and not stream.closed:
                sel.register(stream, selectors.EVENT_READ, (stream, sink))
        payload, offset = data or b"", 0
        if popen.stdin is not None and not popen.stdin.closed:
            if payload:
                sel.register(popen.stdin, selectors.EVENT_WRITE, None)
            else:
                quiet_close(popen.stdin)
        while sel.get_map():
            left = until - time.monotonic()
            if left <= 0:
                return False
            if not eof_only and popen.poll() is not None and not (payload and offset < len(payload)):
                # exited: what it wrote is in the pipes now. A child it left behind (`setsid daemon &`) may hold
                # them open for ever; that is not the child's output, and waiting for its EOF is not the child's time
                _drain(sel)
                return EXITED_HOLDING if sel.get_map() else True
            for key, _ in sel.select(timeout=min(left, _EXIT_POLL_S)):
                if key.fileobj is popen.stdin:
                    try:
                        offset += os.write(key.fd, payload[offset:offset + _PIPE_BUF])
                    except BrokenPipeError:
                        offset = len(payload)
                    if offset >= len(payload):
                        sel.unregister(key.fileobj)
                        quiet_close(popen.stdin)
                    continue
                _read_chunk(sel, key)
        return True
    finally:
        sel.close()


def _read_chunk(sel: selectors.BaseSelector, key: selectors.SelectorKey) -> int:
    """Read one chunk of a ready stream into its sink (at EOF, close it); the bytes read."""
    stream, sink = key.data
    chunk = os.read(key.fd, _CHUNK)
    if chunk:
        sink.add(chunk)
    else:
        sel.unregister(stream)
        stream.close()
    return len(chunk)


def _drain(sel: selectors.BaseSelector, most: int = 4 * _PIPE_CAPACITY) -> None:
    """Read what the pipes hold now, without waiting (at most `most` bytes: a grandchild may keep writing)."""
    read = 0
    while sel.get_map() and read < most:
        ready = sel.select(timeout=0)
        if not ready:
            return
        for key, _ in ready:
            if key.data is None:  # stdin
                sel.unregister(key.fileobj)
            else:
                read += _read_chunk(sel, key)


def quiet_close(stream: IO[bytes]) -> None:
    with contextlib.suppress(OSError):
        stream.close()
