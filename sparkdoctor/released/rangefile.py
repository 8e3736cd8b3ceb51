"""A seekable, read-only file object over HTTP range requests: handed to the standard library's
zipfile, it lists a remote wheel's members and reads single ones without downloading the wheel
(pip's "lazy wheel" does the same for METADATA).

Each read that is not already held becomes one range request of at least READAHEAD bytes; the last
TAIL bytes (the end-of-central-directory records, zip64 included, and a small wheel's whole central
directory) are fetched when the file is opened, and a bigger central directory in one more request
of exactly its size; `prefetch` loads a member's whole span at once.
"""

from __future__ import annotations

import bisect
import io
from typing import TYPE_CHECKING

from sparkdoctor.released.http import Client, RemoteError

if TYPE_CHECKING:
    from _typeshed import (
        WriteableBuffer,  # the name typeshed gives io's readinto argument
    )

READAHEAD = 64 * 1024
TAIL = 64 * 1024  # was 1 MiB: ~1 MB a wheel, most of it unused, was 1/5 of a cold `verify --bounds`


class RangeFile(io.RawIOBase):
    def __init__(self, client: Client, url: str, size: int):
        super().__init__()
        self.client, self.url, self.size = client, url, size
        self._pos = 0
        self._starts: list[int] = []  # sorted starts of the spans held
        self._spans: dict[int, bytes] = {}
        self.prefetch(max(0, size - TAIL), size)

    # -- what zipfile calls --------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        want = min(len(view), self.size - self._pos)
        if want <= 0:
            return 0
        data = self._read(self._pos, self._pos + want)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def read(self, size: int = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self._pos + size)
        if end <= self._pos:
            return b""
        data = self._read(self._pos, end)
        self._pos = end
        return data

    # -- spans ---------------------------------------------------------------------------------
    def _held(self, start: int, end: int) -> bytes | None:
        i = bisect.bisect_right(self._starts, start) - 1
        if i >= 0:
            s = self._starts[i]
            data = self._spans[s]
            if s + len(data) >= end:
                return data[start - s : end - s]
        return None

    def _read(self, start: int, end: int) -> bytes:
        held = self._held(start, end)
        if held is not None:
            return held
        self.prefetch(start, max(end, min(self.size, start + READAHEAD)))
        held = self._held(start, end)
        assert held is not None, "prefetch holds [start, end): get_range answers exactly the bytes asked for, or raises"
        return held

    def prefetch(self, start: int, end: int) -> None:
        """Hold bytes [start, end) (clipped to the file), in one range request."""
        end = min(end, self.size)
        if start >= end or self._held(start, end) is not None:
            return
        data, total = self.client.get_range(self.url, start, end)
        if total is not None and total != self.size:
            raise RemoteError(f"{self.url}: the server says the file has {total} bytes, the index says {self.size}")
        self._add(start, data)

    def _add(self, start: int, data: bytes) -> None:
        # merge with overlapping or touching spans so lookups stay one bisect
        end = start + len(data)
        for s in list(self._starts):
            d = self._spans[s]
            if s <= end and start <= s + len(d):
                lo, hi = min(s, start), max(s + len(d), end)
                merged = bytearray(hi - lo)
                merged[s - lo : s - lo + len(d)] = d
                merged[start - lo : start - lo + len(data)] = data
                start, data, end = lo, bytes(merged), hi
                self._starts.remove(s)
                del self._spans[s]
        bisect.insort(self._starts, start)
        self._spans[start] = data
