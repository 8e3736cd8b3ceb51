"""The readiness GET is bounded as a whole: a server (or whatever took its port) that sends its answer a byte at
a time never holds the launch's wait past its timeout (before, each byte reset urllib's socket timeout, and the
wait never ended). A local server on 127.0.0.1 only; the verdict is whether the call came back at all, with a
generous safety net, never how fast."""

from __future__ import annotations

import http.server
import socket
import threading
import time

from sparkdoctor.serve import readiness


def _trickler(stop: threading.Event) -> tuple[socket.socket, threading.Thread]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)

    def serve() -> None:
        conns = []
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conns.append(conn)
            try:
                conn.recv(4096)
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
                    if stop.is_set():
                        break
                    conn.sendall(bytes([byte]))
                    time.sleep(0.05)
            except OSError:
                pass
        for conn in conns:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_a_server_that_trickles_its_answer_never_holds_the_readiness_wait():
    stop = threading.Event()
    listener, server = _trickler(stop)
    port = listener.getsockname()[1]
    got: list[str | None] = []
    asker = threading.Thread(target=lambda: got.append(readiness.ready(f"http://127.0.0.1:{port}", "/health", timeout=1.0)),
                             daemon=True)
    try:
        asker.start()
        asker.join(60)  # a safety net: the GET's own limit is 1 s
        assert not asker.is_alive(), "the readiness GET was still waiting on a server that trickles its answer"
        assert got == [None]
    finally:
        stop.set()
        server.join(10)
        listener.close()


def test_a_server_that_answers_200_is_ready_and_a_404_falls_back():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            self.send_response(200 if self.path == readiness.FALLBACK else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        # limits are wall-clock: a server that answers at once must not time out on a loaded machine
        assert readiness.status_of(base + "/health", 600.0) == 404
        assert readiness.ready(base, "/health", timeout=600.0) == readiness.FALLBACK
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_nothing_listening_is_not_ready():
    from tests.ports import refused_port

    with refused_port() as port:  # held, so no other worker's server can start answering there meanwhile
        assert readiness.ready(f"http://127.0.0.1:{port}", "/health", timeout=1.0) is None
