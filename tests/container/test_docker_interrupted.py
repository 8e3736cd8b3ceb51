"""A test run interrupted with Ctrl-C must leave nothing of its dockerd: no daemon, containerd, shim, container
process or mount under the daemon's /tmp/sd-dockerd-* root, and no root. A teardown cut short (a second Ctrl-C
during it, or xdist killing a worker that did not stop within 10 s of being told to) left the shims, the containers'
processes and the mounts behind; the keeper (tests/container/daemon_keeper.py) now cleans up once the test process
ends, however it ends.

Each case runs a real pytest on tests/container/interrupted_session.py (the suite's own fixtures, its own dockerd on
its own root), waits for its readiness line on a FIFO, interrupts it, waits for the keeper to finish, and looks."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.container.daemon_keeper import clean_up

REPO = Path(__file__).resolve().parents[2]
SAFETY_S = 300  # a hang guard for each wait, never a verdict: each step takes seconds

# (workers, who gets Ctrl-C, a second Ctrl-C during the slow teardown)
CASES = {
    "twice-n0": (["-n", "0"], "main", True),
    "xdist-controller": (["-n", "1"], "main", False),  # xdist kills the worker 10 s into its teardown
    "twice-xdist-worker": (["-n", "1"], "worker", True),
}


class _Lines:
    """JSON lines from the session's FIFO; None once its writer is gone or the pytest ended without writing."""

    def __init__(self, fifo: Path, session: subprocess.Popen[bytes]):
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.ended = os.pidfd_open(session.pid)
        self.buffer = b""

    def next(self) -> dict[str, object] | None:
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd, self.ended], [], [], SAFETY_S)
            assert ready, f"no word from the interrupted session in {SAFETY_S} s"
            try:
                chunk: bytes | None = os.read(self.fd, 4096)
            except BlockingIOError:  # a writer, but nothing written yet
                chunk = None
            if chunk:
                self.buffer += chunk
            elif chunk == b"" and self.fd in ready or self.ended in ready:  # its writer gone, or the pytest ended
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        os.close(self.fd)
        os.close(self.ended)


def _cmdline(pid: int | str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _said(cmdline: bytes) -> str:
    return cmdline.replace(b"\0", b" ").decode(errors="replace").strip()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _leftovers(info: dict[str, object], container_cmd: bytes) -> dict[str, list[str]]:
    root = str(info["root"])
    container = int(str(info["container"]))
    found = {
        "processes": [f"{p.name} {_said(_cmdline(p.name))}" for p in Path("/proc").iterdir()
                      if p.name.isdigit() and _alive(int(p.name)) and root.encode() in _cmdline(p.name)],
        "container": [str(container)] if _alive(container) and _cmdline(container) == container_cmd else [],
        "mounts": [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                   if line.split()[1] == root or line.split()[1].startswith(root + "/")],
        "root": [root] if os.path.exists(root) else [],
    }
    return {kind: items for kind, items in found.items() if items}


def _sweep(info: dict[str, object], container_cmd: bytes) -> None:
    """What this test's own session left, gone (only its own root's: another run's dockerd is never touched)."""
    for kind, items in _leftovers(info, container_cmd).items():
        if kind in ("processes", "container"):
            for item in items:
                try:
                    os.kill(int(item.split()[0]), signal.SIGKILL)
                except OSError:
                    pass
    clean_up(Path(str(info["root"])), None)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_an_interrupted_run_leaves_no_daemon_shim_container_or_mount(case, tmp_path):
    workers, whom, twice = CASES[case]
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "pytest", *workers, "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "bt"), "-q", "-rs",
            "tests/container/interrupted_session.py"]
    out = tmp_path / "session.out"
    with open(out, "wb") as sink:
        session = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "SD_READY": str(fifo)}, stdout=sink,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    lines = _Lines(fifo, session)
    info: dict[str, object] | None = None
    container_cmd = b""
    try:
        info = lines.next()
        if info is None:
            session.wait(timeout=SAFETY_S)
            text = out.read_text(errors="replace")
            if "no container runtime can run here" in text:
                pytest.skip(text.strip().splitlines()[-1])
            raise AssertionError(f"the session never got its daemon up:\n{text[-3000:]}")
        container_cmd = _cmdline(int(str(info["container"])))
        assert container_cmd, "the container's process was not found"
        target = session.pid if whom == "main" else int(str(info["pid"]))
        os.kill(target, signal.SIGINT)
        said = lines.next()
        assert said is not None and "teardown" in said, f"the session did not reach its teardown: {said}"
        if twice:
            os.kill(target, signal.SIGINT)
        session.wait(timeout=SAFETY_S)
        if info.get("keeper"):
            try:
                keeper = os.pidfd_open(int(str(info["keeper"])))
            except ProcessLookupError:
                pass
            else:
                assert select.select([keeper], [], [], SAFETY_S)[0], f"the daemon's keeper did not finish in {SAFETY_S} s"
                os.close(keeper)
        left = _leftovers(info, container_cmd)
        assert not left, f"the interrupted run ({case}) left: {left}\n{out.read_text(errors='replace')[-2000:]}"
    finally:
        lines.close()
        if session.poll() is None:
            os.killpg(session.pid, signal.SIGKILL)
            session.wait()
        if info is not None:
            _sweep(info, container_cmd)
