"""URLs sparkdoctor did not write, malformed: a registry's or a files host's redirect to `http://[::1/x` or to a
URL with a space, and the same in $SPARKDOCTOR_INDEX_URL. urllib's parser and http.client raised ValueError and
InvalidURL, which reached the command line as `internal error: ...`, exit 2. Now each is the reader's one line
naming the URL, as any other answer it cannot follow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BAD = ["http://[::1/x", "http://a b/x", "http://x:port/"]


@pytest.fixture
def redirect() -> Iterator[tuple[str, list[str]]]:
    """(base URL, [Location]) of a server on 127.0.0.1 that answers every GET with a 302 to the list's first entry."""
    where = ["/"]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(302)
            self.send_header("Location", where[0])
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", where
    finally:
        server.shutdown()
        server.server_close()


def _cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "SPARKDOCTOR_DEBUG"}
    full.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
                SPARKDOCTOR_DATA_DIR=str(tmp_path / "data"), **env)
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], env=full, capture_output=True, text=True, timeout=300)


def _one_line(p: subprocess.CompletedProcess[str], code: int = 2) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == code and len(lines) == 1 and "internal error" not in p.stderr, (p.returncode, p.stderr)
    return lines[0]


@pytest.mark.parametrize("location", BAD)
def test_a_matrix_tarball_redirected_to_a_malformed_url_is_one_line(tmp_path, redirect, location):
    base, where = redirect
    where[0] = location
    p = _cli(tmp_path, "matrix", "update", f"{base}/m.tar.gz", "--sha256", "a" * 64, "--format", "json")
    assert location.split("/")[2][:4] in _one_line(p), p.stderr
    assert json.loads(p.stdout)["exit_code"] == 2


@pytest.mark.parametrize("location", BAD)
def test_a_registry_redirected_to_a_malformed_url_is_one_line(tmp_path, redirect, location):
    base, where = redirect
    where[0] = location
    diff = tmp_path / "x.diff"
    diff.write_text("--- a/vllm/a.py\n+++ b/vllm/a.py\n@@ -1 +1 @@\n-x = 2\n+x = 3\n")
    p = _cli(tmp_path, "mods", "check", str(diff), "--release", "vllm==0.11.0", SPARKDOCTOR_INDEX_URL=f"{base}/simple/")
    assert _one_line(p).startswith("sparkdoctor: error: vllm==0.11.0: "), p.stderr


@pytest.mark.parametrize("index", BAD)
def test_a_malformed_index_url_in_the_environment_is_one_line(tmp_path, index):
    diff = tmp_path / "x.diff"
    diff.write_text("--- a/vllm/a.py\n+++ b/vllm/a.py\n@@ -1 +1 @@\n-x = 2\n+x = 3\n")
    p = _cli(tmp_path, "mods", "check", str(diff), "--release", "vllm==0.11.0", SPARKDOCTOR_INDEX_URL=index)
    assert _one_line(p).startswith("sparkdoctor: error: vllm==0.11.0: "), p.stderr
