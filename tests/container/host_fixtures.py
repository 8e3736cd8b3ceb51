"""Host health Facts for tests, read by the real reader from real-shaped /proc, /sys and /etc trees
(tests/data/hostroots/), plus NVML GPU readings (NVML has no file tree: they are plain data, shaped
like collect/gpu_query.py's answer).

- gb10-healthy: a Spark serving one model (the baseline of tests/gb10.py);
- gb10-near: every reading just on the good side of its host.toml threshold (near misses);
- gb10-strained: the triggers (little memory, pressure, swap, page cache, docker without the NVIDIA
  runtime, a ConnectX-7 twin at 25G with MTU 1500, a kernel log (dev/kmsg) with NV_ERR_NO_MEMORY, an OOM
  kill and a hung task in the kernel's own line formats; gb10-near's has the OOM killer's reaper lines but
  no kill).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from sparkdoctor.collect.host_health import observe

HOSTROOTS = Path(__file__).resolve().parent.parent / "data" / "hostroots"

HEALTHY_GPU: dict[str, Any] = {
    "index": 0, "clock_graphics_mhz": 2405, "clock_sm_mhz": 2405, "clock_memory_mhz": None, "clock_graphics_max_mhz": 3003,
    "power_w": 38.4, "power_limit_w": None, "pstate": 0, "temperature_c": 54, "throttle_mask": 0, "throttle_reasons": [],
    "clocks_locked": False, "memory_used_mib": None, "compute_processes": 1,
    "processes": [{"pid": 4242, "name": "python3", "used_mib": 92160}],
}


def host_health(tree: str = "gb10-healthy", **gpu: Any) -> dict[str, Any]:
    """observe() of a fixture tree, with one GPU: HEALTHY_GPU updated by `gpu`, and a journal read with no kill of the
    user-space OOM killers in it (the journal, like NVML, has no file tree: observe() reads it on the real root only)."""
    health = observe(HOSTROOTS / tree)
    health["oom_daemons"] = {"earlyoom_kills": 0, "oomd_kills": 0}
    health["root"] = f"tests/data/hostroots/{tree}"
    health["gpus"] = [{**copy.deepcopy(HEALTHY_GPU), **gpu}]
    return health


def hh(tree: str = "gb10-healthy", **gpu: Any) -> dict[str, Any]:
    """A gb10_facts() change: dict(host_health=...)."""
    return {"host_health": host_health(tree, **gpu)}


# entry id -> (trigger, near miss), as changes for tests/gb10.py's gb10_facts()
HOST_CASES: dict[str, tuple[dict, dict]] = {
    "host-uma-memory-pressure": (hh("gb10-strained"), hh("gb10-near")),
    "host-uma-low-available": (hh("gb10-strained"), hh("gb10-near")),
    "host-swap-in-use": (hh("gb10-strained"), hh("gb10-near")),
    "host-page-cache-holds-memory": (hh("gb10-strained"), hh("gb10-near")),
    "gb10-driver-out-of-unified-memory": (hh("gb10-strained"), hh("gb10-near")),
    "host-oom-killer-fired": (hh("gb10-strained"), hh("gb10-near")),
    "host-hung-tasks": (hh("gb10-strained"), hh("gb10-near")),
    "gpu-throttled-thermal-or-power": (
        hh(throttle_reasons=["sw_power_cap", "hw_thermal_slowdown"], throttle_mask=0x44),
        hh(throttle_reasons=["gpu_idle", "sw_power_cap"], throttle_mask=0x5),
    ),
    "gpu-clocks-capped": (
        hh(throttle_reasons=["applications_clocks_setting"], throttle_mask=0x2, clocks_locked=True),
        hh(throttle_reasons=["sw_power_cap"], throttle_mask=0x4, clocks_locked=False),
    ),
    "gpu-stuck-low-power": (
        hh(clock_graphics_mhz=208, power_w=14.2, pstate=8),
        hh(clock_graphics_mhz=208, power_w=4.1, pstate=8, throttle_reasons=["gpu_idle"], throttle_mask=0x1),
    ),
    "gpu-several-heavy-processes": (
        hh(compute_processes=2, processes=[{"pid": 4242, "name": "python3", "used_mib": 92160},
                                           {"pid": 5151, "name": "llama-server", "used_mib": None}]),
        hh(compute_processes=1),
    ),
    "gpu-hot": (hh(temperature_c=86), hh(temperature_c=84)),
    "docker-no-nvidia-runtime": (hh("gb10-strained"), hh("gb10-near")),
    "cx7-link-slow": (hh("gb10-strained"), hh("gb10-near")),
    "cx7-mtu-below-9000": (hh("gb10-strained"), hh("gb10-near")),
}
