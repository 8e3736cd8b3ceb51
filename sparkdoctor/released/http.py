"""HTTP for the released-file reader: the standard library's http.client, one kept-alive connection per
host, redirects followed, every wait under a timeout.

Chosen on measured numbers (docs/evidence/remote-wheels.md): for this access pattern (a handful of
small range requests per wheel, to one or two hosts) a kept-alive http.client connection was as fast
as requests and httpx, and urllib.request (a new TLS connection per request) was slower; it also adds
no dependency. Only https and http URLs are followed.
"""

from __future__ import annotations

import http.client
import os
import ssl
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import urljoin, urlsplit

from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_VERIFY_ERROR

TIMEOUT = 60.0
MAX_REDIRECTS = 5
USER_AGENT = "sparkdoctor (released-file reader)"


class RemoteError(SparkdoctorError):
    """A registry or file server that could not be reached or answered wrongly; one line, the URL named."""

    exit_code = EXIT_VERIFY_ERROR
    code = "registry"


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


class Client:
    """GET with kept-alive connections (one per scheme://host:port)."""

    def __init__(self, timeout: float = TIMEOUT):
        self.timeout = timeout
        self._conns: dict[tuple[str, str], http.client.HTTPConnection] = {}
        self._ssl: ssl.SSLContext | None = None
        self.requests = 0  # how many requests were sent (for the evidence and the tests)
        self.bytes_read = 0  # body bytes received

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
            self._conns[key] = conn
        return conn

    def _open(self, url: str, headers: dict[str, str]) -> tuple[http.client.HTTPResponse, str]:
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            sent = {"User-Agent": USER_AGENT, **headers}
            for attempt in (0, 1):  # a kept-alive connection the server closed is retried once on a new one
                conn = self._conn(parts.scheme, parts.netloc)
                try:
                    conn.request("GET", path, headers=sent)
                    resp = conn.getresponse()
                    break
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest) as exc:
                    self._drop(parts.scheme, parts.netloc)
                    if attempt:
                        raise RemoteError(f"{url}: connection lost: {exc}") from None
                except (OSError, http.client.HTTPException) as exc:
                    self._drop(parts.scheme, parts.netloc)
                    raise RemoteError(f"{url}: {type(exc).__name__}: {exc}") from None
            self.requests += 1
            if resp.status in (301, 302, 303, 307, 308):
                location = resp.getheader("Location")
                resp.read()
                if not location:
                    raise RemoteError(f"{url}: redirect without a Location")
                url = urljoin(url, location)
                continue
            return resp, url
        raise RemoteError(f"{url}: more than {MAX_REDIRECTS} redirects")

    def _drop(self, scheme: str, netloc: str) -> None:
        conn = self._conns.pop((scheme, netloc), None)
        if conn is not None:
            conn.close()

    def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        resp, final = self._open(url, headers or {})
        try:
            body = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            self._drop(*urlsplit(final)[:2])
            raise RemoteError(f"{final}: reading the answer failed: {exc}") from None
        self.bytes_read += len(body)
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body, final)

    def get_range(self, url: str, start: int, end: int) -> tuple[bytes, int | None]:
        """Bytes [start, end) of `url` and the total size the server states; RangeUnsupported on a 200."""
        resp, final = self._open(url, {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"})
        if resp.status == 200:
            # The server ignores Range: do not read the whole file through a range request.
            self._drop(*urlsplit(final)[:2])
            raise RangeUnsupported(f"{final}: the server ignores HTTP range requests (it answered 200 with the whole file)")
        if resp.status != 206:
            resp.read()
            raise RemoteError(f"{final}: HTTP {resp.status} {resp.reason} for a range request")
        body = resp.read()
        self.bytes_read += len(body)
        total = None
        content_range = resp.getheader("Content-Range") or ""
        if "/" in content_range and content_range.rsplit("/", 1)[1].strip().isdigit():
            total = int(content_range.rsplit("/", 1)[1])
        if len(body) != end - start:
            raise RemoteError(f"{final}: asked for {end - start} bytes at {start}, got {len(body)}")
        return body, total

    def download(self, url: str, out: BinaryIO, limit: int) -> int:
        """Stream the whole of `url` into `out` (at most `limit` bytes); the size written."""
        resp, final = self._open(url, {"Accept-Encoding": "identity"})
        if resp.status != 200:
            resp.read()
            raise RemoteError(f"{final}: HTTP {resp.status} {resp.reason}")
        written = 0
        while True:
            chunk = resp.read(1 << 20)
            if not chunk:
                break
            written += len(chunk)
            if written > limit:
                self._drop(*urlsplit(final)[:2])
                raise RemoteError(f"{final}: larger than {limit} bytes; refusing to download it whole")
            out.write(chunk)
        self.bytes_read += written
        return written

    def close(self) -> None:
        for key in list(self._conns):
            self._drop(*key)


