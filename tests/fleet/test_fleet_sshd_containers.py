"""`fleet check --hosts` where every node is a container running its own sshd (tests/fleet/sshd_nodes.py)
on the suite's one dockerd: ssh logs straight into the serving container, each node's host key is checked
against the known_hosts file the test wrote, and the drift injected per container is found with the odd
node named; the exit code is the gate.

  node-0, node-1  the baseline image, serving venv A (NCCL build "a", cutlass-dsl cu12 + cu13)
  node-2          the baseline image, venv B: another build of the same NCCL version
  node-3          an image with a baked-in /etc/nccl.conf, venv C (only the cu12 cutlass-dsl build), and
                  NCCL_IB_GID_INDEX=3 in its login environment (sshd's SetEnv)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fleet.nodes import serving_venv
from tests.fleet.sshd_nodes import VENV_IN_NODE, NodeSpec, node_image, start_nodes

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fleet-sshd-containers")]

STALE_CONF = b"# left in the image by an old build\nNCCL_IB_HCA=mlx5_0\nNCCL_SOCKET_IFNAME=enp1s0f1np1\n"
PYTHON = f"{VENV_IN_NODE}/bin/python"


@pytest.fixture(scope="module")
def container_nodes(docker_daemon, tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet-sshd-nodes")
    try:
        from tests.fleet.sshd import NoSshd, sshd_binary

        sshd_binary()
    except NoSshd as exc:
        pytest.skip(f"no sshd can run here: {exc}")
    venv_a = serving_venv(root, "venv-a", "a")
    venv_b = serving_venv(root, "venv-b", "b")
    venv_c = serving_venv(root, "venv-c", "a", cutedsl_majors=(12,))
    base = node_image(docker_daemon, "sparkdoctor-fleet-node:base")
    stale = node_image(docker_daemon, "sparkdoctor-fleet-node:stale-conf", {"etc/nccl.conf": STALE_CONF})
    specs = [NodeSpec("node-0", venv_a, base), NodeSpec("node-1", venv_a, base), NodeSpec("node-2", venv_b, base),
             NodeSpec("node-3", venv_c, stale, {"NCCL_IB_GID_INDEX": "3"})]
    return start_nodes(docker_daemon, root / "ssh", specs)


def fleet(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}  # the test's key only, never an agent's
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_each_container_node_names_its_own_drift_and_the_gate_refuses(container_nodes):
    done = fleet("--hosts", "node-0,node-1,node-2,node-3", "--ssh-config", str(container_nodes.config),
                 "--remote-python", PYTHON, "--format", "json")
    assert done.returncode == 1, done.stderr + done.stdout[-2000:]
    doc = json.loads(done.stdout)
    assert doc["transport"] == "ssh" and doc["verdict"] == "no-go"
    assert all(n["ok"] for n in doc["nodes"]), [n["problem"] for n in doc["nodes"]]
    by = {(d["area"], d["key"]): d for d in doc["differences"]}
    nccl = by[("nccl", "loaded library")]
    assert nccl["verdict"] == "risky" and nccl["odd"] == ["node-2"] and "(pip)" in nccl["majority"]
    conf = by[("nccl", "config file")]
    assert conf["verdict"] == "risky" and conf["odd"] == ["node-3"] and conf["majority"] == "none"
    assert "/etc/nccl.conf: NCCL_IB_HCA=mlx5_0, NCCL_SOCKET_IFNAME=enp1s0f1np1" == conf["values"]["node-3"]
    env = by[("env", "NCCL_IB_GID_INDEX")]
    assert env["verdict"] == "risky" and env["odd"] == ["node-3"] and env["values"]["node-3"] == "3"
    cutedsl = by[("cutedsl", "active build")]
    assert cutedsl["odd"] == ["node-3"] and cutedsl["majority"] == "libs-cu13"
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert {f["id"] for f in nodes["node-3"]["findings"]} >= {"multinode-stale-nccl-conf", "multinode-serving-stack-drift"}
    assert "multinode-nccl-build-drift" in {f["id"] for f in nodes["node-2"]["findings"]}
    for n in nodes.values():  # every login landed in its container, and ran the venv mounted there
        assert n["facts"]["fleet"]["in_container"] is True and n["facts"]["target"]["python"] == PYTHON
    # from inside, a container cannot read its own image: said once, never guessed
    assert any(note.startswith("node-0, node-1, node-2, node-3 run inside a container") for note in doc["notes"]), doc["notes"]


def test_two_agreeing_container_nodes_pass_the_gate(container_nodes):
    done = fleet("--hosts", "node-0,node-1", "--ssh-config", str(container_nodes.config), "--remote-python", PYTHON)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "GO" in done.stdout and "NO-GO" not in done.stdout


def test_a_node_whose_host_key_is_another_nodes_is_refused(container_nodes):
    """known_hosts says node-1's key lives at node-0's port: ssh refuses the login, and the node is one line."""
    done = fleet("--hosts", "node-0,impostor", "--ssh-config", str(container_nodes.config), "--remote-python", PYTHON,
                 "--format", "json")
    assert done.returncode == 3, done.stderr
    nodes = {n["name"]: n for n in json.loads(done.stdout)["nodes"]}
    assert nodes["node-0"]["ok"] and not nodes["impostor"]["ok"]
    assert "Host key verification failed" in nodes["impostor"]["problem"] or "IDENTIFICATION HAS CHANGED" in nodes["impostor"]["problem"]
