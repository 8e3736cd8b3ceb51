"""Host health: the readers on real-shaped /proc, /sys and /etc trees, the live machine, the whole
check under SPARKDOCTOR_HOST_ROOT, and NVML's health readings (a GB10-like stand-in with pynvml's
real error classes: no GPU here; the real call runs in the GPU-marked test)."""

from __future__ import annotations

import json
import os
import shutil
import types
from pathlib import Path

import pynvml
import pytest

from sparkdoctor.collect import gpu_health, gpu_query, host_health
from sparkdoctor.collect.hostroot import is_live_root
from sparkdoctor.facts import Facts
from tests.container.host_fixtures import HOSTROOTS
from tests.container.test_container_cli import sd

GiB = 1048576


def test_strained_tree_readings():
    h = host_health.observe(HOSTROOTS / "gb10-strained")
    assert h["memory"]["available_kib"] == 5 * GiB and h["memory"]["swap_used_kib"] == 6 * GiB
    assert h["memory"]["reclaimable_kib"] > 40 * GiB
    assert h["pressure"]["some_avg10"] == 23.51 and h["pressure"]["full_avg60"] == 6.1
    assert h["docker"]["runtimes"] == [] and h["docker"]["nvidia_cdi"] is False and h["docker"]["nvidia_runtime_binary"] is False
    cx7 = [link for link in h["links"] if link["driver"] == "mlx5_core"]
    assert cx7 == [{"name": "enp1s0f0np0", "kind": "net", "driver": "mlx5_core", "state": "up", "speed_mbps": 25000, "mtu": 1500}]
    assert not h["errors"]


def test_healthy_tree_readings():
    h = host_health.observe(HOSTROOTS / "gb10-healthy")
    assert h["docker"]["runtimes"] == ["nvidia"] and h["docker"]["default_runtime"] == "nvidia" and h["docker"]["nvidia_cdi"]
    down = [link for link in h["links"] if link["state"] == "down" and link["kind"] == "net"]
    assert down and all(link["speed_mbps"] is None for link in down)  # "-1" in speed: a link that is down has none
    assert {"lo"}.isdisjoint(link["name"] for link in h["links"])
    ib = [link for link in h["links"] if link["kind"] == "infiniband"]
    assert {(link["name"], link["state"], link["speed_mbps"]) for link in ib} >= {("rocep1s0f0", "active", 100000)}


def test_a_missing_tree_is_unknown_not_a_crash(tmp_path):
    h = host_health.observe(tmp_path)
    assert h["memory"] is None and h["pressure"] is None and h["links"] is None and h["docker"] is None
    assert any("meminfo" in e for e in h["errors"])


def test_odd_files_cost_only_their_part(tmp_path):
    root = tmp_path / "odd"
    shutil.copytree(HOSTROOTS / "gb10-strained", root, symlinks=True)
    (root / "proc/pressure/memory").write_text("some avg10=NaNx avg60=" + "9" * 5000 + "\n")
    (root / "etc/docker/daemon.json").write_text("[1, 2")
    os.mkfifo(root / "sys/class/net/enp1s0f0np0/mtu.fifo")
    (root / "sys/class/net/enp1s0f0np0/mtu").unlink()
    os.symlink("mtu.fifo", root / "sys/class/net/enp1s0f0np0/mtu")  # a FIFO where a number should be
    h = host_health.observe(root)
    assert h["pressure"] == {"some_avg10": None, "some_avg60": None}
    assert h["docker"]["error"] == "/etc/docker/daemon.json is not a JSON object"
    assert next(link for link in h["links"] if link["name"] == "enp1s0f0np0")["mtu"] is None
    assert h["memory"]["available_kib"] == 5 * GiB
    Facts.from_dict({"schema": 1, "host_health": h})  # the documented shape


def test_the_live_machine():
    assert is_live_root() or os.environ.get("SPARKDOCTOR_HOST_ROOT")
    h = host_health.observe(Path("/"))
    total = int(next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")).split()[1])
    assert h["memory"]["total_kib"] == total and 0 < h["memory"]["available_kib"] <= total
    if Path("/proc/pressure/memory").exists():
        assert isinstance(h["pressure"]["some_avg10"], float)
    assert isinstance(h["links"], list)
    assert h["kernel"] is None or set(h["kernel"]) == {"nvrm_no_memory", "xids", "oom_kills", "oom_kills_cgroup", "hung_tasks"}


def test_check_under_a_host_root_judges_its_tree(tmp_path):
    env = {**os.environ, "SPARKDOCTOR_HOST_ROOT": str(HOSTROOTS / "gb10-strained"), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "c")}
    p = sd("check", "--no-kernels", "--arch", "sm_121a", "--format", "json", env=env, cwd=tmp_path)
    data = json.loads(p.stdout)
    found = {f["id"] for f in data["findings"]}
    assert {"host-uma-memory-pressure", "host-uma-low-available", "host-swap-in-use", "host-page-cache-holds-memory",
            "cx7-link-slow", "cx7-mtu-below-9000", "gb10-driver-out-of-unified-memory", "host-oom-killer-fired",
            "host-hung-tasks"} <= found, found
    health = data["facts"]["host_health"]
    assert health["live"] is True and health["gpus"] is None  # a tree has no NVML: this machine's GPU is not its GPU
    assert data["facts"]["host"]["os"] == "Ubuntu 24.04.3 LTS" or data["facts"]["target"]["kind"] == "python"
    near = {**env, "SPARKDOCTOR_HOST_ROOT": str(HOSTROOTS / "gb10-near")}
    data = json.loads(sd("check", "--no-kernels", "--arch", "sm_121a", "--format", "json", env=near, cwd=tmp_path).stdout)
    assert not [f["id"] for f in data["findings"] if f["component"] == "host"]


UNIFIED = {"host-uma-memory-pressure", "host-uma-low-available", "host-swap-in-use", "host-page-cache-holds-memory",
           "gb10-driver-out-of-unified-memory"}


def test_a_builder_without_a_gb10_is_not_judged_as_unified_memory(tmp_path):
    """The strained tree's memory on a box whose PCI bus has no GB10 (a CI builder checking an env for the Spark with
    --arch sm_121a): its memory is not a GPU's, so the unified-memory entries do not match (no false alarm on the
    gate); the OOM killer's kill still counts. With no PCI bus to read at all, they are unknown, never clear."""
    builder = tmp_path / "builder"
    shutil.copytree(HOSTROOTS / "gb10-strained", builder, symlinks=True)
    gb10 = builder / "sys/bus/pci/devices/000f:01:00.0"
    assert (gb10 / "device").read_text().strip() == "0x2e12"
    gb10.unlink()
    assert host_health.observe(builder)["memory"]["unified"] is False
    env = {**os.environ, "SPARKDOCTOR_HOST_ROOT": str(builder), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "c")}
    data = json.loads(sd("check", "--no-kernels", "--arch", "sm_121a", "--strict", "--format", "json", env=env, cwd=tmp_path).stdout)
    found = {f["id"] for f in data["findings"]}
    assert not UNIFIED & found and "host-oom-killer-fired" in found, found
    assert not UNIFIED & {u["id"] for u in data["unknown"]}, data["unknown"]

    shutil.rmtree(builder / "sys/bus")
    assert host_health.observe(builder)["memory"]["unified"] is None
    data = json.loads(sd("check", "--no-kernels", "--arch", "sm_121a", "--format", "json", env=env, cwd=tmp_path).stdout)
    assert UNIFIED <= {u["id"] for u in data["unknown"]} and not UNIFIED & {f["id"] for f in data["findings"]}, data["unknown"]


# ---- NVML health readings -----------------------------------------------------------------------------------

def gb10_nvml(processes: list, mask: int = 0x1, memory_supported: bool = False):
    mod = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVMLError", "NVML_")):
            setattr(mod, name, getattr(pynvml, name))

    def not_supported(*_):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    clocks = {pynvml.NVML_CLOCK_GRAPHICS: 2405, pynvml.NVML_CLOCK_SM: 2405}
    mod.nvmlInit = mod.nvmlShutdown = lambda: None
    mod.nvmlDeviceGetCount = lambda: 1
    mod.nvmlDeviceGetHandleByIndex = lambda i: i
    mod.nvmlDeviceGetClockInfo = lambda h, kind: clocks[kind] if kind in clocks else not_supported()
    mod.nvmlDeviceGetMaxClockInfo = lambda h, kind: 3003
    mod.nvmlDeviceGetPowerUsage = lambda h: 14213
    mod.nvmlDeviceGetEnforcedPowerLimit = not_supported
    mod.nvmlDeviceGetPerformanceState = lambda h: 0
    mod.nvmlDeviceGetTemperature = lambda h, kind: 57
    mod.nvmlDeviceGetCurrentClocksEventReasons = lambda h: mask
    mod.nvmlDeviceGetMemoryInfo = (lambda h: types.SimpleNamespace(used=2 * 1024**3)) if memory_supported else not_supported
    mod.nvmlDeviceGetComputeRunningProcesses = lambda h: processes
    return mod


def test_gb10_health_readings_keep_na_as_none():
    procs = [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=None),  # pynvml's N/A
             types.SimpleNamespace(pid=1, usedGpuMemory=(1 << 64) - 1),  # NVML_VALUE_NOT_AVAILABLE, raw
             types.SimpleNamespace(pid=2, usedGpuMemory=3 * 1024**3)]
    answer = gpu_query.health_answer(gb10_nvml(procs, mask=0x44))
    gpus, problem = gpu_health.interpret(json.loads(json.dumps(answer)))
    assert problem is None
    g = gpus[0]
    assert g["memory_used_mib"] is None and g["power_limit_w"] is None and g["clock_memory_mhz"] is None
    assert (g["clock_graphics_mhz"], g["power_w"], g["temperature_c"], g["pstate"]) == (2405, 14.2, 57, 0)
    assert g["throttle_reasons"] == ["sw_power_cap", "hw_thermal_slowdown"] and g["clocks_locked"] is False
    assert [p["used_mib"] for p in g["processes"]] == [None, None, 3072] and g["compute_processes"] == 3
    assert g["processes"][0]["name"] == Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    Facts.from_dict({"schema": 1, "host_health": {"live": True, "gpus": gpus}})


def test_nvml_health_without_a_driver_and_when_it_fails():
    assert gpu_health.interpret({"stage": "health", "missing": "NVML not available"}) == ([], None)
    assert gpu_health.interpret({"stage": "health", "failed": "NVML init: Driver Not Loaded"}) == (
        None, "NVML health readings: NVML init: Driver Not Loaded")
    gpus, problem = gpu_health.read()  # the real helper process on this machine
    assert (gpus == [] and problem is None) or gpus or problem


@pytest.mark.gpu
def test_real_nvml_health_readings(monkeypatch):
    monkeypatch.setattr(gpu_health, "HEALTH_TIMEOUT", 600.0)  # its 8 s is wall-clock: the helper must not lose to load
    gpus, problem = gpu_health.read()
    assert problem is None and gpus, problem
    g = gpus[0]
    assert isinstance(g["clock_graphics_mhz"], int) and isinstance(g["temperature_c"], int)
    assert isinstance(g["throttle_reasons"], list) and isinstance(g["compute_processes"], int)
