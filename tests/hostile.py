"""Hostile material for the attack tests: a guard that turns a hang into a failure, and an HTTP server on
127.0.0.1 whose answers are endless, trickled or redirected with endless bodies.

The server sends its endless bodies at a bounded rate (about 12 MB/s), so a reader without a byte cap
fails the test by the guard, not by filling the machine's memory first.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Hung(Exception):
    """What hang_guard raises when the code under test is still running at its limit."""


@contextlib.contextmanager
def hang_guard(seconds: float) -> Iterator[None]:
    """Fail with Hung when the block runs longer than `seconds` (a hang, a read that never ends)."""

    def fire(signum, frame):
        raise Hung(f"still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class HostileServer:
    """Routes: /endless (200, no length, never ends), /lying (200, Content-Length 1 TB), /missing (404 with an
    endless body), /moved (302 to `redirect_to` with an endless body), /trickle (200, one byte a tenth of a
    second, forever), /slow-headers (a status line, then a header a byte a tenth of a second, forever),
    /file/<name> (the bytes put in `files`)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.redirect_to = "/file/ok"
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def endless(self, pause: float = 0.005, chunk: bytes = b"\0" * 65536) -> None:
                try:
                    while not outer.stopping.is_set():
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        time.sleep(pause)
                except OSError:  # the reader went away: what a bounded reader does
                    pass
                self.close_connection = True

            def do_GET(self):
                path = self.path.split("?")[0]
                if path.startswith("/file/") and path[6:] in outer.files:
                    body = outer.files[path[6:]]
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if path == "/slow-headers":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                    self.endless(pause=0.1, chunk=b"x")
                    return
                status = {"/missing": 404, "/moved": 302}.get(path, 200)
                self.send_response(status)
                if status == 302:
                    self.send_header("Location", outer.redirect_to)
                if path == "/lying":
                    self.send_header("Content-Length", str(10**12))
                self.send_header("Connection", "close")
                self.end_headers()
                if path == "/trickle":
                    self.endless(pause=0.1, chunk=b"x")
                else:
                    self.endless()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
