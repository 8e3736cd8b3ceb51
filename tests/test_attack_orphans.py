"""The real CLI against a `--python` that starts a daemon (setsid, a double fork): it leaves the probe's process group,
and without a subreaper it went to init and outlived sparkdoctor. Now the entry point adopts it and stops it at exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# A wrapper that starts a daemon in a session of its own (double fork: the subshell, its parent, exits at once), notes
# its pid before it goes on, then runs the real interpreter. The daemon holds no pipe of the probe's (stdio to
# /dev/null). setsid, started by a process that leads no group, calls setsid() and execs sleep: $! is the sleep.
WRAPPER = """#!/bin/sh
( setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! >> {pids} )
exec {python} "$@"
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def daemon_python(tmp_path):
    pids = tmp_path / "pids"
    wrapper = tmp_path / "python"
    wrapper.write_text(WRAPPER.format(pids=pids, python=sys.executable))
    wrapper.chmod(0o755)
    yield wrapper, pids
    for line in (pids.read_text().split() if pids.exists() else []):  # never leave one behind, whatever the outcome
        try:
            os.kill(int(line), signal.SIGKILL)
        except OSError:
            pass


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARKDOCTOR_DEBUG", "FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
               SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"))
    return env


def test_a_daemon_a_probe_started_does_not_outlive_check(tmp_path, daemon_python):
    """`check --python W`, W a script that starts `setsid sleep 600` and runs python: the sleep was left running,
    re-parented to init, after check had exited 0."""
    wrapper, pids = daemon_python
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(wrapper), "--no-kernels",
                        "--format", "json"], env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    assert json.loads(p.stdout)["kind"] == "report"
    started = [int(x) for x in pids.read_text().split()]
    assert started, "the wrapper never ran"
    assert [pid for pid in started if _alive(pid)] == [], p.stderr


def test_a_child_the_caller_left_to_sparkdoctor_is_not_stopped(tmp_path):
    """A process sparkdoctor inherited (`sh -c 'sleep 600 & exec sparkdoctor ...'`: the sleep is the child of the
    process that becomes sparkdoctor) is not sparkdoctor's to stop."""
    script = f"sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {tmp_path}/pid; exec {sys.executable} -m sparkdoctor matrix list > /dev/null"
    p = subprocess.run(["sh", "-c", script], env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    pid = int((tmp_path / "pid").read_text())
    try:
        assert p.returncode == 0, p.stderr
        assert _alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
