"""`matrix verify --kind files` reads a files table's `also` wheels at every version the table names, a pre-release
too. Against a real folder of real wheels served by http.server on 127.0.0.1 (a PEP 503 index pip reads), through
the real CLI and pip."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.released_server import build_wheel
from tests.test_matrix_files import matrix_file


def serve_folder(root: Path) -> ThreadingHTTPServer:
    """`root` (simple/<project>/index.html beside its wheels) served on 127.0.0.1, quietly."""
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def simple_index(root: Path, wheels: dict[str, list[tuple[str, dict[str, bytes]]]]) -> Path:
    """A PEP 503 simple index on disk: each project's real wheels and the page that links them."""
    for project, releases in wheels.items():
        folder = root / "simple" / project
        folder.mkdir(parents=True)
        built = [build_wheel(folder, project, version, members) for version, members in releases]
        (folder / "index.html").write_text("<html><body>" + "".join(f'<a href="{w.name}">{w.name}</a>' for w in built) + "</body></html>")
    return root


def pip_env(tmp_path: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": url, "PIP_NO_CACHE_DIR": "1",
            "SPARKDOCTOR_WHEELS": str(tmp_path / "wheels"), "SPARKDOCTOR_INDEX_URL": url}


ALSO_PRE = """
evidence = "checked"
files.package = "demo-pkg"
files.also = ["demo-core"]
files.affected = ["2.0rc1"]
files.fixed = ["1.0"]
files.checks = [{ path = "demo/*.py", contains = "OLD_SWITCH" }]
last_verified = { date = "2026-12-02", versions = "demo-pkg 1.0 / 2.0rc1" }
"""


def test_an_also_wheel_released_as_a_pre_release_is_read_by_verify_files(tmp_path):
    """A files table naming 2.0rc1, whose Python package ships in the `also` wheel demo-core 2.0rc1: the `also`
    wheels were looked up among final releases only (`pip index versions` without --pre), so demo-core 2.0rc1 was
    never read, the check's file looked absent, and a true entry was reported CONTRADICTED."""
    root = simple_index(tmp_path / "index", {
        "demo-pkg": [("1.0", {"demo_stub.txt": b""}), ("2.0rc1", {"demo_stub.txt": b""})],
        "demo-core": [("1.0", {"demo/x.py": b"NEW = 1\n"}), ("2.0rc1", {"demo/x.py": b"OLD_SWITCH = 1\n"})],
    })
    path = matrix_file(tmp_path, ALSO_PRE, when='when.packages = { "demo-pkg" = ">=2.0rc1" }')
    httpd = serve_folder(root)
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/simple/"
        run = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--kind", "files", "--matrix", str(path.parent),
                              "-f", "json"], capture_output=True, text=True, timeout=300, env=pip_env(tmp_path, url))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert run.returncode == 0, run.stderr
    [result] = json.loads(run.stdout)["results"]
    assert result["verdict"] == "confirmed", result
    affected = next(r for r in result["runs"] if r["role"] == "affected")
    assert affected["version"] == "2.0rc1" and [c["holds"] for c in affected["checks"]] == [True], affected
