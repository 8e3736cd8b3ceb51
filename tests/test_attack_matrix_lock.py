"""`matrix update` beside another one that holds the matrix folder's lock and does not let go (stopped with Ctrl-Z,
hung): the second waited on flock for ever, with nothing said and no way for --timeout or a deadline to end it.
Now it waits as every other writer of sparkdoctor's folders does, $SPARKDOCTOR_LOCK_WAIT seconds, saying whom it
waits for, then one line naming the holder, exit 2, nothing written."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("args", [("--rollback",), ("TARBALL", "--sha256", "DIGEST")])
def test_an_update_behind_a_held_lock_is_one_line_not_a_wait_for_ever(tmp_path, args):
    data = tmp_path / "data"
    tarball = tmp_path / "m.tar.gz"
    subprocess.run(["tar", "czf", str(tarball), "-C", str(REPO), "matrix"], check=True, timeout=60)
    digest = __import__("hashlib").sha256(tarball.read_bytes()).hexdigest()
    argv = [str(tarball) if a == "TARBALL" else digest if a == "DIGEST" else a for a in args]
    root = data / "matrix"
    root.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "SPARKDOCTOR_DEBUG"}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_DATA_DIR=str(data), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"),
               SPARKDOCTOR_LOCK_WAIT="1")
    with open(root / ".lock", "a") as held:  # another update, holding it
        fcntl.flock(held, fcntl.LOCK_EX)
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "update", *argv, "--format", "json"], env=env,
                           capture_output=True, text=True, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert lines[-1].startswith(f"sparkdoctor: error: matrix update: {root} is locked by pid {os.getpid()} "), lines
    assert lines[-1].endswith("still running after 1 s ($SPARKDOCTOR_LOCK_WAIT); nothing was written"), lines
    assert json.loads(p.stdout)["exit_code"] == 2
    assert not (root / "current").exists()


def test_the_waiting_line_escapes_the_holders_command_line(tmp_path):
    """The holder's command line (from /proc) went to stderr raw in the `waiting for` line: its line breaks split it,
    an ESC in it drove the terminal. The error line after it was escaped; now both are."""
    root = tmp_path / "data" / "matrix"
    root.mkdir(parents=True)
    code = "import fcntl, sys, time\n# \x1b[2J\nf = open(sys.argv[1], 'a'); fcntl.flock(f, 2); print('held', flush=True); time.sleep(120)"
    holder = subprocess.Popen([sys.executable, "-c", code, str(root / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        env = {k: v for k, v in os.environ.items() if k != "SPARKDOCTOR_DEBUG"}
        env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_DATA_DIR=str(tmp_path / "data"), SPARKDOCTOR_LOCK_WAIT="1")
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "update", "--rollback"], env=env,
                           capture_output=True, text=True, timeout=120)
    finally:
        holder.kill()
        holder.wait()
    lines = p.stderr.splitlines()
    assert p.returncode == 2 and len(lines) == 2, p.stderr
    assert lines[0].startswith(f"sparkdoctor: matrix update: waiting for pid {holder.pid} "), lines
    assert all(ln.isprintable() for ln in lines) and "\\x1b[2J" in lines[0], lines
