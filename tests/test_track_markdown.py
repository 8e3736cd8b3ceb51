"""`matrix track --format markdown` is the daily job's pull request body: what a registry answers (its content type,
an error's URL or reason phrase) reaches its notes and whys, and must stay text in its own table cell."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from typer.testing import CliRunner

from sparkdoctor.cli import app
from tests.test_tracking import write_matrix

KIND = "text/html | x | <img src=https://evil.example/p.png> [update your token](https://evil.example/login)"


class _Index(BaseHTTPRequestHandler):
    """An index that answers every page with HTML under a hostile content type."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        body = b"<html></html>"
        self.send_response(200)
        self.send_header("Content-Type", KIND)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _cells(row: str) -> list[str]:
    return re.split(r"(?<!\\)\|", row)[1:-1]  # a cell's `\|` is its own text


def test_a_registrys_words_stay_text_in_their_cell(tmp_path, monkeypatch):
    """The content type was pasted as it came: its `|` split the note into three more columns, and its `<img>` and
    `[text](url)` rendered as an image and a link in the pull request."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("SPARKDOCTOR_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple/")
        monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "c"))
        res = CliRunner().invoke(app, ["matrix", "track", "--matrix", str(write_matrix(tmp_path, ">=0.2.0")), "-f", "markdown"])
    finally:
        server.shutdown()
        server.server_close()
    assert res.exit_code == 2
    [row] = [line for line in res.stdout.splitlines() if line.startswith("| demo |")]
    cells = _cells(row)
    assert len(cells) == 5, cells
    assert "the index answered text/html" in cells[4]
    assert "<img" not in row.replace("\\<", "") and "](" not in row.replace("\\](", "")
