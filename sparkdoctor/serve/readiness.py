"""Is the server ready? GET its readiness path (default /health), else /v1/models: the first answer 200
means ready. Standard library only: it runs every half second while a server starts and must not need
the bench's HTTP client.

Each GET is bounded as a whole, not per read: a socket timeout alone lets a server (or whatever took its port)
that sends its answer a byte at a time hold the wait forever, past the launch's ready timeout and the run's
limit. A timer shuts the socket down when the GET's time is up, which ends any read blocked on it. The GET goes
straight to the address, never through a proxy that the environment names."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.parse

FALLBACK = "/v1/models"
MAX_BODY = 65536  # what is read of an answer's body, so the server sees its answer taken


def status_of(url: str, timeout: float) -> int | None:
    """The HTTP status of GET url, or None when nothing answered within `timeout` seconds in all (refused, reset,
    timed out, too slow)."""
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            return None
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
        path = parts.path or "/"
        target = f"{path}?{parts.query}" if parts.query else path
    except ValueError:
        return None
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a recv blocked on it; close() alone would not

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        conn.request("GET", target, headers={"User-Agent": "sparkdoctor-readiness"})
        response = conn.getresponse()
        response.read(MAX_BODY)
        return None if expired.is_set() else response.status
    except (http.client.HTTPException, OSError, ValueError):
        return None
    finally:
        timer.cancel()
        conn.close()


def ready(base_url: str, path: str, timeout: float = 2.0) -> str | None:
    """The path that answered 200 (the recipe's, else /v1/models), or None when the server is not ready."""
    for candidate in dict.fromkeys((path, FALLBACK)):
        status = status_of(base_url + candidate, timeout)
        if status == 200:
            return candidate
        if status is None:
            return None  # nothing listens yet: the fallback would not answer either
    return None
