"""A hostile package index aimed at what `matrix verify` has pip do: a wheel whose body never ends (pip download, the
scratch installs, the stacks' dry run) and an index page that never ends (the released-version list). Each is stopped
at a bound on what pip may write or hold, in one line; each test failed on the code before its fix."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sparkdoctor.verify import venvs, wheels
from tests.test_matrix_files import make_wheel


class EndlessIndex:
    """A simple index on 127.0.0.1 whose one wheel link answers with an endless body (about 20 MB/s)."""

    def __init__(self) -> None:
        wheel_name = "demo_pkg-1.0-py3-none-any.whl"
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.startswith("/simple/"):
                    body = f'<html><body><a href="/files/{wheel_name}">{wheel_name}</a></body></html>'.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                with contextlib.suppress(OSError):
                    while not outer.stopping.is_set():
                        self.wfile.write(b"\0" * (1 << 20))
                        time.sleep(0.05)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_wheel_download_that_never_ends_is_stopped_at_the_byte_limit_and_leaves_nothing(
    tmp_path, monkeypatch
):
    """`pip download` had a time limit (900 s) and no byte cap: an index answering with an endless wheel wrote
    115 MB/s into /tmp/pip-unpack-* until then (~100 GB). Now every file pip writes stops at venvs.FILE_LIMIT
    (made 4 MiB here; the time limit 60 s so the code before the fix fails instead of filling the disk), and pip's
    temporary files live in a folder beside the wheels that is removed."""
    index = EndlessIndex()
    try:
        for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
        (tmp_path / "tmp").mkdir()
        monkeypatch.setattr(venvs, "FILE_LIMIT", 4 * 1024 * 1024)
        monkeypatch.setattr(wheels, "DOWNLOAD_TIMEOUT", 60.0)
        with pytest.raises(wheels.WheelError) as caught:
            wheels.wheel("demo-pkg", "1.0", tmp_path / "wheels")
    finally:
        index.close()
    assert str(caught.value) == (
        "pip download demo-pkg==1.0 failed: pip wrote a file past 4,194,304 bytes and was stopped "
        "(no released wheel file is that large: the index's answer is not one)"
    )
    assert [p.name for p in (tmp_path / "wheels").iterdir()] == [".demo-pkg-1.0.lock"]
    assert not list((tmp_path / "tmp").iterdir())


def test_a_scratch_install_still_installs_through_the_bounded_pip(tmp_path):
    """The bound is on each file pip writes, through `python -c` (sparkdoctor's pip installing with --python)."""
    wheel_file = make_wheel(
        tmp_path / "w",
        "demo-pkg",
        "1.0",
        {
            "demo/__init__.py": "X = 1\n",
            "demo_pkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        },
    )
    venv = tmp_path / "venv"
    assert (
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120
        ).returncode
        == 0
    )
    argv = venvs.pip_install(venv / "bin" / "python", ("--no-index", str(wheel_file)))
    done = venvs.run_pip(argv, 300.0, tmp_path)
    assert done.ok, done.stderr
    assert (
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import demo; assert demo.X == 1"],
            timeout=60,
        ).returncode
        == 0
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["venv", "w"]


class EndlessPage(EndlessIndex):
    """An index whose every page is an endless list of links (about 50 MB/s)."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Connection", "close")
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(b"<html><body>")
                    while not outer.stopping.is_set():
                        self.wfile.write(b"<a href='x'>x</a>" * 60000)
                        time.sleep(0.02)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_a_version_list_page_that_never_ends_is_stopped_at_the_memory_limit(
    monkeypatch,
):
    """`pip index versions` (the released versions for --bisect, --latest and `also` wheels) holds the page whole: an
    endless one grew pip by 130 MB/s until the 120 s limit (~16 GB). Now its address space stops at INDEX_MEMORY
    (made 512 MiB here; the time limit 30 s so the code before the fix fails by it instead)."""
    page = EndlessPage()
    try:
        for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("PIP_INDEX_URL", page.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        monkeypatch.setattr(wheels, "INDEX_MEMORY", 512 * 1024 * 1024)
        monkeypatch.setattr(wheels, "INDEX_TIMEOUT", 30.0)
        with pytest.raises(wheels.WheelError) as caught:
            wheels.released_versions("endless-page-demo")
    finally:
        page.close()
    assert str(caught.value) == (
        "pip index versions endless-page-demo failed: pip ran out of the memory it may use and was stopped "
        "(an index page that large is not one)"
    )


def test_a_stack_resolve_whose_wheel_never_ends_is_stopped_at_the_byte_limit(
    tmp_path, monkeypatch
):
    """`matrix verify --stacks`: pip's dry run downloads a wheel whose metadata the index does not serve apart; an
    endless one was written into /tmp until the 600 s limit. Now the same FILE_LIMIT, in the run's own folder."""
    from sparkdoctor.verify import stacks
    from tests.test_stacks_resolve import stack

    index = EndlessIndex()
    try:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
        monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
        (tmp_path / "tmp").mkdir()
        monkeypatch.setattr(venvs, "FILE_LIMIT", 4 * 1024 * 1024)
        monkeypatch.setattr(stacks, "RESOLVE_TIMEOUT", 60.0)
        result = stacks.resolve(stack(tmp_path, packages='"demo-pkg" = "==1.0"'))
    finally:
        index.close()
    assert result.verdict == "error"
    assert result.why.startswith(
        "pip wrote a file past 4,194,304 bytes and was stopped"
    ), result.why
    assert not list((tmp_path / "tmp").iterdir())
