"""One zip member of a remote file read as a stream over range requests: the local header, then the
member's data in growing steps (1 MiB, doubling up to 8 MiB), inflated as it comes, so a reader that
needs only the start of a 300 MB library (sparkdoctor.released.elf) stops after a few requests and
nothing is held whole. Output is bounded by the size the zip's central directory states. `byte_ranges`
and `ChunkFile` stream any file the same way (an sdist's tar, read until its wanted members)."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Iterator

from sparkdoctor.released.http import Client, RemoteError

FIRST_STEP = 1 << 20
MAX_STEP = 8 << 20
_OUT = 4 << 20  # most bytes inflated per call (a small input may stand for much output)
_LOCAL = struct.Struct("<4s2B4HL2L2H")  # the zip local file header


def byte_ranges(client: Client, url: str, start: int, end: int) -> Iterator[bytes]:
    """Bytes [start, end) of `url` in growing range requests, as they come."""
    pos, step = start, FIRST_STEP
    while pos < end:
        data, _ = client.get_range(url, pos, min(end, pos + step))
        pos += len(data)
        step = min(MAX_STEP, step * 2)
        yield data


class ChunkFile(io.RawIOBase):
    """A read-only file object over an iterator of byte chunks (for tarfile's stream mode)."""

    def __init__(self, chunks: Iterator[bytes]):
        super().__init__()
        self._chunks, self._held = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self._held:
            self._held = next(self._chunks, b"")
        n = min(len(buffer), len(self._held))
        buffer[:n] = self._held[:n]
        self._held = self._held[n:]
        return n


def data_start(client: Client, url: str, info: zipfile.ZipInfo, size: int) -> int:
    """Where member `info`'s data begins in the zip at `url`: after its local header (one small request)."""
    head, _ = client.get_range(url, info.header_offset, min(size, info.header_offset + _LOCAL.size))
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        raise RemoteError(f"{url}: no local header for {info.filename} at {info.header_offset}")
    fields = _LOCAL.unpack(head)
    return info.header_offset + _LOCAL.size + fields[10] + fields[11]


def member_chunks(client: Client, url: str, info: zipfile.ZipInfo, size: int) -> Iterator[bytes]:
    """The uncompressed bytes of member `info` of the zip at `url` (`size` bytes in all), chunk by chunk."""
    start = data_start(client, url, info, size)
    end = start + info.compress_size
    if info.compress_type == zipfile.ZIP_STORED:
        inflate = None
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        inflate = zlib.decompressobj(-15)
    else:
        raise RemoteError(f"{url}: {info.filename} uses zip compression {info.compress_type}; only stored and deflated are read")
    produced = 0
    for data in byte_ranges(client, url, start, end):
        while data:
            if inflate is None:
                out, data = data, b""
            else:
                try:
                    out = inflate.decompress(data, _OUT)
                except zlib.error as exc:
                    raise RemoteError(f"{url}: {info.filename}: bad deflate data: {exc}") from None
                data = inflate.unconsumed_tail
            produced += len(out)
            if produced > info.file_size:
                raise RemoteError(f"{url}: {info.filename} inflates past its stated {info.file_size} bytes")
            if out:
                yield out
