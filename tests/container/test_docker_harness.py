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

REPO = Path(__file__).resolve().parents[2]
WORKER = """
import os, signal
from tests.container.docker_daemon import short_root, start_daemon
daemon = start_daemon(short_root("sd-dockerd-"))
print(daemon.popen_running.popen.pid, daemon.root, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # a worker killed before any teardown
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_killed_worker_takes_its_dockerd_with_it():
    done = subprocess.run([sys.executable, "-c", WORKER], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL and done.stdout.strip(), done.stdout + done.stderr[-2000:]
    pid, root = done.stdout.split()
    pid_ = int(pid)
    try:
        for _ in range(240):  # until dockerd has shut down (a bound on polls, not a time verdict)
            if not _alive(pid_):
                break
            time.sleep(0.25)
        assert not _alive(pid_), "dockerd outlived the worker that started it"
    finally:
        if _alive(pid_):
            os.kill(pid_, signal.SIGKILL)
        for line in reversed(Path("/proc/self/mounts").read_text().splitlines()):
            if line.split()[1].startswith(root):
                proc.run(["umount", "-l", line.split()[1]], timeout=20)
        subprocess.run(["rm", "-rf", root], timeout=120)
