"""A journal says which target it is of, and `--rollback` refuses to put it back into another one
(one line, exit 4); a container journal whose container is gone is exit 3. No venv, no daemon: the
journal is written by journal.create itself, the container CLI is a stand-in that knows no container."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.inventory import target_key, target_label

NO_CONTAINERS = "#!/bin/sh\necho \"Error: No such container: $3\" >&2\nexit 1\n"


def write_journal(target: dict) -> str:
    from sparkdoctor.fix.model import Plan

    plan = Plan(target={"python": target["python"]}, installer="pip").to_dict()
    header = {"created": "2026-11-23T00:00:00Z", "target": target, "installer": "pip", "plan": plan,
              "packages_before": [], "touched_before": {}, "hashes_before": {}}
    journal = jr.create(header, [], {}, lambda folder: {}, lambda name: None)
    journal.mark(jr.APPLIED)
    return journal.id


def sd(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def error(p: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == code and len(lines) == 1 and lines[0].startswith("sparkdoctor: error: "), (p.returncode, p.stderr)
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_target_keys_and_labels():
    local = {"kind": "python", "python": sys.executable}
    ctr = {"kind": "container", "container": "vllm_node", "python": "/opt/venv/bin/python", "image_id": "sha256:ab"}
    # the environment: a venv's folder (as Python itself says: sys.prefix), else the interpreter resolved; two venvs
    # of one base interpreter are two targets (their bin/python links both resolve to it)
    venv = sys.prefix != sys.base_prefix
    assert target_key(local) == os.path.realpath(sys.prefix if venv else sys.executable)
    assert target_key({"kind": "python", "python": "/a/v1/bin/python"}) != target_key({"kind": "python", "python": "/a/v2/bin/python"})
    assert target_key(ctr) == "container:vllm_node:/opt/venv/bin/python"  # never resolved against this machine's files
    assert target_label(ctr) == "container vllm_node: /opt/venv/bin/python" and target_label(local) == sys.executable


def test_rollback_refuses_a_journal_of_another_target(tmp_path):
    local = write_journal({"kind": "python", "python": sys.executable})
    error(sd("fix", "--rollback", local, "--container", "vllm_node"), 4, f"this journal is of {sys.executable}, not of a container")
    ctr = write_journal({"kind": "container", "container": "vllm_node", "python": "/opt/venv/bin/python", "image_id": "sha256:ab"})
    error(sd("fix", "--rollback", ctr, "--python", sys.executable), 4, "this journal is of container vllm_node: /opt/venv/bin/python")
    error(sd("fix", "--rollback", ctr, "--container", "other"), 4, "this journal is of container vllm_node")
    cli = tmp_path / "docker"
    cli.write_text(NO_CONTAINERS)
    cli.chmod(0o755)
    error(sd("fix", "--rollback", ctr, env={"SPARKDOCTOR_CONTAINER_CLI": str(cli)}), 3, "--container vllm_node", "no such container")
    history = json.loads(sd("fix", "--history", "--format", "json").stdout)["result"]
    assert sorted(r["target"] for r in history) == sorted(["container vllm_node: /opt/venv/bin/python", sys.executable])
    assert all(jr.load(i).status() == "applied" for i in (local, ctr))  # refused: nothing was touched


def test_container_options_are_checked_like_checks(tmp_path):
    error(sd("fix", "--container-python", "/usr/bin/python3"), 2, "needs --container")
    error(sd("fix", "--container", "x", "--python", sys.executable), 2, "exclude each other")
    error(sd("fix", "--container", "x", env={"SPARKDOCTOR_CONTAINER_CLI": "no-such-cli"}), 3, "no-such-cli")
    error(sd("fix", "--container", "x", "--runtime", "sparkdoctor-no-such-cli"), 3,
          "--runtime sparkdoctor-no-such-cli: no such program on PATH")


# A stand-in container CLI whose one "container" (c1) is this machine: inspect answers like docker,
# exec runs here. The real daemon runs in tests/container/test_fix_container.py; this one covers the
# container code paths that case does not take (a pin file in the target, its PIP_CONSTRAINT, the
# restore of a hand-edited file, the env file on this machine) in seconds, offline.
LOCAL_CONTAINER = r"""#!/bin/sh
case "$1 $2" in
  "container inspect") name=$3; [ "$name" = -- ] && name=$4  # sparkdoctor ends the options: a name is never one
    [ "$name" = c1 ] || { echo "Error: No such container: $name" >&2; exit 1; }
    echo '[{"Name": "/c1", "Id": "c1c1c1c1c1c1c1", "State": {"Running": true, "Status": "running"}, "Image": "sha256:feed", "Config": {"Image": "local:1"}}]'; exit 0;;
  "image inspect") echo '[{"Id": "sha256:feed", "Os": "linux", "Architecture": "amd64", "RootFS": {"Layers": ["sha256:1"]}}]'; exit 0;;
esac
[ "$1" = exec ] || exit 2
shift; [ "$1" = -i ] && shift
while [ "$1" = -e ]; do export "$2"; shift 2; done
shift
exec "$@"
"""


@pytest.mark.slow
def test_fix_container_edits_the_containers_pins_and_rolls_back(tmp_path, wheels):
    from tests.fix import scenario

    python = scenario.make_target(tmp_path, "pip", wheels)
    env_file, pins = scenario.files_for(tmp_path)
    cli = tmp_path / "docker"
    cli.write_text(LOCAL_CONTAINER)
    cli.chmod(0o755)
    env = {"PIP_CONSTRAINT": str(pins), "SPARKDOCTOR_CONTAINER_CLI": str(cli)}
    before = scenario.state(python, [env_file, pins])
    args = ["--container", "c1", "--container-python", str(python), "--env-file", str(env_file), "--no-kernels",
            "--matrix", str(scenario.DATA / "matrix"), "--fixes", str(scenario.DATA / "fixes")]
    applied = scenario.run([sys.executable, "-m", "sparkdoctor", "fix", *args, "--yes"], env=env, timeout=600)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert f"Target: container c1: {python}" in applied.stdout
    assert "Findings gone: small-env-stale, small-pin-old, small-six-old" in applied.stdout
    assert "six>=1.17  # why not" in pins.read_text() and "VLLM_NVFP4_GEMM_BACKEND" not in env_file.read_text()
    journal = jr.load(None)
    assert journal.data["target"] == {"kind": "container", "python": str(python), "container": "c1", "engine": "docker",
                                      "container_id": "c1c1c1c1c1c1", "image_id": "sha256:feed"}
    assert {r["path"]: r["side"] for r in journal.data["files"]} == {str(pins): "target", str(env_file): "host"}
    back = scenario.run([sys.executable, "-m", "sparkdoctor", "fix", "--rollback"], env={**env, "PIP_NO_INDEX": "1"}, timeout=600)
    assert back.returncode == 0 and "byte for byte" in back.stdout, back.stdout + back.stderr
    assert scenario.diff(before, scenario.state(python, [env_file, pins])) == []
