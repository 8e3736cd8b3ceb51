"""GPUs and the NVIDIA driver, observed for the host (the GPU is the host's, not the venv's).

Order of evidence: NVML (nvidia-ml-py), then `nvidia-smi` with a short timeout (it can hang), then
libcuda's cuDriverGetVersion (needs no cuInit, so no GPU). A box with none of the three has no GPU:
that is a normal state (gpus=[], driver={}), not an error. A driver that is there but does not answer
is unknown (gpus stays None) and the reason lands in facts.errors.

NVML and libcuda are never loaded into the sparkdoctor process: a driver library that segfaults or
hangs would take the whole check with it. They are asked by a child (collect/gpu_query.py, run with
this interpreter, -I, a timeout), so a crash or a hang becomes one line of evidence. The access
functions (`query_libraries`, `smi_query`) are module-level so tests can swap them; everything else
works on their plain-data results.
"""

from __future__ import annotations

import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.arch import assumed
from sparkdoctor.collect import Collector, CollectorError, Context
from sparkdoctor.inputs import NUMBER_TOO_LONG, json_lines
from sparkdoctor.targets import early

SMI_TIMEOUT = 5.0
SMI_QUERY = ["--query-gpu=index,name,compute_cap,memory.total,driver_version", "--format=csv,noheader,nounits"]
HELPER = Path(__file__).with_name("gpu_query.py")
HELPER_TIMEOUT = 5.0
STAGE_NAMES = {"nvml": "NVML", "libcuda": "libcuda (cuDriverGetVersion)"}


class Missing(Exception):
    """The access path does not exist on this machine (no library, no binary)."""


class Failed(Exception):
    """The access path exists but did not answer; the message is one line saying why."""


@dataclass
class Observation:
    gpus: list[dict[str, object]]
    driver: dict[str, object] = field(default_factory=dict)


def arch_of(cc: str) -> str | None:
    """"12.1" -> "sm_121a": from Hopper on, arch-specific features need the `a` target."""
    parts = cc.split(".")
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 3 for p in parts):
        return None
    major, minor = (int(x) for x in parts)
    return f"sm_{major}{minor}a" if major >= 9 else f"sm_{major}{minor}"


def cuda_version_of(encoded: int) -> str:
    """The driver API's integer (13000) as the CUDA version people write (13.0)."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


# ---- NVML and libcuda, in a child process ------------------------------------------------------------
@dataclass
class Libraries:
    """What the driver libraries said: NVML's observation (or why there is none), libcuda's CUDA version,
    and one line for each library that crashed or hung the helper."""

    nvml: Observation | Missing | Failed
    libcuda: str | None = None
    problems: list[str] = field(default_factory=list)


def query_libraries() -> Libraries:
    """Ask NVML and libcuda through the helper; never raise. A stage that kills the helper is reported,
    and libcuda is asked again on its own when NVML took the helper down with it."""
    records, problem = _run_helper([])
    nvml = _nvml_of(records["nvml"]) if "nvml" in records else Failed(problem or "NVML: the helper gave no answer")
    if "libcuda" not in records and problem and "nvml" not in records:
        records, problem = _run_helper(["--skip-nvml"])
    encoded = records.get("libcuda", {}).get("encoded")
    libcuda = cuda_version_of(encoded) if isinstance(encoded, int) and encoded > 0 else None
    problems = [] if "libcuda" in records else [problem or "libcuda: the helper gave no answer"]
    return Libraries(nvml, libcuda, problems)


_early: proc.Running | None = None
_early_answer: proc.ProcResult | None = None
_early_wanted: set[str] = set()
_early_lock = threading.Lock()
EARLY_TIMEOUT = max(HELPER_TIMEOUT, 8.0)  # the GPU stages, then the health readings (collect/gpu_health.py)


def prestart() -> None:
    """Start the helper now (`check` does, before its collectors; the console entry point usually
    started it already): its interpreter start and library loads then overlap sparkdoctor's own
    imports instead of adding to the run. The same process then takes the host-health readings
    (`--with-health`): one interpreter start, not two, and each stage still answers (or is named as
    the one that hung) on its own line."""
    global _early, _early_answer, _early_wanted
    with _early_lock:
        if _early is None:
            _early = _start_helper(["--with-health"])
            _early_answer, _early_wanted = None, {"gpu", "health"}


def take_early(part: str) -> proc.ProcResult | None:
    """The prestarted helper's whole answer, for `part` ("gpu" or "health"), or None when no helper was
    prestarted or that part already took it. The first caller waits for the process; the other reads
    the same answer."""
    global _early, _early_answer, _early_wanted
    with _early_lock:
        if part not in _early_wanted:
            return None
        if _early is not None:
            running, _early = _early, None
            _early_answer = running.result(EARLY_TIMEOUT)
        answer = _early_answer
        _early_wanted.discard(part)
        if not _early_wanted:
            _early_answer = None
        return answer


def _start_helper(args: list[str]) -> proc.Running:
    """The helper running with `args`: the entry point's early one when it is exactly this command
    (sparkdoctor.targets.early), else a new one."""
    argv, env = [sys.executable, "-I", "-B", str(HELPER), *args], early.gpu_helper_env()
    return early.take(early.GPU, argv, env) or proc.start(argv, env=env)


def stage_records(result: proc.ProcResult, stages: dict[str, str]) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The answers of `stages` (stage -> name for messages) in the helper's output, and one line on the
    first of them that did not finish (None if all did, or if the process ended well)."""
    records: dict[str, dict[str, Any]] = {}
    started: list[str] = []
    answers, too_long = json_lines(result.stdout.splitlines())
    for record in answers:
        if not isinstance(record, dict) or record.get("stage") not in stages:
            continue
        if record.get("start"):
            started.append(record["stage"])
        else:
            records[record["stage"]] = record
    unfinished = [stage for stage in started if stage not in records]
    if too_long and [s for s in stages if s not in records]:
        return records, f"the GPU query helper's answer {NUMBER_TOO_LONG}"
    if (result.ok or not [s for s in stages if s not in records]) and not unfinished:
        return records, None
    who = stages[unfinished[0]] if unfinished else "the GPU query helper"
    return records, f"{who}: {_helper_failure(result)}"


def _run_helper(args: list[str]) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The finished stages' answers, and one line on the stage that did not finish (None if all did)."""
    result = take_early("gpu") if not args else None
    if result is None:
        result = _start_helper(args).result(HELPER_TIMEOUT)
    return stage_records(result, STAGE_NAMES)


def _helper_failure(result: proc.ProcResult) -> str:
    if result.start_error:
        return f"the query process could not start: {result.start_error}"
    if result.timed_out:
        return f"no answer within {result.seconds:.1f}s (the driver library hangs; its process was killed)"
    if result.signal:
        return f"the driver library crashed its process ({proc.signal_name(result.signal)})"
    tail = (result.stderr or result.stdout).strip().splitlines()
    return f"the query process exited {result.returncode}: {(tail[-1] if tail else 'no output')[:300]}"


def _nvml_of(record: dict[str, Any]) -> Observation | Missing | Failed:
    if "missing" in record:
        return Missing(str(record["missing"]))
    if "failed" in record:
        return Failed(str(record["failed"]))
    try:
        raw_driver, raw_gpus = record["driver"], record["gpus"]
        driver: dict[str, object] = {"version": str(raw_driver["version"]), "source": "nvml"}
        if isinstance(raw_driver.get("cuda_encoded"), int):
            driver["cuda"] = cuda_version_of(raw_driver["cuda_encoded"])
        gpus: list[dict[str, object]] = [
            {
                "index": g["index"],
                "name": g["name"],
                "cc": g["cc"],
                "arch": arch_of(g["cc"]),
                "memory_total_mib": g["memory_total_mib"],
                "unified": _unified(g["memory_supported"], g["addressing_mode"]),
                "addressing_mode": g["addressing_mode"],
            }
            for g in raw_gpus
        ]
    except (KeyError, TypeError) as exc:
        return Failed(f"NVML: the query process answered in an unexpected shape ({type(exc).__name__}: {exc})")
    return Observation(gpus, driver)


def _unified(memory_supported: bool | None, mode: str | None) -> bool | None:
    """True only on both signals: no memory of its own (NotSupported) and hardware-coherent access (ATS).

    A GPU that reports its own memory is not unified in the sense that matters here (GH200 has ATS
    and its own HBM). NotSupported alone can also come from vGPU/MIG setups, so it says nothing.
    """
    if memory_supported is None:
        return None
    if memory_supported:
        return False
    return True if mode == "ATS" else None


# ---- nvidia-smi -------------------------------------------------------------------------------------
_SMI_NVML_MISSING = 12  # nvidia-smi's own exit code for "NVML shared library not found"
_SMI_NO_DEVICES = 6


def smi_query() -> Observation:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise Missing("nvidia-smi not on PATH")
    result = proc.run([smi, *SMI_QUERY], timeout=SMI_TIMEOUT)
    if result.returncode == _SMI_NVML_MISSING:
        raise Missing("nvidia-smi: NVML library not found")
    if result.returncode == _SMI_NO_DEVICES and "no devices were found" in (result.stdout + result.stderr).lower():
        return Observation([], {})
    if not result.ok:
        raise Failed(result.describe_failure())
    return parse_smi_csv(result.stdout)


def _count(text: str) -> int | None:
    """A plain decimal count, or None: no int() of a 5,000-digit or non-ASCII "number" from a tool."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def parse_smi_csv(text: str) -> Observation:
    gpus: list[dict[str, object]] = []
    versions = set()
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or _count(parts[0]) is None:
            raise Failed(f"nvidia-smi printed an unexpected line: {line.strip()[:200]}")
        cc = parts[-3]
        gpus.append(
            {
                "index": _count(parts[0]),
                "name": ", ".join(parts[1:-3]),  # a name with a comma in it survives
                "cc": cc,
                "arch": arch_of(cc),
                "memory_total_mib": _count(parts[-2]),  # None for "[N/A]" on GB10
                "unified": None,  # nvidia-smi's [N/A] alone does not prove it (see _unified)
            }
        )
        versions.add(parts[-1])
    if not gpus:
        raise Failed("nvidia-smi printed no GPUs and no error")
    return Observation(gpus, {"version": sorted(versions)[0], "source": "nvidia-smi"})


# ---- the collector ----------------------------------------------------------------------------------
def run(ctx: Context) -> dict[str, object]:
    problems: list[str] = []
    observed: Observation | None = None
    libs = query_libraries()
    for problem in libs.problems:
        ctx.facts.add_error("gpu", problem)
    if isinstance(libs.nvml, Observation):
        observed = libs.nvml
    elif isinstance(libs.nvml, Failed):
        problems.append(str(libs.nvml))
    if observed is None:
        try:
            observed = smi_query()
            if problems:  # NVML is there but broken: say so even though nvidia-smi answered
                ctx.facts.add_error("gpu", f"{problems[0]}; GPUs read with nvidia-smi instead")
        except Missing:
            pass
        except Failed as exc:
            problems.append(str(exc))  # already names nvidia-smi
    libcuda = libs.libcuda
    if observed is None:
        if problems:
            tail = f"; libcuda reports CUDA {libcuda}" if libcuda else ""
            raise CollectorError("; ".join(problems) + tail)
        observed = Observation([], {})  # nothing NVIDIA on this machine: a normal state
    driver = dict(observed.driver)
    if libcuda:
        driver["libcuda"] = libcuda
        driver.setdefault("cuda", libcuda)
        driver.setdefault("source", "libcuda")
    detected = observed.gpus[0]["arch"] if observed.gpus else None
    if ctx.arch_override:
        arch = {"value": ctx.arch_override, "source": "given", "detected": detected}
    elif detected:
        arch = {"value": detected, "source": "detected"}
    elif observed.gpus:  # a GPU whose compute capability made no sense
        arch = assumed("the GPU's compute capability could not be read")
    else:
        arch = assumed("no GPU detected")
    return {"gpus": observed.gpus, "driver": driver, "arch": arch}


COLLECTOR = Collector("gpu", run, timeout=2 * HELPER_TIMEOUT + SMI_TIMEOUT + 2)
