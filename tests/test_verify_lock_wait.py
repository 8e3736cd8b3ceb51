"""`matrix verify` beside another verify that holds a scratch venv's or a downloaded wheel's lock and does not go on
(stopped with Ctrl-Z): it waited without a limit, saying nothing. It now waits as every writer waits, up to
$SPARKDOCTOR_LOCK_WAIT seconds (said once), then one line naming the holder, exit 2. The holder is a real process
holding a real flock; the wait is set to 0 s, so no test waits on a clock."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkdoctor.files import LockedError
from sparkdoctor.matrix.verify_table import Env
from sparkdoctor.verify import venvs, wheels
from tests.test_matrix_files import FILES, make_wheel, matrix_file

HOLD = "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)"


@pytest.fixture
def hold() -> Iterator:
    held: list[subprocess.Popen] = []

    def start(path: Path) -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
        held.append(holder)
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        return holder.pid

    yield start
    for holder in held:
        holder.kill()
        holder.wait()


def test_a_held_scratch_venv_is_waited_for_then_one_line(tmp_path, monkeypatch, hold):
    monkeypatch.setenv("SPARKDOCTOR_LOCK_WAIT", "0")
    env = Env((("nvidia-cutlass-dsl==4.4.2",),), "")
    venv = venvs.venv_path(tmp_path, env)
    pid = hold(tmp_path / f"{venv.name}.lock")
    with pytest.raises(LockedError) as caught:
        venvs.ensure_venv(tmp_path, env)
    message = str(caught.value)
    assert message.startswith(f"matrix verify: {venv} is locked by pid {pid} ("), message
    assert "$SPARKDOCTOR_LOCK_WAIT" in message and "\n" not in message
    assert not venv.exists()  # nothing was built under the other run's lock


def test_a_held_wheel_is_waited_for_then_one_line_and_exit_2_from_the_command_line(tmp_path, hold):
    root = tmp_path / "wheels"
    for version in ("1.0", "2.0"):
        make_wheel(root, "demo-pkg", version, {"demo/envs.py": "OLD_SWITCH = 1", "demo/errors.py": "cannot start"})
    pid = hold(root / ".demo-pkg-1.0.lock")
    path = matrix_file(tmp_path, FILES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKDOCTOR_")}
    env.update(SPARKDOCTOR_WHEELS=str(root), SPARKDOCTOR_LOCK_WAIT="0", SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--kind", "files", "--matrix", str(path)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"sparkdoctor: error: matrix verify: {root} is locked by pid {pid} ("), done.stderr


def test_a_wheel_nobody_holds_is_read_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_LOCK_WAIT", "0")
    root = tmp_path / "wheels"
    made = make_wheel(root, "demo-pkg", "1.0", {"demo/envs.py": "x"})
    assert wheels.wheel("demo-pkg", "1.0", root) == made


def test_unset_the_wait_is_the_holders_own_limit(tmp_path, monkeypatch, hold):
    """A verify beside another one downloading or building waits as long as that work may take (its own limits),
    not the 60 s of other writers: a cold build takes minutes, and the second run must not fail beside it. The
    clock is simulated (each poll moves it 30 s), so no test waits on one."""
    from sparkdoctor import files

    monkeypatch.delenv("SPARKDOCTOR_LOCK_WAIT", raising=False)
    clock = [0.0]
    monkeypatch.setattr(files.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(files.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + 30))
    root = tmp_path / "wheels"
    hold(root / ".demo-pkg-1.0.lock")
    with pytest.raises(LockedError):
        wheels.wheel("demo-pkg", "1.0", root)
    assert wheels.DOWNLOAD_TIMEOUT <= clock[0] < wheels.DOWNLOAD_TIMEOUT + 60
    env = Env((("a==1",), ("b==2",)), "")
    venv = venvs.venv_path(tmp_path, env)
    hold(tmp_path / f"{venv.name}.lock")
    clock[0] = 0.0
    with pytest.raises(LockedError):
        venvs.ensure_venv(tmp_path, env)
    limit = venvs.VENV_TIMEOUT + 2 * venvs.PIP_TIMEOUT
    assert limit <= clock[0] < limit + 60
