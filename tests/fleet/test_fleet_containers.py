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
import time

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


def _running_in(docker_daemon, name: str) -> list[str]:
    """The command lines of the processes running in container `name` (its own /proc, read with the container's sh)."""
    out = docker_daemon.must("exec", name, "sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_a_probe_hung_inside_the_container_is_stopped_there_at_the_nodes_time(docker_daemon, skeleton, tmp_path, monkeypatch):
    """`docker exec` passes no end on: when the node's limit stopped the CLI, what it had started in the container (an
    interpreter hung before reading its script, and a child of it) ran on there. The probe now runs under the
    container's own sh and limit (BOUNDED: its `timeout`, else the sh watchdog)."""
    from sparkdoctor.fleet.node import collect_node
    from sparkdoctor.fleet.transport import LOCAL, Node, SshTransport

    monkeypatch.setenv("DOCKER_HOST", docker_daemon.env["DOCKER_HOST"])
    hung = tmp_path / "hung-python"
    hung.write_text("#!/bin/sh\nsleep 3600 &\nexec sleep 3601\n")
    hung.chmod(0o755)
    name = docker_daemon.run_container("fleet-hung", skeleton, docker_daemon.host_mounts() + [(str(tmp_path), str(tmp_path))])
    try:
        outcome = collect_node(SshTransport(), Node(LOCAL, python=str(hung), container=name), 2.0, "sm_121a")
        assert not outcome.ok and "timed out" in str(outcome.problem), outcome.problem
        left = []
        for _ in range(150):  # stopped in the container at 2 s (+5 s to KILL); 150 looks (over 60 s) are "never"
            left = [line for line in _running_in(docker_daemon, name) if line.startswith(("sleep 3600", "sleep 3601"))]
            if not left:
                break
            time.sleep(0.4)
        assert left == [], f"the hung probe still runs in the container: {left}"
    finally:
        docker_daemon.docker("rm", "-f", name, timeout=60)


def test_an_image_without_sh_is_still_probed_as_before(docker_daemon, skeleton, tmp_path, monkeypatch):
    """A distroless-like container (an interpreter and its libraries, no /bin/sh: the skeleton without the host's
    /usr/bin): the probe runs as it ran before, without the container's own limit (there is no sh to hold it)."""
    from sparkdoctor.fleet.transport import LOCAL, Node, SshTransport

    monkeypatch.setenv("DOCKER_HOST", docker_daemon.env["DOCKER_HOST"])
    base = os.path.realpath(sys.base_prefix)
    python = os.path.join(base, "bin", "python3")
    mounts = [(lib, lib) for lib in ("/usr/lib", "/usr/lib64") if os.path.isdir(lib)] + [(base, base)]
    name = docker_daemon.run_container("fleet-no-sh", skeleton, mounts, command=(python, "-c", "import time; time.sleep(1e6)"))
    try:
        assert not docker_daemon.docker("exec", name, "sh", "-c", ":").ok  # really no sh in it
        result = SshTransport().start(Node(LOCAL, python=python, container=name), "print(6 * 7)\n", [], 60).result(60)
        assert (result.returncode, result.stdout) == (0, "42\n"), result
    finally:
        docker_daemon.docker("rm", "-f", name, timeout=60)
