"""The `host_health` condition: judgements of the live box's health (memory, pressure, GPU clocks and
power, docker's runtime, network links, the kernel log's memory events), written as data in matrix/host.toml.

    when.host_health = { "pressure.some_avg10" = ">=10" }
    when.host_health = { "link.driver" = "mlx5_core", "link.state" = "up", "link.mtu" = "<9000" }

A key names one reading; its value is a comparison for numbers (">=10", "<8388608", "==0"), true or
false, or a string / list of strings (equal to one of them; for a list reading such as
gpu.throttle_reasons: holds one of them). All `gpu.*` tests must hold for one GPU, all `link.*`
tests for one link. A snapshot's health (live = false) is never judged: unknown, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.conditions.serving import COMPARE
from sparkdoctor.matrix.model import Check

READINGS = {
    "memory": ("total_kib", "available_kib", "available_pct", "swap_total_kib", "swap_used_kib", "page_cache_kib",
               "reclaimable_kib", "unified"),  # unified: a GB10 on the PCI bus (its GPU allocates from this memory)
    "pressure": ("some_avg10", "some_avg60", "some_avg300", "full_avg10", "full_avg60", "full_avg300"),
    "gpu": ("index", "clock_graphics_mhz", "clock_sm_mhz", "clock_memory_mhz", "clock_graphics_max_mhz", "power_w", "power_limit_w",
            "pstate", "temperature_c", "throttle_reasons", "clocks_locked", "idle", "compute_processes", "memory_used_mib"),
    "docker": ("nvidia_runtime", "default_runtime", "nvidia_cdi", "nvidia_runtime_binary"),
    "link": ("name", "kind", "driver", "state", "speed_mbps", "mtu"),
    "kernel": ("nvrm_no_memory", "xids", "oom_kills", "oom_kills_cgroup", "hung_tasks"),  # events in the kernel log since boot
    "oom_daemons": ("earlyoom_kills", "oomd_kills"),  # the user-space OOM killers' kills in this boot's journal
}
_UNIFIED_SAID = {True: "memory unified with the GPU (a GB10, PCI 10de:2e12, on the bus)",
                 False: "no GB10 on the PCI bus: no GPU shares this memory",
                 None: "whether a GB10 is on the PCI bus is unknown (the bus was not read)"}
GROUPS = {"gpu": "gpus", "link": "links"}  # one element must satisfy every test of its group
_CMP = re.compile(r"^(<=|>=|==|!=|<|>)\s*(-?\d{1,15}(?:\.\d{1,6})?)$")


def v_host_health(value: object) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of \"reading\" = test (e.g. \"pressure.some_avg10\" = \">=10\")"
    for key, test in value.items():
        part, _, name = str(key).partition(".")
        if name not in READINGS.get(part, ()):
            known = ", ".join(f"{p}.{n}" for p, names in READINGS.items() for n in names)
            return f"{key!r}: not a host reading (one of {known})"
        if isinstance(test, bool):
            continue
        if isinstance(test, str) and test[:1] in "<>=!":
            if not _CMP.match(test):
                return f"{key}: {test!r} is not a comparison such as \">=10\""
            continue
        if isinstance(test, str) or (isinstance(test, list) and test and all(isinstance(t, str) for t in test)):
            continue
        return f"{key}: must be a comparison string, true/false, a string or a list of strings"
    return None


def _holds(test: Any, got: object) -> bool | None:
    """Whether one reading passes one test; None when the reading is unknown."""
    if got is None:
        return None
    if isinstance(test, bool):
        return got is test if isinstance(got, bool) else None
    if isinstance(test, str) and test[:1] in "<>=!":
        compared = _CMP.match(test)
        assert compared is not None, "validated at load"
        op, number = compared.groups()
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return None
        return COMPARE[op](got, float(number))
    options = [test] if isinstance(test, str) else list(test)
    if isinstance(got, list):
        return any(str(g) in options for g in got)
    return str(got) in options


def _reading(part: str, name: str, record: Mapping[str, object]) -> Any:
    if part == "memory" and name == "available_pct":
        total, avail = record.get("total_kib"), record.get("available_kib")
        try:
            return round(100 * avail / total, 1) if isinstance(total, (int, float)) and total and isinstance(avail, (int, float)) else None
        except (OverflowError, ValueError):  # a snapshot's 5,000-digit "kB" is no reading
            return None
    if part == "gpu" and name == "idle":
        reasons = record.get("throttle_reasons")
        return "gpu_idle" in reasons if isinstance(reasons, list) else None
    if part == "docker" and name == "nvidia_runtime":
        runtimes = record.get("runtimes")
        return "nvidia" in runtimes or record.get("default_runtime") == "nvidia" if isinstance(runtimes, list) else None
    return record.get(name)


def _in_gib(key: str, value: object) -> str:
    """A *_kib reading or threshold as people read it: 16963900 -> "16.2 GiB", ">=16777216" -> ">= 16.0 GiB"."""
    if not key.endswith("_kib"):
        return _shown(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return f"{value / 1048576:.1f} GiB"
        except OverflowError:
            return "a number too large to be a reading"
    match = _CMP.match(value) if isinstance(value, str) else None
    return f"{match.group(1)} {float(match.group(2)) / 1048576:.1f} GiB" if match else _shown(value)


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _group(part: str, tests: Mapping[str, object], items: object) -> Check:
    what = "GPU" if part == "gpu" else "link"
    wanted = "; ".join(f"{k} {_shown(v)}" for k, v in tests.items())
    if items is None:
        return Check("host_health", None, f"{what} health unknown (needs {wanted})")
    unknown = False
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        results = [_holds(test, _reading(part, key.split(".", 1)[1], item)) for key, test in tests.items()]
        if all(results):
            label = item.get("name") or f"GPU {item.get('index', '?')}"
            seen = ", ".join(f"{k.split('.', 1)[1]} {_shown(_reading(part, k.split('.', 1)[1], item))}" for k in tests)
            return Check("host_health", True, f"{label}: {seen}")
        if False not in results:
            unknown = True
    if unknown:
        return Check("host_health", None, f"{what} readings incomplete (needs {wanted})")
    return Check("host_health", False, f"no {what} with {wanted}")


def eval_host_health(value: Mapping[str, object], facts: Facts) -> list[Check]:
    health = facts.host_health
    if not isinstance(health, dict):
        return [Check("host_health", None, "host health not observed")]
    if not health.get("live", False):
        return [Check("host_health", None, "host health from a snapshot: judged on the live box only")]
    out: list[Check] = []
    grouped: dict[str, dict[str, object]] = {}
    for key, test in value.items():
        part, name = key.split(".", 1)
        if part in GROUPS:
            grouped.setdefault(part, {})[key] = test
            continue
        record = health.get(part)
        if part == "docker" and record is None and health.get("memory") is not None:
            out.append(Check("host_health", False, "docker is not installed"))
            continue
        got = _reading(part, name, record) if isinstance(record, dict) else None
        ok = _holds(test, got)
        if key == "memory.unified":
            out.append(Check("host_health", ok, _UNIFIED_SAID[got if isinstance(got, bool) else None]))
            continue
        shown = "unknown" if got is None else _in_gib(key, got)
        out.append(Check("host_health", ok, f"{key} = {shown} (entry: {_in_gib(key, test)})"))
    return out + [_group(part, tests, health.get(GROUPS[part])) for part, tests in grouped.items()]
