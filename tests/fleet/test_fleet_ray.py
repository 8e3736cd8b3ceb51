"""`fleet check --ray` against a real three-node Ray cluster on this machine (tests/fleet/conftest.py):
every node probed by a task pinned to it, with its own serving venv; the injected drift is found,
the odd node is named against the majority, and the exit code refuses the launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# one worker runs them all: the session's cluster (three raylets, a GCS) is started once, not once per xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("fleet-ray")]


def drift(result, label):
    found = [d for d in result.drifts if d.label == label]
    assert found, f"no {label!r} among {[d.label for d in result.drifts]}"
    return found[0]


def test_every_node_answers_from_its_own_venv(ray_fleet):
    result, names = ray_fleet
    assert len(result.outcomes) == 3 and not result.down
    assert None not in names and len(set(names)) == 3, "each node ran its own serving interpreter"


def test_nccl_build_drift_names_the_odd_node(ray_fleet):
    result, names = ray_fleet
    d = drift(result, "nccl: loaded library")
    assert d.verdict == "risky" and d.has_majority and d.odd == [names[1]]
    assert d.majority.startswith("2.28.9+cuda13.0 build ") and "(pip)" in d.majority
    assert d.values[names[1]] != d.majority
    report = result.reports[names[1]]
    assert "multinode-nccl-build-drift" in {f.id for f in report.findings}
    assert "multinode-nccl-build-drift" not in {f.id for f in result.reports[names[0]].findings}


def test_cutedsl_build_and_env_drift_name_the_third_node(ray_fleet):
    result, names = ray_fleet
    d = drift(result, "cutedsl: active build")
    assert d.verdict == "risky" and d.odd == [names[2]] and d.majority == "libs-cu13" and d.values[names[2]] == "libs-cu12"
    env = drift(result, "env: NCCL_IB_GID_INDEX")
    assert env.verdict == "risky" and env.odd == [names[2]] and env.values[names[2]] == "3"
    assert "multinode-serving-stack-drift" in {f.id for f in result.reports[names[2]].findings}


def test_the_gate_refuses_and_packages_were_judged_as_check_judges(ray_fleet):
    result, names = ray_fleet
    assert result.exit_code() == 1 and result.verdict() == "no-go"
    for report in result.reports.values():
        assert report.facts.packages["vllm"]["version"] == "0.22.0"
        assert report.facts.fleet["nodes"] == 3
        fabric = report.facts.fleet["fabric"]  # the node probe's fabric facts came back through the Ray task
        assert fabric["root"] == "/" and isinstance(fabric["netdevs"], dict) and isinstance(fabric["rdma"], list)
    nccl = result.reports[names[2]].facts.fleet["fabric"]["nccl"]
    assert nccl["NCCL_IB_GID_INDEX"] == {"value": "3", "source": "environment"}  # the worker's environment
    assert result.reports[names[0]].facts.fleet["fabric"]["nccl"].get("NCCL_IB_GID_INDEX") is None


def test_cli_over_ray_prints_json_and_exits_1(ray_cluster, no_ray_env):
    address, _ = ray_cluster
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "fleet", "check", "--ray", address, "--format", "json"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "SPARKDOCTOR_DEBUG": ""})
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["fleet_version"] == 1 and doc["transport"] == "ray" and doc["verdict"] == "no-go"
    errors = {n["name"]: n["facts"]["errors"] for n in doc["nodes"]}
    assert {d["area"] + ": " + d["key"] for d in doc["differences"]} >= {"nccl: loaded library", "cutedsl: active build"}, errors
    assert all(n["ok"] for n in doc["nodes"]) and len(doc["nodes"]) == 3


def test_a_node_serving_from_a_container_carries_its_image_digest(ray_cluster, docker_daemon, second_docker_daemon, skeleton,
                                                                 tmp_path_factory):
    """--ray --container: the probes run in the container (docker exec by the task on each node) and the image is
    read by a task pinned to each node with the node's own docker. Nodes 0 and 1 reach the session's dockerd, node 2
    another one (tests/fleet/conftest.py), where the container of the same name runs another image: its config
    digest and fingerprint are in every node's report, and node 2 is named on the image."""
    from sparkdoctor.fleet import FleetOptions, run
    from tests.fleet.nodes import serving_venv

    address, venvs = ray_cluster
    python = serving_venv(tmp_path_factory.mktemp("fleet-ray-container"), "venv")
    venv = str(python.parent.parent)
    other = second_docker_daemon.import_skeleton("sparkdoctor-skeleton:fleet-ray-other", files={"etc/image-build": b"2\n"})
    images = {}
    for daemon, image in ((docker_daemon, skeleton), (second_docker_daemon, other)):
        daemon.run_container("fleet-ray-c0", image, [*daemon.host_mounts(), (venv, venv)])
        images[daemon.env["DOCKER_HOST"]] = json.loads(daemon.must("image", "inspect", image))[0]
    result = run(FleetOptions(ray_address=address, container="fleet-ray-c0", python=str(python), node_timeout=90))
    assert len(result.outcomes) == 3 and not result.down, [o.problem for o in result.outcomes]
    by_name = {o.node.name: o.facts for o in result.outcomes}
    seen = {}
    for name, facts in by_name.items():
        record = facts.container
        assert record["name"] == "fleet-ray-c0" and record["fingerprint"], facts.errors
        assert facts.fleet["in_container"] is True
        seen[name] = record["config_digest"]
    first, second = (images[d.env["DOCKER_HOST"]]["Id"] for d in (docker_daemon, second_docker_daemon))
    assert first != second and sorted(seen.values()) == sorted([first, first, second])
    [image] = [d for d in result.drifts if d.label == "container: fingerprint"]
    odd = [name for name, digest in seen.items() if digest == second]
    assert image.verdict == "risky" and image.odd == odd and len(odd) == 1
    assert not any("cannot be read from inside" in note for note in result.notes)


def test_a_node_whose_task_answers_more_than_a_record_is_reported_and_not_fetched(ray_cluster, no_ray_env):
    """A broken or hostile node's worker answers what it likes: ray.get fetched all of it into this process (40 MB
    here, as much as the node liked). Now the answer's size is asked of Ray first, and a larger one is that node's
    failure in one line, never read."""
    from sparkdoctor.fleet import on_node
    from sparkdoctor.fleet.transport import RayTransport

    address, _ = ray_cluster
    transport = RayTransport(address)
    try:
        def flood(*_args: object) -> dict[str, object]:  # a local function: sent to the node by value
            return {"returncode": 0, "stdout": b"x" * (40 << 20), "stderr": b""}

        transport.task = transport.ray.remote(flood)
        node = transport.nodes()[0]
        done = transport.start(node, "", [], 60).result(60)
        assert not done.ok and done.start_error.startswith("the Ray task answered ") and done.start_error.endswith(
            f"more than the {on_node.MAX_ANSWER:,} a probe's record may hold: not read"), done
        ok = transport.command(node, ["sh", "-c", "echo hello"], 60)
        assert ok.ok and ok.stdout == "hello\n", ok
    finally:
        transport.close()
