"""`check --container` without a daemon: bad input is one line and the right exit code, a container
CLI that hangs is killed with its children, and the pieces that travel into a container are whole."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from sparkdoctor import proc
from sparkdoctor.targets.container import MARKER, probe_payload, translate
from sparkdoctor.targets.local import probe_entry


def sd(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], env=env or dict(os.environ), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def one_line(p: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == code, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("sparkdoctor: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _alive_with(token: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if token in cmdline:
            found.append(int(pid))
    return found


def test_a_container_cli_that_hangs_is_one_line_exit_3_and_killed(tmp_path):
    fake_bin = tmp_path / "hanging-cli-bin"
    fake_bin.mkdir()
    token = f"300.{os.getpid()}{time.monotonic_ns() % 100000}"  # a sleep nobody else runs
    (fake_bin / "docker").write_text(f"#!/bin/sh\nsleep {token} & wait\n")
    (fake_bin / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}", "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("SPARKDOCTOR_CONTAINER_CLI", None)
    started = time.monotonic()
    p = sd("check", "--container", "vllm_node", "--timeout", "3", env=env, cwd=tmp_path)
    took = time.monotonic() - started
    one_line(p, 3, "--container vllm_node", "did not answer within", "daemon")
    assert took < 120, f"took {took:.1f}s with --timeout 3"  # not the 300 s hang; room for a loaded machine (was 15)
    # killed processes are polled until they are gone: a loaded machine may not have let them die 0.5 s later
    until = time.monotonic() + 60  # a safety net, far under the hang's 300 s
    while (_alive_with(str(fake_bin / "docker")) or _alive_with(f"sleep {token}")) and time.monotonic() < until:
        time.sleep(0.05)
    assert not _alive_with(str(fake_bin / "docker")), "the hanging container CLI outlived sparkdoctor"
    assert not _alive_with(f"sleep {token}"), "the hanging CLI's child outlived sparkdoctor"


def test_no_container_cli_is_exit_3(tmp_path):
    env = {**os.environ, "SPARKDOCTOR_CONTAINER_CLI": "no-such-container-cli"}
    one_line(sd("check", "--container", "x", env=env, cwd=tmp_path), 3, "SPARKDOCTOR_CONTAINER_CLI=no-such-container-cli")


@pytest.mark.parametrize("args, needle", [
    (["--container", ""], "--container ''"),
    (["--container", "x", "--python", sys.executable], "exclude each other"),
    (["--container-python", "/usr/bin/python3"], "needs --container"),
    (["--container", "x", "--container-python", " "], "--container-python ''"),
    (["--container", "x", "--facts", "snap.json"], "exclude each other"),
])
def test_bad_target_options_are_usage_errors(tmp_path, args, needle):
    one_line(sd("check", *args, cwd=tmp_path), 2, needle)


def test_probe_payload_carries_the_probe_folder_and_shared(tmp_path):
    entry, blob = probe_payload(str(probe_entry("target_env")))
    assert entry == "target_env/__main__.py"
    import base64

    names = zipfile.ZipFile(io.BytesIO(base64.b64decode(blob))).namelist()
    assert "target_env/__main__.py" in names and "shared/probe_io.py" in names
    assert not any(n.startswith("cutedsl/") or "__pycache__" in n for n in names)
    lone = tmp_path / "lone.py"
    lone.write_text("print(1)\n")
    assert probe_payload(str(lone))[0] == "lone.py"


def test_the_flags_probe_travels_with_the_capabilities_folder_it_imports():
    """vllm_flags imports capabilities_files from probes/capabilities/: without it in the payload the probe died in
    every container, and `recipe check --container` judged no flag (tests/container/test_mods_container.py)."""
    import base64

    entry, blob = probe_payload(str(probe_entry("vllm_flags")))
    names = zipfile.ZipFile(io.BytesIO(base64.b64decode(blob))).namelist()
    assert entry == "vllm_flags/__main__.py" and "capabilities/capabilities_files.py" in names, names
    assert "shared/probe_io.py" in names and not any(n.startswith(("target_env/", "cutedsl/")) for n in names)


def test_the_bootstraps_notes_read_like_a_local_process():
    def res(rc, stderr):
        return proc.ProcResult(["docker", "exec"], rc, "{}", stderr, 1.0)

    killed = translate(res(139, f"Traceback...\n{MARKER} signal 11\n"))
    assert killed.returncode == -11 and killed.signal == 11 and MARKER not in killed.stderr
    late = translate(res(124, f"{MARKER} timeout 17.0\n"))
    assert late.timed_out and late.returncode is None and "timed out" in late.describe_failure()
    plain = translate(res(1, "Error response from daemon: Container abc is not running"))
    assert plain.returncode == 1 and "not running" in plain.describe_failure()


def test_host_health_of_a_snapshot_is_never_judged(tmp_path):
    """--facts: a saved box's health is another moment (and maybe another box): shown, not judged."""
    from tests.container.host_fixtures import host_health
    from tests.gb10 import gb10_facts

    snap = tmp_path / "snap.json"
    gb10_facts(host_health=host_health("gb10-strained")).save(snap)
    p = sd("check", "--facts", str(snap), "--format", "json", cwd=tmp_path)
    data = json.loads(p.stdout)
    assert data["facts"]["host_health"]["live"] is False
    assert not [f for f in data["findings"] if f["id"].startswith(("host-", "cx7-", "docker-"))]
    unknown = {u["id"] if isinstance(u, dict) else u for u in data["unknown"]}
    assert {"host-uma-memory-pressure", "cx7-link-slow"} <= unknown, data["unknown"]


def test_a_python_target_runs_commands_here():
    from sparkdoctor.targets.local import PythonTarget

    res = PythonTarget(sys.executable, "--python").run_command(["sh", "-c", "cat; echo $0"], timeout=10, input="in\n")
    assert res.ok and res.stdout == "in\nsh\n"


def test_a_probe_cache_and_its_sidecar_travel_in_and_back(tmp_path):
    """A cache file named in a probe's arguments goes in with the probe (with FILE.files beside it),
    the argument points at the copy, and what the bootstrap sends back lands at the host path."""
    import base64

    from sparkdoctor.targets.container import TMP, ContainerTarget

    root = tmp_path / "containers" / "abc"
    (root / "hashes").mkdir(parents=True)
    cache = root / "hashes" / "h.json"
    cache.write_text('{"old": 1}')
    (root / "hashes" / "h.json.files").write_text("old table\n")
    target = ContainerTarget(["docker"], "c", "/usr/bin/python3", "--container-python", cache_root=root)
    args, files, back = target._carry(["--cache", str(cache), "--other", str(tmp_path / "elsewhere.json")])
    assert args == ["--cache", f"{TMP}/carried/c0", "--other", str(tmp_path / "elsewhere.json")]
    assert {k: base64.b64decode(v) for k, v in files.items()} == {"c0": b'{"old": 1}', "c0.files": b"old table\n"}
    err = "".join(f"\n{MARKER} file {k} {base64.b64encode(v).decode()}\n" for k, v in (("c0", b'{"new": 2}'), ("c0.files", b"new\n")))
    res = translate(proc.ProcResult(["docker"], 0, "{}", "probe said hi" + err, 1.0), back)
    assert res.stderr == "probe said hi" and cache.read_text() == '{"new": 2}'
    assert (root / "hashes" / "h.json.files").read_text() == "new\n"
    translate(proc.ProcResult(["docker"], 0, "", f"{MARKER} file c0 !!notbase64!!\n", 1.0), back)
    assert cache.read_text() == '{"new": 2}'  # a damaged copy is dropped, the old one kept


def test_a_line_of_the_images_own_that_looks_like_a_carried_file_is_dropped(tmp_path):
    """A package or wrapper in the image writes `sparkdoctor-probe: file c0.a/b ...` on stderr: a sidecar name with a
    "/" is no sidecar. Before, Path.with_name raised ValueError and every probe of the run failed with it."""
    import base64

    back = {"c0": tmp_path / "cache" / "h.json"}
    data = base64.b64encode(b'{"x": 1}').decode()
    for forged in ("c0.a/b", "c0.x/../../escaped", "c0./"):
        res = translate(proc.ProcResult(["docker"], 0, "{}", f"probe said hi\n{MARKER} file {forged} {data}\n", 1.0), back)
        assert res.ok and res.stderr == "probe said hi"
    assert not (tmp_path / "cache").exists() and not (tmp_path / "escaped").exists()
