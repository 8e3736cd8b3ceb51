"""`fleet check --inventory` with nodes that serve from containers: ssh to the node, `docker exec -i` into the
container, the probes on stdin; the image read with the node's own docker CLI over the same ssh. Uses the
suite's one dockerd (tests/container/docker_daemon.py) and the session's sshd, which passes DOCKER_HOST on
(AcceptEnv), so the node's docker talks to that daemon. Two images of one skeleton differ in content
(their configs), as two builds of one Dockerfile do: the odd node is named on the image fingerprint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fleet.nodes import serving_venv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def containers(docker_daemon, skeleton, tmp_path_factory):
    python = serving_venv(tmp_path_factory.mktemp("fleet-containers"), "venv")
    other = docker_daemon.import_skeleton("sparkdoctor-skeleton:fleet-other")
    venv = str(python.parent.parent)
    mounts = docker_daemon.host_mounts() + [(venv, venv)]
    names = []
    for name, image in (("fleet-c0", skeleton), ("fleet-c1", other), ("fleet-c2", skeleton)):
        names.append(docker_daemon.run_container(name, image, mounts))
    return python, names


def test_the_node_serving_from_another_image_is_named(sshd, docker_daemon, containers, tmp_path):
    python, names = containers
    config = tmp_path / "ssh_config"  # the session's config, with the test daemon's socket sent along
    config.write_text(f"Host *\n  SetEnv DOCKER_HOST={docker_daemon.env['DOCKER_HOST']}\n" + sshd.config.read_text())
    inventory = tmp_path / "fleet.toml"
    inventory.write_text(f'[defaults]\npython = "{python}"\n' + "".join(
        f'[[node]]\nhost = "fleet-{i}"\ncontainer = "{name}"\n' for i, name in enumerate(names)))
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_AUTH_SOCK", "DOCKER_HOST")}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", "--inventory", str(inventory),
                           "--ssh-config", str(config), "--format", "json"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 1, done.stderr + done.stdout[-2000:]
    doc = json.loads(done.stdout)
    assert all(n["ok"] for n in doc["nodes"]), [n["problem"] for n in doc["nodes"]]
    containers_seen = {n["name"]: n["facts"]["container"] for n in doc["nodes"]}
    assert containers_seen["fleet-0"]["name"] == "fleet-c0" and containers_seen["fleet-0"]["fingerprint"]
    [image] = [d for d in doc["differences"] if (d["area"], d["key"]) == ("container", "fingerprint")]
    assert image["verdict"] == "risky" and image["odd"] == ["fleet-1"]
    assert doc["nodes"][0]["facts"]["fleet"]["in_container"] is True
