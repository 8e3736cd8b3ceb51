"""The GPU side of host health: NVML's live readings (clocks, power, P-state, temperature, throttle
reasons, compute processes), asked by the same child process as the GPU collector's
(collect/gpu_query.py --health), so a driver library that hangs or crashes is one line of evidence.

GB10 reports its memory as not supported: memory_used_mib is then None, never a number parsed from
"[N/A]"; the host's /proc/meminfo is the memory source (collect/host_health.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from sparkdoctor import proc
from sparkdoctor.collect.gpu import HELPER, stage_records, take_early

HEALTH_TIMEOUT = 8.0
MAX_PROCESSES = 64


def read() -> tuple[list[dict[str, Any]] | None, str | None]:
    """(per-GPU readings, None) | ([], None) without NVML | (None, why) when NVML did not answer.

    Reads the prestarted GPU helper's health stage when `check` started one (collect/gpu.py), else
    asks a helper of its own."""
    res = take_early("health")
    if res is None:
        res = proc.run([sys.executable, "-I", "-B", str(HELPER), "--health"], timeout=HEALTH_TIMEOUT,
                       env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    records, problem = stage_records(res, {"health": "the GPU query helper"})
    answer = records.get("health")
    if answer is None:
        return None, f"NVML health readings: {problem or 'the GPU query helper gave no answer'}"
    return interpret(answer)


def interpret(answer: Mapping[str, object]) -> tuple[list[dict[str, Any]] | None, str | None]:
    if "missing" in answer:
        return [], None  # no NVIDIA driver: nothing to read, not a failure
    if "failed" in answer:
        return None, f"NVML health readings: {answer['failed']}"
    gpus = answer.get("gpus")
    if not isinstance(gpus, list):
        return None, "NVML health readings: the helper answered in an unexpected shape"
    out = []
    for gpu in gpus:
        if not isinstance(gpu, dict):
            continue
        gpu = dict(gpu)
        procs = gpu.get("processes")
        if isinstance(procs, list):
            gpu["processes"] = procs[:MAX_PROCESSES]
            gpu["compute_processes"] = len(procs)
        out.append(gpu)
    return out, None
