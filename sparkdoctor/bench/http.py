"""The bench's HTTP: GET a small body, or POST JSON and read the reply line by line, through aiohttp.

Why aiohttp: the bench must time the arrival of each line of a server-sent-event stream from many
concurrent streams in one process. benchmarks/bench_client_overhead.py measured the candidates against a
paced local SSE source at concurrency 1, 4 and 16 (docs/evidence/http-client.md): every async client's
decode tok/s was within 0.3% of the rate the server sent, aiohttp's CPU per token within 1.1-1.6x of the
hand-written HTTP/1.1 + chunked + TLS client this module used to be, and requests (blocking, a thread per
stream) lost 4% at concurrency 16. That margin does not pay for owning an HTTP implementation; aiohttp is
well kept, async like the bench, and does chunked coding, TLS and keep-alive correctly.

What the bench relies on is kept here: each read is stamped with time.perf_counter() when the client gets
it, and every line in it gets that stamp (a burst of chunks in one read arrives at one time, which is when
the client could see it); `timeout` bounds the wait for the answer and any silence inside the stream;
every failure is an HttpError with one line. One connection per request (force_close), so a request never
waits behind another's body. aiohttp is imported with this module, so its first import (tenths of a
second) is never inside a timed request; `check` never imports the bench.

Nothing a server sends can make the bench wait or grow without end: a whole answer (GET, or a POST read
whole) is read to MAX_BODY_BYTES within `timeout`; a stream has a total time limit (`total`: the caller
scales it with the work it asked, bench/client.py), a byte cap (`max_bytes`), a longest line
(MAX_LINE_BYTES) and, where the caller gives one, a most lines (`max_lines`). A redirect is never
followed (its target is not the server the user named, and its numbers would be filed under this URL):
a 3xx is a failure that names the Location.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

import aiohttp

from sparkdoctor import lookup, proc
from sparkdoctor.errors import BenchFailure
from sparkdoctor.inputs import MiB, byte_size

T = TypeVar("T")

MAX_BODY_BYTES = 16 * MiB  # a whole answer: /v1/models, /version, /metrics (vLLM's: a few hundred KB), a probe's
MAX_STREAM_BYTES = 64 * MiB  # one streamed answer, unless the caller gives its own cap (bench/client.py does)
MAX_LINE_BYTES = 1 * MiB  # one line of a stream (a vLLM chat chunk is about 250 bytes)
DEFAULT_STREAM_S = 3600.0  # the whole of one stream, for a caller that gives no `total` of its own


class HttpError(BenchFailure):
    """The server could not be reached, answered with an error status, or broke the protocol."""

    code = "http"


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

    def url(self, path: str) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}{self.base_path}{path}"


class _Resolver(aiohttp.abc.AbstractResolver):
    """aiohttp's own resolver looks a name up in the loop's executor, whose thread asyncio.run then waits for at its
    end: a lookup that never answered held bench past every timeout. This one looks up in a daemon thread that is
    left behind after `timeout` (sparkdoctor.lookup)."""

    def __init__(self, timeout: float):
        self.timeout = timeout

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list[aiohttp.abc.ResolveResult]:
        try:
            ask = lookup.start(host, port, family)
            rows = await asyncio.wait_for(asyncio.wrap_future(ask), ask.left(self.timeout))
        except asyncio.TimeoutError:
            raise OSError(f"looking up the name {host[:200]!r} took more than {self.timeout:g} s") from None
        return [{"hostname": host, "host": _numeric(addr), "port": port, "family": fam, "proto": proto,
                 "flags": socket.AI_NUMERICHOST | socket.AI_NUMERICSERV} for fam, _kind, proto, _name, addr in rows]

    async def close(self) -> None:
        return None


def _numeric(addr: tuple[object, ...]) -> str:
    """The address to connect to: an IPv6 link-local one with its scope (fe80::1%eth0), without which connect fails
    (EINVAL), as aiohttp's own resolver writes it (getnameinfo, numeric: nothing is looked up)."""
    if len(addr) >= 4 and addr[3]:
        return socket.getnameinfo(addr[:4], socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)[0]  # type: ignore[arg-type]
    return str(addr[0])


def _session(timeout: float):
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True, limit=0, resolver=_Resolver(timeout)),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
        headers={"User-Agent": "sparkdoctor-bench", "Accept": "*/*"}, auto_decompress=False)


def run(main: Coroutine[object, object, T]) -> T:
    """asyncio.run(main), and a SIGINT/SIGTERM/SIGHUP that arrived meanwhile raised as proc.Interrupted once it is over.
    asyncio lets only KeyboardInterrupt and SystemExit out of its transports and callbacks: the Interrupted a signal
    raised inside one became a transport's fatal error (logged with a traceback), so a failed request, and bench
    exited 4 blaming the server for a SIGTERM."""
    seen = proc.signals_seen()
    try:
        return asyncio.run(_quiet(main))
    finally:
        count, signum = proc.signals_seen()
        if count != seen[0]:
            raise proc.Interrupted(signum)


async def _quiet(main: Coroutine[object, object, T]) -> T:
    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        if not isinstance(context.get("exception"), (KeyboardInterrupt, proc.Interrupted)):  # raised by run() instead
            loop.default_exception_handler(context)

    asyncio.get_running_loop().set_exception_handler(handler)
    return await main


def _failure(exc: BaseException, ep: Endpoint, what: str, timeout: float, answered: bool) -> HttpError:
    """One line for whatever aiohttp raised."""

    if isinstance(exc, aiohttp.ClientConnectorError):
        err = exc.os_error
        return HttpError(f"cannot connect to {ep.host}:{ep.port}: {getattr(err, 'strerror', None) or err}")
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        if not answered:
            return HttpError(f"{what}: no answer within {timeout:g}s")
        return HttpError(f"{what}: the stream stalled for {timeout:g}s")
    if isinstance(exc, aiohttp.ClientResponseError) and not answered:
        return HttpError(f"not an HTTP answer: {exc.message}"[:200])
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return HttpError(f"{what}: the server closed the connection without an answer" if not answered
                         else f"{what}: the connection closed in the middle of the answer")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return HttpError(f"{what}: the connection closed in the middle of the answer ({exc})"[:300])
    return HttpError(f"{what}: {exc.__class__.__name__}: {exc}"[:300])


def _refuse_redirect(what: str, resp: aiohttp.ClientResponse) -> None:
    """A 3xx answer raised as a failure that names where it pointed."""
    if not 300 <= resp.status < 400:
        return
    where = resp.headers.get("Location")
    to = f"a redirect to {where[:200]!r}" if where else "a redirect without a Location"
    raise HttpError(f"{what} answered HTTP {resp.status}, {to}: bench does not follow redirects "
                     "(give the URL of the server itself)")


async def _read_whole(resp: aiohttp.ClientResponse, what: str, max_bytes: int) -> bytes:
    too_big = HttpError(f"{what}: the answer passed {byte_size(max_bytes)}, the most bench reads of one")
    if resp.content_length is not None and resp.content_length > max_bytes:
        raise too_big
    chunks: list[bytes] = []
    seen = 0
    async for data in resp.content.iter_any():
        seen += len(data)
        if seen > max_bytes:
            raise too_big
        chunks.append(data)
    return b"".join(chunks)


async def _whole(method: str, url: str, path: str, timeout: float, max_bytes: int,
                 payload: Mapping[str, object] | None = None) -> tuple[int, bytes]:
    """One request whose answer is read whole: (status, body), all of it within `timeout` and `max_bytes`."""

    ep = Endpoint.parse(url)
    what = f"{method} {path}"
    answered = False

    async def go() -> tuple[int, bytes]:
        nonlocal answered
        async with _session(timeout) as session:
            async with session.request(method, ep.url(path), json=payload, allow_redirects=False) as resp:
                answered = True
                _refuse_redirect(what, resp)
                return resp.status, await _read_whole(resp, what, max_bytes)

    try:
        return await asyncio.wait_for(go(), timeout)
    except asyncio.TimeoutError:
        if answered:
            raise HttpError(f"{what} got no full answer within {timeout:g}s") from None
        raise _failure(asyncio.TimeoutError(), ep, what, timeout, False) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise _failure(exc, ep, what, timeout, answered) from None


async def get(url: str, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET base URL + path; (status, body), read whole within `timeout` and MAX_BODY_BYTES. Raises HttpError when
    it cannot be read at all, is larger, or is a redirect."""
    return await _whole("GET", url, path, timeout, MAX_BODY_BYTES)


async def post_json(url: str, path: str, payload: Mapping[str, object], timeout: float,
                    max_bytes: int = MAX_BODY_BYTES) -> tuple[int, bytes]:
    """POST JSON; (status, body) of an answer that is not streamed, read whole within `timeout` and `max_bytes`."""
    return await _whole("POST", url, path, timeout, max_bytes, payload)


async def post_lines(url: str, path: str, payload: Mapping[str, object], timeout: float,
                     prefix: bytes = b"", *, total: float = DEFAULT_STREAM_S, max_bytes: int | None = None,
                     max_lines: int | None = None, last: Callable[[bytes], bool] | None = None,
                     ) -> AsyncIterator[tuple[float, bytes]]:
    """POST JSON; yield (time.perf_counter() at arrival, line) for each line of the answer's body
    that starts with `prefix`.

    A status other than 200 raises HttpError with the start of the server's message. `timeout` bounds the
    wait for the answer and any silence inside the stream (a server that stops sending); `total` the whole
    request, `max_bytes` the body, `max_lines` the lines kept; past any of them is an HttpError. A kept line
    for which `last` is true ends the reading (what the server sends after it is not waited for). Every
    line of one read gets that read's arrival time. The lines are handed over when the answer is complete
    (the bench looks at them only then)."""

    ep = Endpoint.parse(url)
    what = f"POST {path}"
    lines: list[tuple[float, bytes]] = []

    async def collect() -> None:
        answered = False
        try:
            async with _session(timeout) as session:
                async with session.post(ep.url(path), json=payload, allow_redirects=False) as resp:
                    answered = True
                    if resp.status != 200:
                        _refuse_redirect(what, resp)
                        body = await asyncio.wait_for(resp.content.read(300), timeout)
                        raise HttpError(f"{what} answered HTTP {resp.status}: "
                                        f"{body.decode('utf-8', 'replace').strip()[:300]}")
                    await _read_lines(resp, what, prefix, MAX_STREAM_BYTES if max_bytes is None else max_bytes,
                                      max_lines, last, lines)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:  # an HttpError is none of these
            raise _failure(exc, ep, what, timeout, answered) from None

    try:
        await asyncio.wait_for(collect(), total)
    except asyncio.TimeoutError:  # collect() turns its own timeouts into HttpError: this is `total`
        raise HttpError(f"{what}: the request did not finish in {total:g}s, the most bench waits for this answer"
                        ) from None
    for item in lines:
        yield item


async def _read_lines(resp: aiohttp.ClientResponse, what: str, prefix: bytes, max_bytes: int,
                      max_lines: int | None, last: Callable[[bytes], bool] | None,
                      lines: list[tuple[float, bytes]]) -> None:
    """Split the body into lines as it arrives; keep (arrival time, line) of those that start with `prefix`.
    The unfinished line is a bytearray that only grows (never copied whole per read), at most MAX_LINE_BYTES."""

    def keep(now: float, line: bytes) -> bool:
        """Keep one line; True when it is the last one to read."""
        if not line.startswith(prefix):
            return False
        lines.append((now, line.rstrip(b"\r")))
        if max_lines is not None and len(lines) > max_lines:
            raise HttpError(f"{what}: the stream sent more than {max_lines:,} lines, far more than the request "
                            "asked for (a stream that does not end is not measurable)")
        return last is not None and last(line)

    pending = bytearray()
    seen = 0
    async for data in resp.content.iter_any():
        now = time.perf_counter()
        seen += len(data)
        if seen > max_bytes:
            raise HttpError(f"{what}: the response stream passed {byte_size(max_bytes)}, the most bench reads of one answer")
        cut = data.rfind(b"\n")
        if cut < 0:
            pending += data
        else:
            if pending:
                pending += data[:cut]
                got = bytes(pending).split(b"\n")
            else:
                got = data[:cut].split(b"\n")
            pending = bytearray(data[cut + 1:])
            for line in got:
                if keep(now, line):
                    return
        if len(pending) > MAX_LINE_BYTES:
            raise HttpError(f"{what}: a line of the stream passed {byte_size(MAX_LINE_BYTES)} without ending")
    if pending:
        keep(time.perf_counter(), bytes(pending))
