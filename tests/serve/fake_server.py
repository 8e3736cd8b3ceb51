"""A stand-in server process for the launcher's fast tests (run as a script, standard library only).

    fake_server.py MODE [--host H] [--port P]

MODE: `ready`     serve GET /health and /v1/models with 200 (after printing a line);
      `models`    serve only /v1/models (GET /health is 404), as servers without /health do;
      `never`     print a line, start a child that ignores SIGTERM, and never listen;
      `symptom`   print a coloured log line holding a known symptom, then exit 3.
FAKE_SERVER_HOLD_MIB=N in the environment: the server (not its worker child) takes N MiB, written so resident,
before it listens. FAKE_SERVER_IPC=1: first it binds a unix socket as vLLM does (VLLM_RPC_BASE_PATH/<uuid4>, the temp
folder by default; vLLM never removes them) and prints its path. FAKE_SERVER_SIDE_PORT=N: the worker child listens on
127.0.0.1:N too, before the server answers (FAKE_SERVER_SIDE_SETSID=1: in a session of its own).
"""

import http.server
import os
import signal
import sys
import time


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


mode = sys.argv[1]
host, port = arg("--host", "127.0.0.1"), int(arg("--port", "0"))
# `symptom` writes every line to stderr, so their order in the log is the order printed.
print(f"fake server {mode} starting on {host}:{port}", file=sys.stderr if mode == "symptom" else sys.stdout, flush=True)
if os.environ.get("FAKE_SERVER_IPC") == "1":
    import socket
    import tempfile
    import uuid

    ipc = socket.socket(socket.AF_UNIX)
    ipc.bind(os.path.join(os.environ.get("VLLM_RPC_BASE_PATH", tempfile.gettempdir()), str(uuid.uuid4())))
    print(f"fake server ipc {ipc.getsockname()}", flush=True)

if mode == "never":
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
        os._exit(0)
    time.sleep(600)
elif mode == "symptom":
    print("\x1b[1;31mERROR\x1b[0m 11-22 [core.py:1] RuntimeError: FAKE-SYMPTOM-42 happened here", file=sys.stderr, flush=True)
    print("fake server giving up", file=sys.stderr, flush=True)
    sys.exit(3)
else:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.path == "/v1/models" or (self.path == "/health" and mode == "ready")
            body = b'{"data":[{"id":"fake"}]}' if ok else b"not found"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            print("request " + fmt % args, flush=True)

    side = int(os.environ.get("FAKE_SERVER_SIDE_PORT", "0"))
    told, tell = os.pipe()
    if os.fork() == 0:  # a worker child, as vLLM has: it must go down with the group
        if os.environ.get("FAKE_SERVER_SIDE_SETSID") == "1":
            os.setsid()  # out of the server's process group, as a daemon it starts would be
        if side:  # a port of its own beside the served one, on 127.0.0.1, as vLLM's engine core opens several
            import socket

            listener = socket.socket()
            listener.bind(("127.0.0.1", side))
            listener.listen(1)
        os.write(tell, b"1")
        time.sleep(600)
        os._exit(0)
    os.read(told, 1)  # the side port listens before the served one answers
    held = b"\x01" * (int(os.environ.get("FAKE_SERVER_HOLD_MIB", "0")) * 2**20)
    http.server.ThreadingHTTPServer((host, port), Handler).serve_forever()
