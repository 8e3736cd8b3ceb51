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
the client could see it); `timeout` bounds the wait for the answer and any silence inside the stream, not
the whole stream; every failure is an HttpError with one line. One connection per request
(force_close), so a request never waits behind another's body. aiohttp is imported with this module, so its
first import (tenths of a second) is never inside a timed request; `check` never imports the bench.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from sparkdoctor.errors import BenchFailure


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


def _session(timeout: float):
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True, limit=0),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
        headers={"User-Agent": "sparkdoctor-bench", "Accept": "*/*"}, auto_decompress=False)


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


async def get(url: str, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """GET base URL + path; (status, body). Raises HttpError when it cannot be read at all."""

    ep = Endpoint.parse(url)
    answered = False
    try:
        async with _session(timeout) as session:
            async with session.get(ep.url(path)) as resp:
                answered = True
                body = await asyncio.wait_for(resp.read(), timeout)
                return resp.status, body
    except asyncio.TimeoutError:
        if answered:
            raise HttpError(f"GET {path} got no full answer within {timeout:g}s") from None
        raise _failure(asyncio.TimeoutError(), ep, f"GET {path}", timeout, False) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise _failure(exc, ep, f"GET {path}", timeout, answered) from None


async def post_lines(url: str, path: str, payload: Mapping[str, object], timeout: float,
                     prefix: bytes = b"") -> AsyncIterator[tuple[float, bytes]]:
    """POST JSON; yield (time.perf_counter() at arrival, line) for each line of the answer's body
    that starts with `prefix`.

    A status other than 200 raises HttpError with the start of the server's message. `timeout` bounds the
    wait for the answer and any silence inside the stream (a server that stops sending), not the whole
    stream. Every line of one read gets that read's arrival time. The lines are handed over when the answer
    is complete (the bench looks at them only then)."""

    ep = Endpoint.parse(url)
    what = f"POST {path}"
    answered = False
    lines: list[tuple[float, bytes]] = []
    try:
        async with _session(timeout) as session:
            async with session.post(ep.url(path), json=payload) as resp:
                answered = True
                if resp.status != 200:
                    body = await asyncio.wait_for(resp.content.read(300), timeout)
                    raise HttpError(f"{what} answered HTTP {resp.status}: {body.decode('utf-8', 'replace').strip()[:300]}")
                pending = b""
                async for data in resp.content.iter_any():
                    now = time.perf_counter()
                    pending += data
                    if b"\n" in pending:
                        *got, pending = pending.split(b"\n")
                        lines += [(now, line.rstrip(b"\r")) for line in got if line.startswith(prefix)]
                if pending and pending.startswith(prefix):
                    lines.append((time.perf_counter(), pending.rstrip(b"\r")))
    except HttpError:
        raise
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        raise _failure(exc, ep, what, timeout, answered) from None
    for item in lines:
        yield item
