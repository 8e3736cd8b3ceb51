"""`check --container` against real containers of a real dockerd (one per session, tests/container/conftest.py).

The containers are skeletons with the host's /usr (and the test Python's base prefix) mounted read-only
and a real venv mounted at its own path, so `check --python VENV` and `check --container C` look at the
very same files: what one finds, the other must find.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from sparkdoctor.targets.container_inspect import resolve_container_target
from tests import venvs
from tests.container.test_container_cli import one_line, sd

pytestmark = pytest.mark.slow


def check_json(*args: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> dict:
    p = sd("check", *args, "--format", "json", env=env, cwd=cwd, timeout=timeout)
    assert p.returncode in (0, 1), (p.returncode, p.stderr[-3000:])
    return json.loads(p.stdout)


def comparable(report: dict) -> dict:
    facts = report["facts"]
    packages = {name: (p.get("version"), p.get("integrity"), sorted(p.get("files_modified") or []))
                for name, p in (facts["packages"] or {}).items()}
    kernels = {k: v.get("status") for k, v in (facts.get("kernels") or {}).items() if v.get("kind") == "cutedsl"}
    return {
        "packages": packages,
        "cutedsl": (facts.get("cutedsl") or {}).get("active_build"),
        # host health is this moment's (the machine is shared): compared apart, not here
        "findings": sorted(f["id"] for f in report["findings"] if f["component"] != "host"),
        "env": {k: v for k, v in (facts.get("env") or {}).items() if k.startswith(("CUTE_", "VLLM_", "TORCH_"))},
        "capabilities": facts.get("capabilities"),
        "cutedsl_kernels": kernels,
        "python_version": facts["target"].get("version"),
    }


FRESH_DIFF: dict[str, list[str]] = {}  # `docker diff` of each container right after it started (its mount points)


@pytest.fixture(scope="module")
def venv_container(docker_daemon, skeleton, small_venv) -> str:
    name = docker_daemon.run_container("sd-small", skeleton, [*docker_daemon.host_mounts(), (str(small_venv), str(small_venv))])
    FRESH_DIFF[name] = sorted(docker_daemon.must("diff", name).splitlines())
    return name


def test_check_container_finds_what_check_python_finds(docker_env, venv_container, small_venv, tmp_path):
    env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    python = str(small_venv / "bin" / "python")
    local = check_json("--python", python, "--no-kernels", env=env, cwd=tmp_path)
    snap = tmp_path / "container.json"
    inside = check_json("--container", venv_container, "--container-python", python, "--no-kernels", "--save-facts", str(snap),
                        env=env, cwd=tmp_path)
    replayed = check_json("--facts", str(snap), env=env, cwd=tmp_path)  # the snapshot keeps the container's facts
    assert replayed["facts"]["container"] == inside["facts"]["container"] and replayed["fingerprint"] == inside["fingerprint"]
    assert replayed["facts"]["host_health"]["live"] is False
    assert comparable(inside) == comparable(local)
    assert set(comparable(inside)["packages"]) >= {"idna", "packaging"}
    target, container = inside["facts"]["target"], inside["facts"]["container"]
    assert target["kind"] == "container" and target["container"] == venv_container and target["python"] == python
    assert target["chosen_by"] == "--container-python" and target["prefix"] == str(small_venv)
    assert re.fullmatch(r"[0-9a-f]{16}", container["fingerprint"]) and container["image"] == "sparkdoctor-skeleton:1"
    assert container["layers"] and all(layer.startswith("sha256:") for layer in container["layers"])
    assert container["config_digest"] == container["image_id"]
    # host facts are the host's: the skeleton has no /etc/os-release, the host does
    assert inside["facts"]["host"] == local["facts"]["host"]
    assert inside["facts"]["gpus"] == local["facts"]["gpus"] and inside["facts"]["driver"] == local["facts"]["driver"]
    assert inside["facts"]["host_health"]["live"] is True and inside["facts"]["host_health"]["memory"]["total_kib"] > 0
    assert local["facts"]["container"] is None and inside["fingerprint"] != local["fingerprint"]  # the image counts


def test_nothing_is_left_in_the_container(docker_daemon, docker_env, venv_container, small_venv, tmp_path):
    env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    check_json("--container", venv_container, "--container-python", str(small_venv / "bin" / "python"), env=env, cwd=tmp_path)
    left = docker_daemon.must("exec", venv_container, "sh", "-c", "ls -A /tmp /var/tmp /root")
    assert "sparkdoctor" not in left, left
    assert sorted(docker_daemon.must("diff", venv_container).splitlines()) == FRESH_DIFF[venv_container], "a check changed the container's files"


def test_a_probe_past_its_deadline_is_killed_inside_the_container(docker_daemon, docker_env, venv_container, small_venv, tmp_path):
    target = resolve_container_target(venv_container, str(small_venv / "bin" / "python"))
    script = tmp_path / "hang.py"
    token = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    script.write_text(f"import subprocess\nsubprocess.run(['sleep', '500.{token}'])\n")
    res = target.run_script(script, [], timeout=2)
    assert res.timed_out and res.returncode is None
    deadline = time.monotonic() + 120  # a safety net, far under the child's 500 s (it was 15 s: no room for load)
    while time.monotonic() < deadline:
        top = docker_daemon.must("top", venv_container)
        if token not in top:
            break
        time.sleep(0.5)
    assert token not in top, f"the probe's child still runs in the container:\n{top}"



def test_an_interpreter_hung_before_its_bootstrap_leaves_nothing_in_the_container(docker_daemon, docker_env, skeleton, tmp_path):
    """`check --container` with an interpreter that answers its version and hangs before it reads a probe's bootstrap:
    each probe is one line of the report, and no `sleep` is left in the container (three were, one per probe)."""
    token = f"36{os.getpid() % 1000}{time.monotonic_ns() % 1000}"
    folder = tmp_path / "hang"
    folder.mkdir()
    (folder / "python").write_text(f'#!/bin/sh\ncase "$*" in *zipfile*) exec sleep {token};; esac\nexec /usr/bin/python3 "$@"\n')
    (folder / "python").chmod(0o755)
    name = docker_daemon.run_container("hung-bootstrap", skeleton, [*docker_daemon.host_mounts(), (str(folder), "/hang")])
    try:
        env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
        p = sd("check", "--container", name, "--container-python", "/hang/python", "--arch", "sm_121a", "--no-kernels",
               "--timeout", "20", env=env, cwd=tmp_path, timeout=120)
        assert p.returncode == 3 and "probe target_env in /hang/python: docker timed out after" in p.stderr, p.stderr[-2000:]
        top = docker_daemon.must("top", name)
        assert token not in top, f"the hung interpreter still runs in the container:\n{top}"
    finally:
        docker_daemon.docker("rm", "-f", name, timeout=60)


def test_the_interpreter_holding_vllm_is_found(docker_daemon, docker_env, skeleton, tmp_path_factory, small_venv):
    serving = tmp_path_factory.mktemp("serving-venv")
    shutil.copytree(small_venv, serving, symlinks=True, dirs_exist_ok=True)
    site = next(serving.glob("lib/python3*/site-packages"))
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("__version__ = '0.0.0'\n")  # found by find_spec, never imported
    # the image's start-up code: asking each interpreter whether it holds vLLM ran both (it started with site)
    (site / "zz-hook.pth").write_text("import os; open('/opt/serving/ran-pth', 'w').close()\n")
    (site / "sitecustomize.py").write_text("open('/opt/serving/ran-sitecustomize', 'w').close()\n")
    name = docker_daemon.run_container("sd-serving", skeleton, [*docker_daemon.host_mounts(), (str(serving), "/opt/serving")])
    target = resolve_container_target(name)
    assert target.python == "/opt/serving/bin/python" and target.chosen_by == "vLLM found in the container"
    assert not (serving / "ran-pth").exists() and not (serving / "ran-sitecustomize").exists()
    plain = docker_daemon.run_container("sd-plain", skeleton, docker_daemon.host_mounts())
    found = resolve_container_target(plain)
    assert found.chosen_by.startswith("the container's first Python") and found.python.endswith("python3")


def test_missing_stopped_and_pythonless_containers_exit_3(docker_daemon, docker_env, skeleton, tmp_path):
    env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    one_line(sd("check", "--container", "sd-no-such-container", env=env, cwd=tmp_path), 3, "no such container")
    # a name that reads as an option is a name: before, docker printed its help and the line said "no inspect record"
    one_line(sd("check", "--container=--help", env=env, cwd=tmp_path), 3, "--container --help: no such container")
    stopped = docker_daemon.run_container("sd-stopped", skeleton, docker_daemon.host_mounts())
    docker_daemon.must("stop", stopped)
    one_line(sd("check", "--container", stopped, env=env, cwd=tmp_path), 3, "the container is exited", "start it first")
    bare = _bare_usr(tmp_path / "bare-usr")
    nopy = docker_daemon.run_container("sd-nopython", skeleton, [(str(bare), "/usr")])
    one_line(sd("check", "--container", nopy, env=env, cwd=tmp_path), 3, "no Python interpreter found", "--container-python")
    one_line(sd("check", "--container", nopy, "--container-python", "/usr/bin/python3", env=env, cwd=tmp_path), 3,
             "--container-python /usr/bin/python3", "not runnable")


def _bare_usr(root: Path) -> Path:
    """A /usr with a shell and sleep and the libraries they load: a container without any Python."""
    libs: set[str] = set()
    for tool in ("sh", "sleep"):
        real = os.path.realpath(shutil.which(tool))  # type: ignore[arg-type]
        dest = root / "bin" / tool
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(real, dest)
        out = subprocess.run(["ldd", real], capture_output=True, text=True, timeout=20).stdout
        libs.update(m for m in re.findall(r"(/\S+)", out))
    for lib in libs:
        dest = root / os.path.relpath(lib if not lib.startswith("/usr/") else lib[len("/usr"):], "/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(lib), dest)
    return root


@pytest.fixture(scope="module")
def cutedsl_venv() -> Path:
    """nvidia-cutlass-dsl 4.5.0 as plain pip installs it: the libs-base build, the one with the _mma bug."""
    return venvs.uv_venv("container-cutedsl-450", [["nvidia-cutlass-dsl==4.5.0"]]).parent.parent


def test_real_cutedsl_450_inside_a_container(docker_daemon, docker_env, skeleton, cutedsl_venv, tmp_path):
    """The real case: the same venv probed locally and inside a container gives the same packages, the
    same libs-base build, the same CuTe DSL compile results (the probe compiles inside the container)
    and the same findings; the PTX probes compile with the ptxas the container sees."""
    name = docker_daemon.run_container("sd-cutedsl", skeleton, [*docker_daemon.host_mounts(), (str(cutedsl_venv), str(cutedsl_venv))])
    env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    python = str(cutedsl_venv / "bin" / "python")
    local = check_json("--python", python, "--arch", "sm_121a", "--no-cache", env=env, cwd=tmp_path)
    inside = check_json("--container", name, "--container-python", python, "--arch", "sm_121a", env=env, cwd=tmp_path)
    assert comparable(inside) == comparable(local)
    assert comparable(inside)["cutedsl"] == "libs-base"
    assert "cutedsl-450-libs-base-mma" in comparable(inside)["findings"]
    kernels = inside["facts"]["kernels"]
    assert kernels["cutedsl-nvfp4-mma"]["status"] not in ("skipped", "error"), kernels["cutedsl-nvfp4-mma"]
    ptxas = [t for t in inside["facts"]["toolkits"] if not t.get("error")]
    assert all(t.get("where") == "container" for t in inside["facts"]["toolkits"])
    host_ptxas = {t["realpath"] for t in local["facts"]["toolkits"] if not t.get("error") and t["realpath"].startswith("/usr/")}
    assert host_ptxas <= {t["realpath"] for t in ptxas}  # the container sees the host's /usr: the same ptxas there
    if ptxas:
        assert kernels["e2m1-cvt"]["status"] in ("ok", "fail"), kernels["e2m1-cvt"]
        assert all(r["ptxas"] in {p for t in ptxas for p in t["paths"]} for r in kernels["e2m1-cvt"]["runs"])
    # the probes' caches went out of the container into its own host folder, and come back in: warm
    assert list((tmp_path / "cache" / "containers").glob("*/hashes/*.json"))
    again = check_json("--container", name, "--container-python", python, "--arch", "sm_121a", env=env, cwd=tmp_path)
    assert comparable(again) == comparable(inside)
    assert again["facts"]["kernels"]["cutedsl-nvfp4-mma"]["cached"] is True
    assert again["facts"]["timings_ms"]["cutedsl"] < inside["facts"]["timings_ms"]["cutedsl"] / 2


def test_a_daemon_leaves_nothing_behind(skeleton):
    """What the session's daemon does at the end, done here on a second one and checked: no process,
    no mount, no link, no firewall rule of it is left (and the session's daemon is not disturbed)."""
    from tests.container.docker_daemon import _machine_state, short_root, start_daemon

    before = _machine_state()
    root = short_root("sd-d2-")  # containerd's sockets live under it (a test's tmp_path is too long)
    try:
        daemon = start_daemon(root)
        daemon.import_skeleton("sd-cleanup:1")
        daemon.run_container("sd-cleanup", "sd-cleanup:1", daemon.host_mounts())
        daemon.stop()
        from tests.container.test_container_cli import _alive_with

        assert not _alive_with(str(root)), "a process of the stopped daemon is still alive"
        assert str(root) not in Path("/proc/self/mounts").read_text()
        assert _machine_state() == before
        assert not root.exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_no_pth_import_line_nor_sitecustomize_runs_in_the_container(docker_daemon, docker_env, skeleton, tmp_path):
    """As on the host (tests/test_probes_no_site_code.py): the bootstrap and the probes start the container's
    interpreter with -S, so a venv's .pth import line and sitecustomize.py (which wrote into the container's /tmp
    here) never run; the packages a .pth path line adds are still seen."""
    import sys

    venv = tmp_path / "planted-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "evil.pth").write_text("import os; open('/tmp/pth-ran', 'w').write('x')\n")
    (site / "sitecustomize.py").write_text("open('/tmp/sitecustomize-ran', 'w').write('x')\n")
    extra = tmp_path / "extra"
    (extra / "path_line_dist-1.2.3.dist-info").mkdir(parents=True)
    (extra / "path_line_dist-1.2.3.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: path-line-dist\nVersion: 1.2.3\n")
    (site / "extra.pth").write_text(f"{extra}\n")
    name = docker_daemon.run_container("sd-planted", skeleton, [*docker_daemon.host_mounts(), (str(tmp_path), str(tmp_path))])
    env = {**docker_env, "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    report = check_json("--container", name, "--container-python", str(venv / "bin" / "python"), "--no-kernels",
                        env=env, cwd=tmp_path)
    assert (report["facts"]["packages"] or {}).get("path-line-dist", {}).get("version") == "1.2.3", report["facts"]["packages"]
    left = docker_daemon.must("exec", name, "sh", "-c", "ls -A /tmp")
    assert "pth-ran" not in left and "sitecustomize-ran" not in left, left
