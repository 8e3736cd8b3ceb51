"""A minimal asyncio HTTP/1.1 client: GET a small body, or POST JSON and read the reply line by line.

Why not httpx or requests: the bench talks to one OpenAI-compatible server, almost always on
127.0.0.1, and what it measures is the arrival time of each line of a server-sent-event stream.
benchmarks/bench_client_overhead.py measures the candidates against a maximum-rate local stream
source; this one reads the most lines per second with the least work per line and adds no
dependency (httpx brings six packages and ~60 ms of import). It speaks only what the bench needs:
http:// and https://, Content-Length, chunked transfer coding, or a body that ends at EOF.
One connection per request (`Connection: close`), so a request never waits behind another's body.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator
from urllib.parse import urlsplit


class HttpError(Exception):
    """The server could not be reached, answered with an error status, or broke the protocol."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    tls: bool
    base_path: str

    @classmethod
    def parse(cls, url: str) -> "Endpoint":
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpError(f"{url!r}: give an http:// or https:// URL with a host")
        tls = parts.scheme == "https"
        try:
            port = parts.port or (443 if tls else 80)
        except ValueError as exc:
            raise HttpError(f"{url!r}: {exc}") from None
        return cls(parts.hostname, port, tls, parts.path.rstrip("/"))


async def _open(ep: Endpoint, timeout: float):
    ctx = ssl.create_default_context() if ep.tls else None
    try:
        return await asyncio.wait_for(asyncio.open_connection(ep.host, ep.port, ssl=ctx, limit=1 << 20), timeout)
    except asyncio.TimeoutError:
        raise HttpError(f"{ep.host}:{ep.port} did not accept a connection within {timeout:g}s") from None
    except OSError as exc:
        raise HttpError(f"cannot connect to {ep.host}:{ep.port}: {exc.strerror or exc}") from None


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await writer.wait_closed()
    except (OSError, asyncio.CancelledError):
        pass


def _request_bytes(ep: Endpoint, method: str, path: str, body: bytes | None) -> bytes:
    host = ep.host if ":" not in ep.host else f"[{ep.host}]"
    lines = [f"{method} {ep.base_path}{path} HTTP/1.1", f"Host: {host}:{ep.port}", "Connection: close",
             "Accept: */*", "User-Agent: sparkdoctor-bench"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise HttpError("the server closed the connection without an answer")
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise HttpError(f"not an HTTP answer: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _body_chunks(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise HttpError("the connection closed in the middle of the answer (no final chunk)")
            try:
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            except ValueError:
                raise HttpError(f"bad chunk size {size_line[:40]!r}") from None
            if size == 0:
                return
            try:
                data = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                raise HttpError("the connection closed in the middle of a chunk") from None
            await reader.readline()  # the CRLF after each chunk
            yield data
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, 1 << 16))
            if not data:
                return
            left -= len(data)
            yield data
    else:
        while data := await reader.read(1 << 16):
            yield data


async def get(url: str, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET base URL + path; (status, body). Raises HttpError when it cannot be read at all."""
    ep = Endpoint.parse(url)
    reader, writer = await _open(ep, timeout)
    try:
        writer.write(_request_bytes(ep, "GET", path, None))

        async def read() -> tuple[int, bytes]:
            status, headers = await _read_head(reader)
            return status, b"".join([c async for c in _body_chunks(reader, headers)])

        try:
            return await asyncio.wait_for(read(), timeout)
        except asyncio.TimeoutError:
            raise HttpError(f"GET {path} got no full answer within {timeout:g}s") from None
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise HttpError(f"GET {path}: {exc}") from None
    finally:
        await _close(writer)


class _Dechunker:
    """Incremental decoder of the chunked transfer coding: feed bytes, get body bytes.
    Walks each buffer with an offset (no copying per chunk: a 64 KiB read holds hundreds of them)."""

    def __init__(self) -> None:
        self.buf = b""
        self.left = 0  # body bytes still due in the current chunk; -1: its closing CRLF is due
        self.done = False

    def feed(self, data: bytes) -> bytes:
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        out = []
        while not self.done and pos < n:
            if self.left > 0:
                take = min(self.left, n - pos)
                out.append(buf[pos:pos + take])
                pos += take
                self.left -= take
                if self.left:
                    break
                self.left = -1
            if self.left < 0:
                if n - pos < 2:
                    break
                pos += 2
                self.left = 0
            end = buf.find(b"\r\n", pos)
            if end < 0:
                break
            try:
                size = int(buf[pos:end].split(b";", 1)[0].strip() or b"0", 16)
            except ValueError:
                raise HttpError(f"bad chunk size {buf[pos:end][:40]!r}") from None
            pos = end + 2
            if size == 0:
                self.done = True
            self.left = size
        self.buf = buf[pos:]
        return b"".join(out)


async def post_lines(url: str, path: str, payload: dict[str, Any], timeout: float,
                     prefix: bytes = b"") -> AsyncIterator[tuple[float, bytes]]:
    """POST JSON; yield (time.perf_counter() at arrival, line) for each line of the answer's body
    that starts with `prefix`.

    A status other than 200 raises HttpError with the start of the server's message. `timeout`
    bounds the wait for the answer and any silence inside the stream (a server that stops sending),
    not the whole stream. Reads are as large as the socket has ready: a burst of chunks costs one
    read, and every line of it gets the same arrival time, which is when the client could see it.
    """
    ep = Endpoint.parse(url)
    reader, writer = await _open(ep, timeout)
    try:
        writer.write(_request_bytes(ep, "POST", path, json.dumps(payload).encode()))
        try:
            status, headers = await asyncio.wait_for(_read_head(reader), timeout)
        except asyncio.TimeoutError:
            raise HttpError(f"POST {path}: no answer within {timeout:g}s") from None
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise HttpError(f"POST {path}: the connection broke before an answer ({exc})") from None
        if status != 200:
            body = b""
            try:
                body = await asyncio.wait_for(reader.read(300), timeout)
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    body = _Dechunker().feed(body)
            except (OSError, asyncio.TimeoutError):
                pass
            raise HttpError(f"POST {path} answered HTTP {status}: {body.decode('utf-8', 'replace').strip()[:300]}")
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        left = int(headers["content-length"]) if "content-length" in headers and not chunked else None
        dechunk = _Dechunker() if chunked else None
        last = [time.monotonic()]
        stalled = [False]

        def watchdog() -> None:  # one timer per request instead of one per read
            if time.monotonic() - last[0] >= timeout:
                stalled[0] = True
                writer.transport.abort()
            else:
                handle[0] = loop.call_later(max(0.05, timeout - (time.monotonic() - last[0])), watchdog)

        loop = asyncio.get_running_loop()
        handle = [loop.call_later(timeout, watchdog)]
        pending = b""
        try:
            while True:
                try:
                    data = await reader.read(1 << 16)
                except OSError as exc:
                    if stalled[0]:
                        raise HttpError(f"POST {path}: the stream stalled for {timeout:g}s") from None
                    raise HttpError(f"POST {path}: the connection broke mid-stream ({exc.strerror or exc})") from None
                now = time.perf_counter()
                last[0] = time.monotonic()
                if not data:
                    if stalled[0]:
                        raise HttpError(f"POST {path}: the stream stalled for {timeout:g}s")
                    if dechunk is not None and not dechunk.done:
                        raise HttpError(f"POST {path}: the connection closed in the middle of the answer (no final chunk)")
                    break
                if dechunk is not None:
                    data = dechunk.feed(data)
                elif left is not None:
                    data = data[:left]
                    left -= len(data)
                pending += data
                if b"\n" in pending:
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if line.startswith(prefix):
                            yield now, line.rstrip(b"\r")
                if (dechunk is not None and dechunk.done) or left == 0:
                    break
        finally:
            handle[0].cancel()
        if pending and pending.startswith(prefix):
            yield time.perf_counter(), pending.rstrip(b"\r")
    finally:
        await _close(writer)
