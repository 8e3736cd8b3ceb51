"""sparkdoctor/bench/http.py as it was before the switch to aiohttp (kept here only so that
benchmarks/bench_client_overhead.py can reproduce docs/evidence/http-client.md). A minimal asyncio HTTP/1.1 client: GET a small body, or POST JSON and read the reply line by line.

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
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
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
    def parse(cls, url: str) -> Endpoint:
        try:  # urlsplit refuses a broken IPv6 host ("http://[::1"), .port one out of range
            parts = urlsplit(url)
            host, tls = parts.hostname, parts.scheme == "https"
            if parts.scheme not in ("http", "https") or not host:
                raise HttpError(f"{url!r}: give an http:// or https:// URL with a host")
            port = parts.port or (443 if tls else 80)
        except ValueError as exc:
            raise HttpError(f"{url!r}: {exc}") from None
        return cls(host, port, tls, parts.path.rstrip("/"))


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


class _LineStream(asyncio.Protocol):
    """One streamed answer, read by the event loop's own callbacks: every `data_received` stamps the
    time and cuts the bytes into lines right there. No future is resolved and no coroutine resumed per
    read, which is where an asyncio StreamReader spends most of its time per token (measured in
    benchmarks/bench_client_overhead.py); the caller is woken once, when the answer is complete."""

    def __init__(self, path: str, prefix: bytes, timeout: float, done: asyncio.Future) -> None:
        self.path, self.prefix, self.timeout, self.done = path, prefix, timeout, done
        self.lines: list[tuple[float, bytes]] = []
        self.transport: asyncio.Transport | None = None
        self.head = b""
        self.status: int | None = None
        self.error_body = b""
        self.dechunk: _Dechunker | None = None
        self.left: int | None = None  # Content-Length still due, when the answer has one
        self.pending = b""
        self.last = time.monotonic()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.last = time.monotonic()
        if self.done.done():
            return
        try:
            if self.status is None:
                self.head += data
                end = self.head.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.head) > 65536:
                        raise HttpError(f"POST {self.path}: an answer head over 64 KiB")
                    return
                data = self.head[end + 4:]
                self._parse_head(self.head[:end])
            if self.status != 200:
                self.error_body += data
                if len(self.error_body) >= 300:
                    self._finish_error()
                return
            self._body(data, now)
        except HttpError as exc:
            self._fail(exc)

    def _parse_head(self, head: bytes) -> None:
        status_line, *header_lines = head.split(b"\r\n")
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise HttpError(f"not an HTTP answer: {status_line[:80]!r}")
        headers = {}
        for line in header_lines:
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        self.status = int(parts[1])
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.dechunk = _Dechunker()
        elif "content-length" in headers:
            try:
                self.left = int(headers["content-length"])
            except ValueError:
                raise HttpError(f"bad Content-Length {headers['content-length'][:40]!r}") from None

    def _body(self, data: bytes, now: float) -> None:
        if self.dechunk is not None:
            data = self.dechunk.feed(data)
        elif self.left is not None:
            data = data[:self.left]
            self.left -= len(data)
        self.pending += data
        if b"\n" in self.pending:
            *lines, self.pending = self.pending.split(b"\n")
            prefix = self.prefix
            self.lines += [(now, line.rstrip(b"\r")) for line in lines if line.startswith(prefix)]
        if (self.dechunk is not None and self.dechunk.done) or self.left == 0:
            self._finish()

    def _finish(self) -> None:
        if self.pending.startswith(self.prefix) and self.pending:
            self.lines.append((time.perf_counter(), self.pending.rstrip(b"\r")))
        self.pending = b""
        if not self.done.done():
            self.done.set_result(self.lines)

    def _finish_error(self) -> None:
        body = _Dechunker().feed(self.error_body) if self.dechunk is not None else self.error_body
        self._fail(HttpError(f"POST {self.path} answered HTTP {self.status}: "
                             f"{body.decode('utf-8', 'replace').strip()[:300]}"))

    def _fail(self, exc: Exception) -> None:
        if not self.done.done():
            self.done.set_exception(exc)

    def eof_received(self) -> bool:
        self._ended()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and self.status is not None and not self.done.done():
            self._fail(HttpError(f"POST {self.path}: the connection broke mid-stream ({getattr(exc, 'strerror', None) or exc})"))
        self._ended()

    def _ended(self) -> None:
        if self.done.done():
            return
        if self.status is None:
            self._fail(HttpError(f"POST {self.path}: the server closed the connection without an answer"))
        elif self.status != 200:
            self._finish_error()
        elif self.dechunk is not None and not self.dechunk.done:
            self._fail(HttpError(f"POST {self.path}: the connection closed in the middle of the answer (no final chunk)"))
        else:
            self._finish()


async def post_lines(url: str, path: str, payload: dict[str, Any], timeout: float,
                     prefix: bytes = b"") -> AsyncIterator[tuple[float, bytes]]:
    """POST JSON; yield (time.perf_counter() at arrival, line) for each line of the answer's body
    that starts with `prefix`.

    A status other than 200 raises HttpError with the start of the server's message. `timeout`
    bounds the wait for the answer and any silence inside the stream (a server that stops sending),
    not the whole stream. Reads are as large as the socket has ready: a burst of chunks costs one
    read, and every line of it gets the same arrival time, which is when the client could see it.
    The lines are stamped as they arrive and handed over when the answer is complete (the bench
    looks at them only then), so the reading costs one callback per read and nothing more.
    """
    ep = Endpoint.parse(url)
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()
    ctx = ssl.create_default_context() if ep.tls else None
    try:
        transport, stream = await asyncio.wait_for(
            loop.create_connection(lambda: _LineStream(path, prefix, timeout, done), ep.host, ep.port, ssl=ctx), timeout)
    except asyncio.TimeoutError:
        raise HttpError(f"{ep.host}:{ep.port} did not accept a connection within {timeout:g}s") from None
    except OSError as exc:
        raise HttpError(f"cannot connect to {ep.host}:{ep.port}: {exc.strerror or exc}") from None
    stalled = False

    def watchdog() -> None:  # one timer per request, not one per read
        nonlocal stalled
        idle = time.monotonic() - stream.last
        if idle >= timeout:
            stalled = True
            stream._fail(HttpError(f"POST {path}: no answer within {timeout:g}s" if stream.status is None
                                   else f"POST {path}: the stream stalled for {timeout:g}s"))
        else:
            handle[0] = loop.call_later(max(0.05, timeout - idle), watchdog)

    handle = [loop.call_later(timeout, watchdog)]
    try:
        transport.write(_request_bytes(ep, "POST", path, json.dumps(payload).encode()))
        lines = await done
    finally:
        handle[0].cancel()
        transport.abort() if stalled else transport.close()
    for item in lines:
        yield item
