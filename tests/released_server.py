"""A real HTTP server on 127.0.0.1 for the released-file reader's tests: a PEP 691 JSON simple index
and the files it lists, with HTTP range support (206) or, when asked, without it (200, the whole file).
Every request is counted. Wheels are real zips built by the tests."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ELF_SO = b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x01\x02garbage\x00\xffCUDA error: no kernel image is available\x00\x00ab\x00sm_121a not supported by this build\x00" + bytes(range(256)) * 64


def build_wheel(folder: Path, name: str, version: str, members: dict[str, bytes], tag: str = "py3-none-any", zip64: bool = False,
                requires: tuple[str, ...] = ()) -> Path:
    """A real wheel: deflate-compressed members, a dist-info METADATA, optionally zip64 records."""
    path = folder / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            if zip64:
                with zf.open(zipfile.ZipInfo(member), "w", force_zip64=True) as out:
                    out.write(data)
            else:
                zf.writestr(member, data)
        info = f"{name.replace('-', '_')}-{version}.dist-info"
        requires_dist = "".join(f"Requires-Dist: {r}\n" for r in requires)
        meta = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires_dist}".encode(),
                f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: sparkdoctor-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()}
        for member, data in meta.items():
            zf.writestr(member, data)
        record = [f"{m},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
                  for m, d in {**members, **meta}.items()]
        zf.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def build_sdist(folder: Path, name: str, version: str, members: dict[str, bytes]) -> Path:
    """A real sdist: a gzipped tar whose members sit under NAME-VERSION/, with a PKG-INFO."""
    import io
    import tarfile

    top = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for member, data in {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(), **members}.items():
            info = tarfile.TarInfo(f"{top}/{member}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


class Registry:
    def __init__(self, ranges: bool = True):
        self.ranges = ranges
        self.projects: dict[str, list[Path]] = {}
        self.uploaded: dict[str, str] = {}  # file name -> PEP 700 upload-time, for the files given one
        self.yanked: dict[str, str] = {}  # file name -> PEP 592 yank reason, for the files yanked
        self.pages: dict[str, bytes] = {}  # project -> the raw JSON page to answer (a hostile index)
        self.log: list[tuple[str, str | None]] = []  # (path, Range header)
        self.sent = 0  # body bytes sent: what a client's bytes_read must come to
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def add(self, project: str, wheel: Path, uploaded: str | None = None, yanked: str | None = None) -> None:
        self.projects.setdefault(project, []).append(wheel)
        if uploaded is not None:
            self.uploaded[wheel.name] = uploaded
        if yanked is not None:
            self.yanked[wheel.name] = yanked

    def __enter__(self) -> Registry:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        registry = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                registry.log.append((self.path, self.headers.get("Range")))
                m = re.fullmatch(r"/simple/([^/]+)/", self.path)
                if m:
                    return self._index(m.group(1))
                m = re.fullmatch(r"/files/([^/]+)", self.path)
                wheel = next((w for ws in registry.projects.values() for w in ws if m and w.name == m.group(1)), None)
                if wheel is None:
                    return self._send(404, b"not found", "text/plain")
                data = wheel.read_bytes()
                rng = self.headers.get("Range")
                if rng and registry.ranges:
                    lo, hi = (int(x) for x in re.fullmatch(r"bytes=(\d+)-(\d+)", rng).groups())
                    hi = min(hi, len(data) - 1)
                    return self._send(206, data[lo : hi + 1], "application/octet-stream", {"Content-Range": f"bytes {lo}-{hi}/{len(data)}"})
                return self._send(200, data, "application/octet-stream")

            def _index(self, project: str) -> None:
                if project in registry.pages:
                    return self._send(200, registry.pages[project], "application/vnd.pypi.simple.v1+json")
                if project not in registry.projects:
                    return self._send(404, b"no such project", "text/plain")
                files = [{"filename": w.name, "url": f"../../files/{w.name}", "size": w.stat().st_size,
                          "hashes": {"sha256": hashlib.sha256(w.read_bytes()).hexdigest()},
                          **({"upload-time": registry.uploaded[w.name]} if w.name in registry.uploaded else {}),
                          **({"yanked": registry.yanked[w.name]} if w.name in registry.yanked else {})}
                         for w in registry.projects[project]]
                body = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}).encode()
                self._send(200, body, "application/vnd.pypi.simple.v1+json")

            def _send(self, status: int, body: bytes, kind: str, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                registry.sent += len(body)  # before the body goes out: a client that has it finds it counted
                self.end_headers()
                self.wfile.write(body)

        return Handler
