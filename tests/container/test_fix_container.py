"""`fix --container` against a real container of the session's dockerd: the cutlass-dsl 4.5.0 libs-base
collision (tests/fix/test_fix_real.py builds it for the local case) in a venv the container mounts
read-write at ANOTHER path (/opt/venv), so every file the fix reads, copies, writes or removes can
only be reached through the container (a host path under /opt/venv does not exist).

One container session: plan (the same as `fix --python` on that venv), apply (re-check: the findings
are gone), rollback (the sha256 of every file of every dist, seen from inside the container, equal
before and after), then the refusals: a journal of another target, a read-only mount, a stopped
container, one that is gone. pip inside the container reaches the registry over the host's network
and shares the host's pip cache, so a warm run downloads nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.container.test_container_cli import one_line, sd
from tests.fix import scenario

pytestmark = pytest.mark.slow
INSIDE = "/opt/venv"
GONE = ["cutedsl-450-nvfp4-garbage", "cutedsl-libs-base-tile-crash", "cutedsl-wheel-collision"]
TREE = r"""
import hashlib, json, os, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
out = {}
for root, dirs, files in os.walk(site):
    for f in files:
        p = os.path.join(root, f)
        if f.endswith(".pyc") or "__pycache__" in p:
            continue
        with open(p, "rb") as fh:
            out[os.path.relpath(p, site)] = hashlib.sha256(fh.read()).hexdigest()
print(json.dumps(out))
"""


def collision_venv(root: Path) -> Path:
    """A pip venv (python -m venv: the container's fix drives its own pip) with nvidia-cutlass-dsl[cu13]
    4.5.0, then libs-base force-reinstalled over it: pip lists cu13, the libs-base bytes are active."""
    venv = root / "v"
    scenario.must([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    for step in (["nvidia-cutlass-dsl[cu13]==4.5.0"], ["--reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-base==4.5.0"]):
        scenario.must([scenario.uv(), "pip", "install", "--quiet", "--python", python, *step], timeout=1200)
    return venv


def run_rw_container(daemon, image: str, name: str, venv: Path, read_only: bool = False) -> str:
    args = ["run", "-d", "--init", "--network", "host", "--name", name]
    for src, dst in daemon.host_mounts():
        args += ["-v", f"{src}:{dst}:ro"]
    pip_cache = Path.home() / ".cache" / "pip"
    pip_cache.mkdir(parents=True, exist_ok=True)
    args += ["-v", f"{venv}:{INSIDE}:{'ro' if read_only else 'rw'}", "-v", f"{pip_cache}:/root/.cache/pip:rw"]
    cert = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    if Path(cert).is_file():  # the machine's CA bundle (a proxy's CA may be in it), as an image behind it would carry
        args += ["-v", f"{Path(cert).parent}:{Path(cert).parent}:ro", "-e", f"PIP_CERT={cert}"]
    daemon.containers.append(name)
    daemon.must(*args, image, "sleep", "infinity")
    return name


def tree_inside(daemon, name: str) -> dict[str, str]:
    return json.loads(daemon.must("exec", name, f"{INSIDE}/bin/python", "-c", TREE, timeout=300))


def error_line(p, code: int, *needles: str) -> str:
    """The one error line (after fix's progress lines on stderr) and the exit code."""
    lines = p.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("sparkdoctor: error: ")]
    assert p.returncode == code and len(errors) == 1 and lines[-1] == errors[0], (p.returncode, p.stdout[-1500:], p.stderr[-2500:])
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def plan_of(p, venv: Path | None = None) -> dict:
    assert p.returncode in (0, 1), (p.returncode, p.stdout[-2000:], p.stderr[-3000:])
    text = p.stdout.replace(str(venv), INSIDE) if venv else p.stdout
    plan = json.loads(text)["plan"]
    # not its notes: the pip settings fix's pip sets aside are each side's own (this machine's pip.conf has an
    # extra-index-url the container does not), and the note names them
    return {k: plan[k] for k in ("installer", "fixes", "steps", "changes", "touched", "checks_after", "probes_after", "refusals")}


def test_fix_container_plans_applies_and_rolls_back_the_collision(docker_daemon, docker_env, skeleton, tmp_path):
    started = time.monotonic()
    venv = collision_venv(tmp_path)
    name = run_rw_container(docker_daemon, skeleton, "sd-fix-collision", venv)
    env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    target = ["--container", name, "--container-python", f"{INSIDE}/bin/python"]
    before = tree_inside(docker_daemon, name)
    assert any(k.startswith("nvidia_cutlass_dsl") for k in before)

    # the plan is the plan `fix --python` makes on the same venv (paths seen from inside)
    local = plan_of(sd("fix", "--python", str(venv / "bin" / "python"), "--format", "json", env=env, cwd=tmp_path, timeout=900), venv)
    inside = sd("fix", *target, "--format", "json", env=env, cwd=tmp_path, timeout=900)
    assert plan_of(inside) == local
    assert json.loads(inside.stdout)["plan"]["target"]["container"] == name
    assert not (tmp_path / "state" / "journals").exists(), "a dry run wrote a journal"

    applied = sd("fix", *target, "--yes", env=env, cwd=tmp_path, timeout=1800)
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr[-3000:]
    assert f"Target: container {name}: {INSIDE}/bin/python" in applied.stdout
    assert f"Findings gone: {', '.join(GONE)}" in applied.stdout, applied.stdout
    fixed = tree_inside(docker_daemon, name)
    assert fixed != before
    left = docker_daemon.must("exec", name, "sh", "-c", "ls -A /tmp /var/tmp")
    assert "sparkdoctor" not in left, left  # no scratch folder stays in the container

    history = sd("fix", "--history", env=env, cwd=tmp_path)
    assert f"container {name}: {INSIDE}/bin/python" in history.stdout

    # a journal of this container is not rolled back into another target
    other = sd("fix", "--rollback", "--python", sys.executable, env=env, cwd=tmp_path)
    one_line(other, 4, f"this journal is of container {name}")

    back = sd("fix", "--rollback", env={**env, "PIP_NO_INDEX": "1"}, cwd=tmp_path, timeout=1800)
    assert back.returncode == 0 and "byte for byte" in back.stdout, back.stdout[-3000:] + back.stderr[-3000:]
    assert tree_inside(docker_daemon, name) == before
    again = sd("fix", "--rollback", env=env, cwd=tmp_path)
    assert "was already rolled back" in again.stdout
    print(f"\nfix --container session (build, plan x2, apply, rollback): {time.monotonic() - started:.0f} s")

    # the refusals: a read-only mount (exit 4), a stopped container and a gone one (exit 3)
    ro = run_rw_container(docker_daemon, skeleton, "sd-fix-readonly", venv, read_only=True)
    refused = sd("fix", "--container", ro, "--container-python", f"{INSIDE}/bin/python", "--no-kernels", "--yes", env=env, cwd=tmp_path, timeout=900)
    error_line(refused, 4, "read-only file system", f"container {ro}")
    docker_daemon.must("stop", "-t", "1", ro)
    one_line(sd("fix", "--container", ro, env=env, cwd=tmp_path), 3, "the container is exited", "start it first")
    docker_daemon.must("rm", "-f", ro)
    one_line(sd("fix", "--container", ro, env=env, cwd=tmp_path), 3, "no such container")


def test_files_of_a_container_removed_mid_way_are_one_line(docker_daemon, docker_env, skeleton, tmp_path):
    """The transport on a real container; then the container is removed between two calls."""
    from sparkdoctor.targets.container_inspect import resolve_container_target
    from sparkdoctor.targets.files import FileError

    name = docker_daemon.run_container("sd-fix-gone", skeleton, docker_daemon.host_mounts())
    target = resolve_container_target(name)
    files = target.file_transport()
    with files.scratch() as tmp:
        files.write(f"{tmp}/a", b"\x00\xffbytes", 0o640)
        assert files.read(f"{tmp}/a") == b"\x00\xffbytes" and files.info([f"{tmp}/a"])[f"{tmp}/a"]["mode"] == 0o640
        assert files.export([f"{tmp}/a"], tmp_path)[f"{tmp}/a"]["name"] == "0" and (tmp_path / "0").read_bytes() == b"\x00\xffbytes"
        docker_daemon.must("rm", "-f", name)
        with pytest.raises(FileError) as err:
            files.info([f"{tmp}/a"], with_hash=True)
        assert str(err.value).startswith(f"container {name}: ") and "\n" not in str(err.value)
        assert "no such container" in str(err.value).lower(), err.value
    assert os.listdir(tmp_path) == ["0"]
