"""Assembling one probe with one ptxas for one arch (a Job), and reading why ptxas said no.

A compile counts only when ptxas exits 0 AND its output is a cubin for the arch (kernels.cubin):
a ptxas that exits 0 with garbage, nothing, or another arch's cubin is an error, never a pass."""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.arch import arch_base, first_cuda_for, parse_arch
from sparkdoctor.kernels.cubin import cubin_problem
from sparkdoctor.kernels.probes import Probe
from sparkdoctor.kernels.tools import Tool

# 2: a compile now counts only with a valid cubin for the arch; version-1 passes were not proven so.
CACHE_VERSION = 2
COMPILE_TIMEOUT = 20.0
MAX_MESSAGE = 300  # characters of one ptxas message kept: a flooding ptxas cannot bloat the report

_PTXAS_MESSAGE = re.compile(r"^ptxas\s+(?:\S+?, line (\d+); )?(error|fatal)\s*:\s*(.*)$")


def ptxas_errors(stderr: str) -> str:
    """The distinct error lines of a ptxas run, without the temp file path, joined with ' | '."""
    messages: list[str] = []
    for line in stderr.splitlines():
        match = _PTXAS_MESSAGE.match(line.strip())
        if not match:
            continue
        text = match.group(3).strip()[:MAX_MESSAGE]
        if text == "Ptx assembly aborted due to errors":
            continue
        text = f"line {match.group(1)}: {text}" if match.group(1) else text
        if text not in messages:
            messages.append(text)
    return " | ".join(messages[:3]) or (stderr.strip().splitlines() or ["no message"])[-1][:MAX_MESSAGE]


def _says_why(output: str) -> bool:
    """Did ptxas print one of its own error lines ("ptxas ... error :" / "ptxas fatal :")?"""
    return any(_PTXAS_MESSAGE.match(line.strip()) for line in output.splitlines())


def explain(error: str, arch: str, probe: Probe, ptxas_version: str | None) -> str | None:
    """Why ptxas said no, in words a user can act on."""
    base = arch_base(arch)
    suffix = parse_arch(arch)[1]
    first = first_cuda_for(arch)
    first_text = f"CUDA {first[0]}.{first[1]}" if first else "a newer CUDA"
    if "not defined for option" in error or "does not support .target" in error or "Unknown target" in error:
        return f"ptxas {ptxas_version or '?'} does not know {arch}: targeting it needs {first_text} or newer"
    if "Unsupported .version" in error:
        return f"ptxas {ptxas_version or '?'} is older than PTX ISA {probe.ptx_version_for(arch)}, which this probe needs for {arch}"
    if "not supported on .target" in error:
        if probe.needs_suffix and not suffix and base in probe.family:
            return f"these instructions need {base}a or {base}f; a build that targets plain {base} cannot use them"
        return f"{arch} does not have this instruction"
    return None


@dataclass
class Job:
    probe: Probe
    ptxas: Tool
    arch: str
    purpose: str  # "target" | "diagnosis"
    setting: str | None = None
    primary: bool = False  # the preferred ptxas for this probe and arch: its SASS is read
    key: str = ""
    disassembler: Tool | None = None
    record: dict[str, object] = field(default_factory=dict)
    cubin: bytes | None = None
    cacheable: bool = False


def job_key(job: Job) -> str:
    material = {
        "v": CACHE_VERSION,
        "ptxas": job.ptxas.identity,
        "source": job.probe.sha256,
        "arch": job.arch,
        "disassembler": job.disassembler.identity if job.disassembler else None,
        "primary": job.primary,  # only the preferred ptxas's SASS is read
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def new_record(job: Job) -> dict[str, object]:
    return {
        "ptxas": job.ptxas.path, "ptxas_version": job.ptxas.version, "ptxas_source": job.ptxas.source,
        "used_by": list(job.ptxas.used_by), "arch": job.arch, "purpose": job.purpose, "outcome": None, "compiled": False, "error": None,
        "explanation": None, "sass_ok": None, "sass": None, "ran": None, "verified": None,
        "run_note": None, "ms": None, "cached": False,
        **({"setting": job.setting} if job.setting else {}),
    }


def run_ptxas(ptxas: Tool, arch: str, ptx: Path, cubin: Path, timeout: float) -> tuple[proc.ProcResult, str | None]:
    """Run ptxas; (its result, why the output is not a cubin for `arch` when it exited 0)."""
    result = proc.run([ptxas.path, f"-arch={arch}", "-o", str(cubin), str(ptx)], timeout=timeout)
    return result, cubin_problem(cubin, arch) if result.ok else None


def compile_job(job: Job, workdir: Path, hung: set[str], lock: threading.Lock, runner=None) -> None:
    """Assemble one probe with one ptxas; fill job.record, job.cubin, job.cacheable. `runner` replaces
    run_ptxas for a ptxas that lives elsewhere (inside a container target)."""
    rec = job.record or new_record(job)
    job.record = rec
    with lock:
        if job.ptxas.identity in hung:
            rec.update(outcome="timeout", error=f"not tried: this ptxas hung on another probe (over {COMPILE_TIMEOUT:.0f}s)")
            return
    folder = Path(tempfile.mkdtemp(prefix=f"{job.key[:24] or job.probe.id}-", dir=workdir))
    ptx, cubin = folder / "in.ptx", folder / "out.cubin"
    ptx.write_text(job.probe.ptx_for(job.arch), encoding="utf-8")
    result, bad_output = (runner or run_ptxas)(job.ptxas, job.arch, ptx, cubin, COMPILE_TIMEOUT)
    rec["ms"] = round(result.seconds * 1000, 1)
    if result.ok and bad_output:
        # Not cached: a broken tool is asked again next time, and costs no wrong verdict.
        rec.update(outcome="error", error=f"ptxas exited 0 but {bad_output}")
    elif result.ok:
        rec.update(outcome="compiled", compiled=True)
        job.cubin = cubin.read_bytes()
        job.cacheable = True
    elif result.timed_out:
        rec.update(outcome="timeout", error=f"ptxas timed out after {COMPILE_TIMEOUT:.0f}s")
        with lock:
            hung.add(job.ptxas.identity)
    elif result.start_error or result.signal or result.ended or not _says_why(result.stderr or result.stdout):
        # Not cached either: only ptxas's own error lines make a rejection. A wrapper whose ptxas is gone
        # (exit 127), a stopped container or a flood of anything else is a broken tool, not a verdict.
        rec.update(outcome="error", error=result.describe_failure())
    else:
        error = ptxas_errors(result.stderr or result.stdout)
        rec.update(outcome="rejected", error=error, explanation=explain(error, job.arch, job.probe, job.ptxas.version))
        job.cacheable = True
