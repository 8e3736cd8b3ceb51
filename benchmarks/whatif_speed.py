#!/usr/bin/env python3
"""What does a one-package what-if cost, cold and warm? (issue 24 item 6; docs/evidence/whatif-speed.md)

Times the what-if pipeline (sparkdoctor/whatif/: today's Facts as `check --no-kernels`, pip's dry-run
resolution, the hypothetical Facts read from the released files, the matrix diff) against a real target:

    python benchmarks/whatif_speed.py --python /path/to/venv/bin/python --spec vllm==0.33.0 [--no-deps] [--runs 3]

cold: an empty pip cache (`--cache-dir` a fresh folder) and an empty released-file cache (Reader root a fresh
folder); warm: the same folders again, filled by the cold run. Bytes: the released-file reader's own count
(HTTP bodies received), and the installer's (pip, or uv for a uv venv; both with a fresh cache folder), counted by a CONNECT proxy on 127.0.0.1 it is pointed at
(HTTPS_PROXY): every byte received through its TLS tunnels (index pages, PEP 658 metadata files, TLS). Today's Facts are
collected once, outside the timing (what `check` costs is docs/evidence/check-speed.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


class CountingProxy:
    """A CONNECT-only HTTP proxy on 127.0.0.1 that counts the bytes it relays back to its client."""

    def __init__(self) -> None:
        import socket
        import threading

        self.received = 0
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while True:
            client, _ = self.server.accept()
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client) -> None:
        import socket
        import threading

        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                return client.close()
            head += chunk
        host, _, port = head.split()[1].decode().partition(":")
        upstream = socket.create_connection((host, int(port or 443)), timeout=60)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pump(src, dst, count: bool) -> None:
            try:
                while data := src.recv(65536):
                    if count:
                        with self.lock:
                            self.received += len(data)
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(client, upstream, False), daemon=True).start()
        pump(upstream, client, True)


def one(python: str, specs: list[str], today, no_deps: bool, pip_cache: Path, root: Path, proxy: CountingProxy) -> dict:
    from sparkdoctor.matrix import load
    from sparkdoctor.released import Reader
    from sparkdoctor.targets.local import resolve_python_target
    from sparkdoctor.whatif.hypothetical import hypothetical_facts
    from sparkdoctor.whatif.judge import compare
    from sparkdoctor.whatif.resolve import resolve_upgrade

    os.environ["PIP_CACHE_DIR"] = str(pip_cache)
    os.environ["UV_CACHE_DIR"] = str(pip_cache / "uv")
    os.environ["HTTPS_PROXY"] = f"http://127.0.0.1:{proxy.port}"
    before = proxy.received
    t0 = time.perf_counter()
    changes = resolve_upgrade(resolve_python_target(python), python, specs, today, no_deps=no_deps)
    t1 = time.perf_counter()
    os.environ.pop("HTTPS_PROXY")  # the reader counts its own bytes
    pip_bytes = proxy.received - before
    machine = str((today.host or {}).get("machine") or "aarch64")
    py = ".".join(str((today.target or {}).get("version") or "3.12").split(".")[:2])
    reader = Reader("linux-x86_64" if machine == "x86_64" else "linux-aarch64", py, root=root)
    notes: list[str] = []
    try:
        predicted = hypothetical_facts(today, changes, reader, notes)
        result = compare(today, predicted, load(), specs, changes, notes)
        requests, read = reader.client.requests, reader.client.bytes_read
    finally:
        reader.close()
    t2 = time.perf_counter()
    return {"resolve_s": t1 - t0, "read_judge_s": t2 - t1, "total_s": t2 - t0, "pip_bytes": pip_bytes,
            "reader_requests": requests, "reader_bytes": read, "changes": len(changes), "introduced": len(result.introduced),
            "fixed": len(result.fixed)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--spec", action="append", required=True)
    ap.add_argument("--no-deps", action="store_true", help="the target is a --no-deps file set: resolve it that way")
    ap.add_argument("--runs", type=int, default=1, help="cold+warm pairs")
    args = ap.parse_args()
    from sparkdoctor.check import CheckRequest, collect
    from sparkdoctor.targets.local import resolve_python_target

    today = collect(CheckRequest(target=resolve_python_target(args.python), arch="sm_121a", kernels=False))
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    print("| run | cache | resolve | read + judge | total | installer bytes | reader requests | reader bytes | changes |")
    print("|---|---|---|---|---|---|---|---|---|")
    proxy = CountingProxy()
    for i in range(args.runs):
        tmp = Path(tempfile.mkdtemp(prefix="whatif-speed-"))
        try:
            for label in ("cold", "warm"):
                r = one(args.python, args.spec, today, args.no_deps, tmp / "pip", tmp / "released", proxy)
                print(f"| {i + 1} | {label} | {r['resolve_s']:.1f} s | {r['read_judge_s']:.1f} s | {r['total_s']:.1f} s | "
                      f"{r['pip_bytes'] / 1e6:.2f} MB | {r['reader_requests']} | {r['reader_bytes'] / 1e6:.2f} MB | {r['changes']} |", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average after: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
