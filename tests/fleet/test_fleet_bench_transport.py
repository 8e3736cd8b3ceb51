"""The scaling benchmark's local transport (benchmarks/fleet_scaling.py): an `ssh` stand-in first on PATH runs
each node's command line here, so `fleet check --hosts` runs unchanged on a machine with no ssh client or server.
Guards the stand-in against the options SshTransport passes (a new option with a value would shift the host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks.fleet_scaling import SSH_STANDIN
from sparkdoctor.fleet.transport import Node, SshTransport
from tests.fleet.nodes import serving_venv


def standin(tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "ssh").write_text(SSH_STANDIN)
    (folder / "ssh").chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_the_standin_runs_exactly_the_command_ssh_would_run(tmp_path):
    env = standin(tmp_path)
    argv = SshTransport("/some/config").argv(Node("spark-1"), ["sh", "-c", 'printf "%s|" "$@"', "x", "a b", "it's"])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a b|it's|"


def test_fleet_check_over_the_standin_probes_every_node(tmp_path):
    python = serving_venv(tmp_path, "venv")
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", "--hosts", "fleet-0,fleet-1,fleet-2",
                           "--remote-python", str(python), "--format", "json"], capture_output=True, text=True,
                          timeout=300, env=standin(tmp_path))
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    doc = json.loads(done.stdout)
    assert [n["ok"] for n in doc["nodes"]] == [True, True, True] and doc["verdict"] == "go"
    assert {n["facts"]["target"]["python"] for n in doc["nodes"]} == {str(python)}
