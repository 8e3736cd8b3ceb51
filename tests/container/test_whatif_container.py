"""What-if against a real container target (issue 24 items 1 and 5), on the session's real dockerd: the
container's own pip resolves the upgrade in a dry run (through the container CLI), then the upgrade is
performed in the container and `check --container` collects its Facts again; every field the prediction
claimed must equal what the real upgrade produced. The container reaches no registry (no network): its pip
reads a folder of wheels fetched beforehand (PIP_NO_INDEX / PIP_FIND_LINKS in the container's environment)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkdoctor.matrix import load
from tests.container.test_container_cli import sd

pytestmark = pytest.mark.slow

TODAY = ["idna==3.7", "packaging==24.0"]
MATRIX = """component = "demo"

[[entry]]
id = "demo-packaging-before-24-1"
title = "a bug of packaging before 24.1"
severity = "warn"
action = "fix"
summary = "s"
remedy = "r"
when.packages = { "packaging" = "<24.1" }
refs = ["https://example.org/a"]

[[entry]]
id = "demo-idna-3-8"
title = "a bug of idna 3.8"
severity = "error"
action = "configure"
summary = "s"
remedy = "r"
when.packages = { "idna" = ">=3.8" }
refs = ["https://example.org/b"]
"""
UPGRADE = ["idna==3.8", "packaging==24.1"]


@pytest.fixture(scope="module")
def pip_container(docker_daemon, skeleton, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """A container whose venv (with pip, writable, at its host path) holds TODAY; its pip can see UPGRADE's wheels."""
    import sys

    root = tmp_path_factory.mktemp("whatif-container")
    venv, wheels = root / "venv", root / "wheels"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "-q"]
    for specs in (TODAY, UPGRADE):
        subprocess.run([*pip, "download", "--no-deps", "-d", str(wheels), *specs], check=True, timeout=600)
    subprocess.run([*pip, "install", "--no-index", "--find-links", str(wheels), *TODAY], check=True, timeout=300)
    name = "sd-whatif"
    docker_daemon.containers.append(name)
    mounts = [arg for src, dst in docker_daemon.host_mounts() for arg in ("-v", f"{src}:{dst}:ro")]
    env = ["PIP_NO_INDEX=1", f"PIP_FIND_LINKS={wheels}", "PIP_CONFIG_FILE=/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK=1"]
    docker_daemon.must("run", "-d", "--init", "--network", "none", "--name", name, *mounts, "-v", f"{venv}:{venv}",
                       "-v", f"{wheels}:{wheels}:ro", *(a for e in env for a in ("-e", e)), skeleton, "sleep", "infinity")
    yield name, python
    docker_daemon.docker("rm", "-f", name, timeout=60)  # the launch tests count the daemon's containers
    docker_daemon.containers.remove(name)


def run_json(*args: str, env: dict[str, str], cwd: Path) -> dict:
    done = sd(*args, "--format", "json", env=env, cwd=cwd, timeout=600)
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-3000:])
    return json.loads(done.stdout)


def test_a_container_upgrade_predicted_equals_the_real_one(docker_daemon, docker_env, pip_container, tmp_path):
    name, python = pip_container
    env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX)
    where = ["--container", name, "--container-python", python, "--matrix", str(matrix), "--arch", "sm_121a"]
    before = run_json("check", *where, "--no-kernels", env=env, cwd=tmp_path)
    predicted = run_json("whatif", *UPGRADE, *where, env=env, cwd=tmp_path)
    assert predicted["exit_code"] == 1  # the error entry it introduces fails the gate
    # the real upgrade, in the container, by its own pip
    done = docker_daemon.docker("exec", name, python, "-m", "pip", "install", "-q", *UPGRADE, timeout=300)
    assert done.ok, done.stderr
    after = run_json("check", *where, "--no-kernels", env=env, cwd=tmp_path)

    versions = {when: {n: p.get("version") for n, p in (doc["facts"]["packages"] or {}).items()} for when, doc in
                (("before", before), ("after", after))}
    real_changes = {n: (versions["before"].get(n), v) for n, v in versions["after"].items() if versions["before"].get(n) != v}
    assert {c["name"]: (c["from"], c["to"]) for c in predicted["changes"]} == real_changes == {
        "idna": ("3.7", "3.8"), "packaging": ("24.0", "24.1")}
    assert set(versions["before"]) == set(versions["after"])  # no other distribution came or went
    # matrix outcomes: what the prediction says matches after the upgrade is what check finds after it
    # (host entries judge this moment's memory on a shared machine: compared apart, not here)
    entries = load(matrix).entries
    matrix_ids = {e.id for e in entries if e.component != "host"}
    said_after = {f["id"] for f in predicted["introduced"] + predicted["unchanged"]} & matrix_ids
    found = {when: {f["id"] for f in doc["findings"]} & matrix_ids for when, doc in (("before", before), ("after", after))}
    assert found == {"before": {"demo-packaging-before-24-1"}, "after": {"demo-idna-3-8"}}
    assert said_after == found["after"], (said_after, found)
    assert {f["id"] for f in predicted["introduced"]} == found["after"] - found["before"]
    assert {f["id"] for f in predicted["fixed"]} & matrix_ids == found["before"] - found["after"]
    assert not predicted["cannot_tell"]
