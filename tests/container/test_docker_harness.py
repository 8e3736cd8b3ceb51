"""The suite's own dockerd must not outlive the worker that started it: a run stopped by SIGTERM to its process group
(a cancelled CI job, Ctrl-C) ended its workers before their session teardown ran, and every test dockerd, its
containerd and its containers stayed (CI-like run 23, docs/evidence/test-suite.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sparkdoctor import proc
from tests.keeper import alive

REPO = Path(__file__).resolve().parents[2]
WORKER = """
import os, signal
from tests.container.docker_daemon import short_root, start_daemon
daemon = start_daemon(short_root("sd-dockerd-"))
print(daemon.pid, daemon.root, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # a worker killed before any teardown
"""


def test_a_killed_worker_takes_its_dockerd_with_it():
    done = subprocess.run([sys.executable, "-c", WORKER], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL and done.stdout.strip(), done.stdout + done.stderr[-2000:]
    pid, root = done.stdout.split()
    pid_ = int(pid)
    try:
        for _ in range(240):  # until dockerd has shut down (a bound on polls, not a time verdict)
            if not alive(pid_):
                break
            time.sleep(0.25)
        assert not alive(pid_), "dockerd outlived the worker that started it"
    finally:
        if alive(pid_):
            os.kill(pid_, signal.SIGKILL)
        for line in reversed(Path("/proc/self/mounts").read_text().splitlines()):
            if line.split()[1].startswith(root):
                proc.run(["umount", "-l", line.split()[1]], timeout=20)
        subprocess.run(["rm", "-rf", root], timeout=120)


def test_a_daemon_killed_under_its_containers_leaves_none_running():
    """A dockerd SIGKILLed before it stopped its containers (by a test's stray group kill, the OOM killer) left their
    containerd shims and the containers' processes running after the session (3-9 `sleep infinity` per full run):
    stop() kills what is still served from the daemon's root."""
    from tests.container.docker_daemon import short_root, start_daemon

    daemon = start_daemon(short_root("sd-dockerd-"))
    try:
        image = daemon.import_skeleton("sparkdoctor-skeleton:harness")
        daemon.run_container("harness-c0", image, daemon.host_mounts())
        assert _served_from(daemon.root), "the container's shim was not found by the daemon's root"
        os.killpg(os.getpgid(daemon.pid), signal.SIGKILL)  # the daemon and its containerd, not the shims
        assert _served_from(daemon.root), "the shim went with the daemon: nothing here to clean up"
    finally:
        daemon.stop()
    assert _served_from(daemon.root) == []


def _served_from(root: Path) -> list[int]:
    """Live shims serving `root`'s containers, and their children."""
    shims = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and alive(int(p.name))
             and b"containerd-shim" in _cmdline(p) and str(root).encode() in _cmdline(p)]
    children = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and alive(int(p.name)) and _parent(p) in shims]
    return shims + children


def _cmdline(p: Path) -> bytes:
    try:
        return (p / "cmdline").read_bytes()
    except OSError:
        return b""


def _parent(p: Path) -> int:
    try:
        stat = (p / "stat").read_text()
    except OSError:
        return -1
    return int(stat[stat.rfind(")") + 2:].split()[1])
