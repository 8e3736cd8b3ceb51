"""The kernel result cache under <cache>/kernels/: one JSON record (and the cubin, for a later GPU
run) per job key. An unreadable or foreign entry is recomputed; a read-only folder costs speed,
never a result. What goes into a key is decided by the callers (assemble.job_key, the GPU run)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path

from sparkdoctor.kernels.assemble import CACHE_VERSION


class Cache:
    def __init__(self, root: Path | None, read: bool) -> None:
        self.root, self.read = root, read

    def get(self, key: str, want_cubin: bool = False) -> tuple[dict[str, object], bytes | None] | None:
        if self.root is None or not self.read:
            return None
        try:
            data = json.loads((self.root / f"{key}.json").read_text(encoding="utf-8"))
            cubin = (self.root / f"{key}.cubin").read_bytes() if want_cubin and data.get("record", {}).get("compiled") else None
        except (OSError, ValueError, AttributeError):
            return None  # missing or corrupt: recompute
        if not isinstance(data, dict) or data.get("key") != key or data.get("v") != CACHE_VERSION or not isinstance(data.get("record"), dict):
            return None
        return data["record"], cubin

    def put(self, key: str, record: Mapping[str, object], cubin: bytes | None = None) -> None:
        if self.root is None:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if cubin is not None:
                _atomic_write(self.root / f"{key}.cubin", cubin)
            body = {"v": CACHE_VERSION, "key": key, "record": {k: v for k, v in record.items() if k != "cached"}}
            _atomic_write(self.root / f"{key}.json", json.dumps(body).encode())
        except OSError:
            pass  # a read-only cache costs speed, never a result


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
