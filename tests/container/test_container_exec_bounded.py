"""An exec in a container that runs out of time leaves nothing running there: `docker exec` passes no end on (killing
the CLI leaves what it started in the container), and an interpreter that hangs before it reads the probe's bootstrap
never reaches the bootstrap's own deadline. No daemon: a fake container CLI that runs `exec` on this machine in a
session of its own, relaying its pipes, as dockerd does (what it started outlives the CLI); `FAKE_NO_SH=1` makes it an
image without sh. The real runtime's case is in test_container_target.py."""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor.fleet import on_node
from sparkdoctor.targets import container, container_reap
from sparkdoctor.targets.container import ContainerTarget
from sparkdoctor.targets.container_inspect import find_python
from sparkdoctor.targets.local import TargetError

# a fake docker exec's reading of its arguments (-i, -e KEY=VALUE ..., the container, the command)
READ_EXEC = '''if args[:1] != ["exec"]:
    sys.exit(2)
# the container's /tmp is this fake's own folder: what a probe killed with its container leaves goes with the test
args, env, stdin = args[1:], dict(os.environ, TMPDIR=os.path.dirname(os.path.abspath(__file__))), False
while args[0].startswith("-"):
    if args[0] == "-i":
        stdin, args = True, args[1:]
    else:
        key, _, value = args[1].partition("=")
        env[key], args = value, args[2:]
'''

FAKE = f"""#!{sys.executable}
import os, subprocess, sys, threading
args = sys.argv[1:]
{READ_EXEC}if os.environ.get("FAKE_NO_SH") and args[1] == "sh":
    sys.stderr.write('OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": '
                     'executable file not found in $PATH: unknown\\n')
    sys.exit(127)
child = subprocess.Popen(args[1:], env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
def relay(src, dst):
    for chunk in iter(lambda: os.read(src.fileno(), 65536), b""):
        os.write(dst, chunk)
for src, dst in ((child.stdout, 1), (child.stderr, 2)):
    threading.Thread(target=relay, args=(src, dst), daemon=True).start()
if stdin:
    for chunk in iter(lambda: os.read(0, 65536), b""):
        child.stdin.write(chunk)
    child.stdin.close()
sys.exit(child.wait())
"""


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    cli = tmp_path / "docker"
    cli.write_text(FAKE)
    cli.chmod(0o755)
    return cli


def hanging_python(tmp_path: Path, token: str) -> Path:
    """An interpreter that answers a plain question and hangs before it reads a bootstrap (a wrapper waiting on a lock,
    a stalled mount): the bootstrap's own deadline never starts."""
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\ncase "$*" in *zipfile*) exec sleep {token};; esac\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def running(token: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if token.encode() in cmdline and container_reap._alive(int(name)):
                found.append(int(name))
    return found


@pytest.mark.parametrize("shell", [True, False], ids=["sh", "no-sh"])
def test_an_interpreter_hung_before_its_bootstrap_is_stopped_when_the_probe_times_out(tmp_path, runtime, monkeypatch, shell):
    if not shell:
        monkeypatch.setenv("FAKE_NO_SH", "1")
    token = str(3000 + secrets.randbelow(10**6))
    target = ContainerTarget([str(runtime)], "c", str(hanging_python(tmp_path, token)), "--container-python", shell=shell)
    script = tmp_path / "probe.py"
    script.write_text("print('never')\n")
    try:
        res = target.run_script(script, [], timeout=3)
        assert res.timed_out, res
        assert running(token) == [], "the hung interpreter still runs in the container"
    finally:
        for pid in running(token):
            os.kill(pid, 9)


def test_with_a_sh_the_container_bounds_it_even_when_this_machine_cannot_reap(tmp_path, runtime, monkeypatch):
    """Where this machine cannot see or signal the container's processes (a remote daemon, another user's), the
    container's own sh stops the hung interpreter at its limit."""
    monkeypatch.setattr(container_reap, "reap", lambda token: [])
    token = str(3000 + secrets.randbelow(10**6))
    python = hanging_python(tmp_path, token)
    target = ContainerTarget([str(runtime)], "c", str(python), "--container-python", shell=True)
    try:
        res = target.run_command([str(python), "-c", "import zipfile"], timeout=1)
        assert res.timed_out and running(token), "the client gave up; the interpreter is still there for now"
        for _ in range(600):  # `timeout` inside sends TERM 1 + INSIDE_MARGIN s after the start: looks, not a deadline
            if not running(token):
                break
            time.sleep(0.05)
        assert running(token) == [], "the container's own limit did not stop it"
    finally:
        for pid in running(token):
            os.kill(pid, 9)


def test_a_candidate_that_hangs_while_looking_for_python_is_stopped(tmp_path, runtime, monkeypatch):
    """A candidate interpreter that hangs while it is asked for vLLM (here: the whole look hangs)."""
    token = str(3000 + secrets.randbelow(10**6))
    monkeypatch.setattr("sparkdoctor.targets.container_inspect.FIND_TIMEOUT", 2.0)
    monkeypatch.setattr("sparkdoctor.targets.container_inspect.FIND_SCRIPT", f"exec sleep {token}")

    with pytest.raises(TargetError, match=r"^--container c: looking for Python in the container did not finish within"):
        find_python([str(runtime)], "c")
    assert running(token) == []


def test_the_bound_is_the_one_fleet_nodes_use():
    assert container.BOUNDED == on_node.BOUNDED
