"""HTTP for the released-file reader and `matrix update`: the standard library's http.client, one
kept-alive connection per host, redirects followed, and every answer bounded.

Chosen on measured numbers (docs/evidence/remote-wheels.md): for this access pattern (a handful of
small range requests per wheel, to one or two hosts) a kept-alive http.client connection was as fast
as requests and httpx, and urllib.request (a new TLS connection per request) was slower; it also adds
no dependency. Only https and http URLs are followed, never from https down to http.

Bounds (every command that reads the network goes through here: `matrix update`, `matrix verify`,
`track`, `whatif`, `mods --release`):
  * TIMEOUT: any one wait (the name lookup and connecting together, a read);
  * DEADLINE: one request from the first byte sent to the last byte read, redirects included, and never
    past the run's own time limit (proc.time_left): a server that trickles a byte at a time is cut off;
  * MAX_BODY (or the caller's limit): what a whole answer may hold; MAX_ERROR_BODY: what is read of a
    redirect's or an error's body (the rest is never read: the connection is dropped instead).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import SplitResult, urljoin, urlsplit

from sparkdoctor import (
    lookup,  # the name lookup inside the connect timeout: socket timeouts never bound it
    proc,  # the run's time limit (--timeout) bounds every request too
)
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_VERIFY_ERROR

TIMEOUT = 60.0
DEADLINE = 600.0
MAX_BODY = 32 * 1024 * 1024
MAX_ERROR_BODY = 64 * 1024
MAX_REDIRECTS = 5
USER_AGENT = "sparkdoctor (released-file reader)"
_CHUNK = 1 << 16


class RemoteError(SparkdoctorError):
    """A registry or file server that could not be reached or answered wrongly; one line, the URL named."""

    exit_code = EXIT_VERIFY_ERROR
    code = "registry"


class TooLarge(RemoteError):
    """An answer longer than the reader's limit (nothing past the limit was read); `size` when it was said."""

    def __init__(self, message: str, size: int | None = None) -> None:
        super().__init__(message)
        self.size = size


class RangeUnsupported(RemoteError):
    """The server answered a range request with the whole file (200): it ignores Range."""


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    url: str


def _context() -> ssl.SSLContext:
    cafile = os.environ.get("SSL_CERT_FILE") or os.environ.get("PIP_CERT") or None
    return ssl.create_default_context(cafile=cafile if cafile and os.path.isfile(cafile) else None)


class _Open:
    """One answer being read: the response, the socket under it and the request's deadline."""

    def __init__(self, resp: http.client.HTTPResponse, sock: socket.socket | None, url: str, until: float):
        self.resp, self.sock, self.url, self.until = resp, sock, url, until


def split_url(url: str) -> SplitResult:
    """urlsplit, its ValueError (`http://[::1/x`: a URL the index, a redirect or $SPARKDOCTOR_INDEX_URL gave) one
    RemoteError line."""
    try:
        return urlsplit(url)
    except ValueError as exc:
        raise RemoteError(f"{url[:200]}: not a URL that can be read ({exc})") from None


class Client:
    """GET with kept-alive connections (one per scheme://host:port), each request under one deadline."""

    def __init__(self, timeout: float = TIMEOUT):
        self.timeout = timeout
        self._conns: dict[tuple[str, str], http.client.HTTPConnection] = {}
        self._ssl: ssl.SSLContext | None = None
        self.requests = 0  # how many requests were sent (for the evidence and the tests)
        self.bytes_read = 0  # body bytes received
        self._active: socket.socket | None = None  # the socket the request in progress waits on
        self._expired = False  # the request in progress ran past its deadline

    def _conn(self, scheme: str, netloc: str) -> http.client.HTTPConnection:
        key = (scheme, netloc)
        conn = self._conns.get(key)
        if conn is None:
            if scheme == "https":
                self._ssl = self._ssl or _context()
                conn = http.client.HTTPSConnection(netloc, timeout=self.timeout, context=self._ssl)
            elif scheme == "http":
                conn = http.client.HTTPConnection(netloc, timeout=self.timeout)
            else:
                raise RemoteError(f"{scheme}: only http and https URLs are read")
            # http.client's own hook for how it connects (not in the typing stubs): the name lookup bounded too
            setattr(conn, "_create_connection", lookup.create_connection)  # noqa: B010
            self._conns[key] = conn
        return conn

    def _wait(self, until: float, url: str) -> float:
        """The seconds the next wait may take: TIMEOUT, or less where the deadline is nearer."""
        left = until - time.monotonic()
        if left <= 0 or self._expired:
            raise RemoteError(f"{url}: no complete answer within {DEADLINE:.0f} s (or the run's time limit); gave up")
        return min(self.timeout, left)

    @contextlib.contextmanager
    def _request(self) -> Iterator[float]:
        """One request's deadline (DEADLINE, or sooner where the run's time limit ends sooner), enforced by a
        timer that shuts the socket it waits on, so that no wait outlives it (a server that trickles its
        headers or its body a byte at a time included)."""
        own = time.monotonic() + DEADLINE
        left = proc.time_left()
        until = own if left is None else min(own, time.monotonic() + left)
        self._expired, self._active = False, None
        timer = threading.Timer(max(0.0, until - time.monotonic()), self._expire)
        timer.daemon = True
        timer.start()
        try:
            yield until
        finally:
            timer.cancel()
            self._active = None
            if self._expired:  # a connection the timer shut is no use to the next request
                self.close()

    def _expire(self) -> None:
        self._expired = True
        sock = self._active
        if sock is not None:  # the plain socket's shutdown (an SSL socket's own would touch its state from this thread)
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def _open(self, url: str, headers: dict[str, str], until: float) -> _Open:
        for _ in range(MAX_REDIRECTS + 1):
            parts = split_url(url)
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            sent = {"User-Agent": USER_AGENT, **headers}
            for attempt in (0, 1):  # a kept-alive connection the server closed is retried once on a new one
                try:
                    conn = self._conn(parts.scheme, parts.netloc)
                except http.client.InvalidURL as exc:  # a host with a space, a port that is no number
                    raise RemoteError(f"{url}: not a URL that can be read ({exc})") from None
                try:
                    conn.timeout = self._wait(until, url)
                    if conn.sock is None:
                        conn.connect()
                    else:
                        conn.sock.settimeout(conn.timeout)
                    sock = self._active = conn.sock
                    conn.request("GET", path, headers=sent)
                    resp = conn.getresponse()
                    break
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest) as exc:
                    self._drop(parts.scheme, parts.netloc)
                    self._wait(until, url)  # the deadline, when it is what ended the answer
                    if attempt:
                        raise RemoteError(f"{url}: connection lost: {exc}") from None
                except (OSError, http.client.HTTPException) as exc:
                    self._drop(parts.scheme, parts.netloc)
                    self._wait(until, url)
                    if isinstance(exc, socket.gaierror):  # "gaierror: [Errno -2] Name or service not known" said less
                        raise RemoteError(f"{url}: cannot look up {parts.hostname} ({exc.strerror}): no network, or "
                                          "a mistyped host") from None
                    raise RemoteError(f"{url}: {type(exc).__name__}: {exc}") from None
            self.requests += 1
            self._wait(until, url)  # headers cut short by the timer are no answer
            opened = _Open(resp, sock, url, until)
            if resp.status in (301, 302, 303, 307, 308):
                location = resp.getheader("Location")
                self._discard(opened)  # a redirect's body is never read whole
                if not location:
                    raise RemoteError(f"{url}: redirect without a Location")
                try:
                    target = urljoin(url, location)
                except ValueError as exc:  # `http://[::1/x`
                    raise RemoteError(f"{url}: redirected to {location[:200]!r}, not a URL that can be read ({exc})") from None
                if parts.scheme == "https" and split_url(target).scheme == "http":
                    raise RemoteError(f"{url}: redirected from https to plain http ({target}): refused, an answer "
                                      "over http could be changed on its way")
                url = target
                continue
            return opened
        raise RemoteError(f"{url}: more than {MAX_REDIRECTS} redirects")

    def _drop(self, scheme: str, netloc: str) -> None:
        conn = self._conns.pop((scheme, netloc), None)
        if conn is not None:
            conn.close()

    def _drop_url(self, url: str) -> None:
        parts = urlsplit(url)
        self._drop(parts.scheme, parts.netloc)

    def _read(self, opened: _Open, limit: int, out: BinaryIO | None = None, cut: bool = False) -> bytes:
        """The body of `opened`, at most `limit` bytes, before the deadline: RemoteError past either (with
        `cut`, the first `limit` bytes and the connection dropped). Into `out` when given (b"" returned)."""
        chunks: list[bytes] = []
        total = 0
        resp, url = opened.resp, opened.url
        try:
            while True:
                wait = self._wait(opened.until, url)
                if opened.sock is not None:
                    opened.sock.settimeout(wait)
                if resp.length == 0:  # all of a stated length read: read() closes the answer (read1 would not)
                    resp.read()
                    break
                chunk = resp.read1(min(_CHUNK, limit + 1 - total))  # returns what one receive brought
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    self._drop_url(url)
                    if cut:
                        chunks.append(chunk[: len(chunk) - (total - limit)])
                        total = limit
                        break
                    raise TooLarge(f"{url}: the answer is larger than {limit:,} bytes; sparkdoctor reads at most that")
                if out is None:
                    chunks.append(chunk)
                else:
                    out.write(chunk)
            if self._expired:  # the end was the timer shutting the socket, not the answer's own end
                self._wait(opened.until, url)
        except RemoteError:
            self._drop_url(url)
            raise
        except (OSError, http.client.HTTPException) as exc:
            self._drop_url(url)
            self._wait(opened.until, url)  # the deadline, when it is what ended the answer
            raise RemoteError(f"{url}: reading the answer failed: {type(exc).__name__}: {exc}") from None
        self.bytes_read += total
        return b"".join(chunks)

    def _discard(self, opened: _Open) -> None:
        """Finish with an answer whose body is not wanted: a short one is read (the connection stays
        kept alive), anything longer or of unknown length is not: the connection is dropped."""
        length = opened.resp.length
        if length is None or length > MAX_ERROR_BODY:
            self._drop_url(opened.url)
            return
        with contextlib.suppress(RemoteError):
            self._read(opened, MAX_ERROR_BODY)

    def get(self, url: str, headers: dict[str, str] | None = None, limit: int = MAX_BODY) -> Response:
        """The answer to GET `url`: the body of a 2xx whole (at most `limit` bytes, else RemoteError), of
        anything else only its first MAX_ERROR_BODY bytes."""
        with self._request() as until:
            opened = self._open(url, headers or {}, until)
            resp = opened.resp
            ok = 200 <= resp.status < 300
            body = self._read(opened, limit if ok else MAX_ERROR_BODY, cut=not ok)
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body, opened.url)

    def get_range(self, url: str, start: int, end: int) -> tuple[bytes, int | None]:
        """Bytes [start, end) of `url` and the total size the server states; RangeUnsupported on a 200."""
        with self._request() as until:
            opened = self._open(url, {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}, until)
            resp, final = opened.resp, opened.url
            if resp.status == 200:
                # The server ignores Range: do not read the whole file through a range request.
                self._drop_url(final)
                raise RangeUnsupported(f"{final}: the server ignores HTTP range requests (it answered 200 with the whole file)")
            if resp.status != 206:
                self._discard(opened)
                raise RemoteError(f"{final}: HTTP {resp.status} {resp.reason} for a range request")
            body = self._read(opened, end - start)
        total = None
        content_range = resp.getheader("Content-Range") or ""
        if "/" in content_range and content_range.rsplit("/", 1)[1].strip().isdigit():
            total = int(content_range.rsplit("/", 1)[1])
        if len(body) != end - start:
            raise RemoteError(f"{final}: asked for {end - start} bytes at {start}, got {len(body)}")
        return body, total

    def download(self, url: str, out: BinaryIO, limit: int) -> int:
        """Stream the whole of `url` into `out` (at most `limit` bytes); the size written."""
        with self._request() as until:
            opened = self._open(url, {"Accept-Encoding": "identity"}, until)
            resp = opened.resp
            if resp.status != 200:
                self._discard(opened)
                raise RemoteError(f"{opened.url}: HTTP {resp.status} {resp.reason}")
            before = self.bytes_read
            try:
                self._read(opened, limit, out=out)
            except TooLarge:
                raise RemoteError(f"{opened.url}: larger than {limit} bytes; refusing to download it whole") from None
        return self.bytes_read - before

    def close(self) -> None:
        for key in list(self._conns):
            self._drop(*key)
