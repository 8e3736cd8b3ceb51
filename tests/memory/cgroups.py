"""A real memory cgroup with a limit (cgroup v2 memory.max, or v1 memory.limit_in_bytes where the v1 memory
controller is mounted, as on this project's test machine), for the OOM killer to act in. Needs root."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

V2, V1 = Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/memory")


def hierarchy() -> tuple[Path, str]:
    """(the folder new groups go in, "v1" | "v2"); AssertionError naming what is missing."""
    assert os.geteuid() == 0, "a memory cgroup with a limit needs root"
    if (V2 / "cgroup.controllers").exists() and "memory" in (V2 / "cgroup.subtree_control").read_text():
        return V2, "v2"
    if (V1 / "memory.limit_in_bytes").exists():
        return V1, "v1"
    raise AssertionError("no memory cgroup hierarchy (cgroup v2 with the memory controller, or v1's memory mount)")


@contextmanager
def limited(limit: int, name: str | None = None) -> Iterator[Path]:
    """A new memory cgroup limited to `limit` bytes (no swap), removed afterwards."""
    base, version = hierarchy()
    folder = base / (name or f"sparkdoctor-test-{uuid.uuid4().hex[:12]}")
    folder.mkdir(parents=True)
    try:
        if version == "v2":
            (folder / "memory.max").write_text(str(limit))
            if (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")
        else:
            (folder / "memory.limit_in_bytes").write_text(str(limit))
        yield folder
    finally:
        for pid in (folder / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        folder.rmdir()


def start_in(folder: Path, code: str) -> subprocess.Popen:
    """This interpreter running `code`, moved into the cgroup before it runs (so every byte it takes counts)."""
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: (folder / "cgroup.procs").write_text(str(os.getpid())))
