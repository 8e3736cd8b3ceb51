"""A container stopped while a probe runs in it (`check --container NAME`, then `docker stop NAME`): the CLI exits 137
with no output, which read as "docker exited 137: no output". No daemon: a fake container CLI that runs `exec` on
this machine as tests/container/test_container_exec_bounded.py's does, and "stops the container" (SIGKILL to what the
exec started, exit 137, as dockerd does) once the file STOP exists; `inspect` answers whether it still runs."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

from sparkdoctor.targets.container import ContainerTarget
from sparkdoctor.targets.local import TargetError, parse_json_probe
from tests.container.test_container_exec_bounded import READ_EXEC, running

FAKE = f"""#!{sys.executable}
import os, subprocess, sys, time
stop = os.path.join(os.path.dirname(os.path.abspath(__file__)), "STOP")
args = sys.argv[1:]
if args[:1] == ["inspect"]:
    print("true" if os.environ.get("FAKE_STILL_RUNNING") or not os.path.exists(stop) else "false")
    sys.exit(0)
{READ_EXEC}child = subprocess.Popen(args[1:], env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, start_new_session=True)
if stdin:
    child.stdin.write(sys.stdin.buffer.read())
    child.stdin.close()
for _ in range(6000):
    if child.poll() is not None:
        sys.exit(child.returncode)
    if os.path.exists(stop):
        os.killpg(child.pid, 9)
        sys.exit(137)
    time.sleep(0.05)
"""


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    cli = tmp_path / "docker"
    cli.write_text(FAKE)
    cli.chmod(0o755)
    return cli


def _probe(tmp_path: Path, runtime: Path) -> tuple[ContainerTarget, Path, str]:
    """A probe that, once started, has the container stopped under it (the STOP file), then waits."""
    token = str(3000 + secrets.randbelow(10**6))
    script = tmp_path / "probe.py"
    script.write_text(f"import sys, time\nopen({str(runtime.parent / 'STOP')!r}, 'w').close()\ntime.sleep(int(sys.argv[1]))\n")
    return ContainerTarget([str(runtime)], "vllm-c", sys.executable, "--container-python"), script, token


def test_a_container_stopped_mid_probe_is_said_in_plain_words(tmp_path, runtime):
    target, script, token = _probe(tmp_path, runtime)
    try:
        res = target.run_script(script, [token], timeout=60)
        with pytest.raises(TargetError) as caught:
            parse_json_probe(target, script, res)
    finally:
        for pid in running(token):
            os.kill(pid, 9)
    said = str(caught.value)
    assert "the container vllm-c stopped while it was being probed (docker exec exited 137; it is not running now)" in said
    assert "no output" not in said, said


def test_a_probe_killed_in_a_container_that_still_runs_keeps_its_exit(tmp_path, runtime, monkeypatch):
    """The runtime says the container runs: the process was killed inside it (the OOM killer), not the container."""
    monkeypatch.setenv("FAKE_STILL_RUNNING", "1")
    target, script, token = _probe(tmp_path, runtime)
    try:
        res = target.run_script(script, [token], timeout=60)
    finally:
        for pid in running(token):
            os.kill(pid, 9)
    assert res.returncode == 137 and res.describe_failure() == "docker exited 137: no output"
