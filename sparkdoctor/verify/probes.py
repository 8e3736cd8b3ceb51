"""Run one probe in one scratch environment: `cutedsl-*` ids run probes/cutedsl/ with the
environment's python; any other id is a PTX probe of probes/kernels/ (sparkdoctor.kernels),
assembled with the ptxas that the environment's pip packages bring (nvidia-cuda-nvcc(-cu12))."""

from __future__ import annotations

import os
import re
import tempfile
import threading
from pathlib import Path

from sparkdoctor import kernels, proc
from sparkdoctor.collect import cutedsl
from sparkdoctor.vocab import CUTEDSL_KERNELS

PROBE_TIMEOUT = 90.0
VERSION_TIMEOUT = 20.0


def run_probe(probe_id: str, python: Path, arch: str) -> tuple[str, str, dict[str, object]]:
    """(status, detail, versions) of one probe in one environment."""
    if probe_id in CUTEDSL_KERNELS:
        return _run_cutedsl(cutedsl, CUTEDSL_KERNELS[probe_id], python, arch)

    probe = next((p for p in kernels.load_probes() if p.id == probe_id), None)
    if probe is None:
        known = sorted([*CUTEDSL_KERNELS, *(p.id for p in kernels.load_probes())])
        return "error", f"unknown probe {probe_id!r} (known: {', '.join(known)})", {}
    return _run_ptx(probe, python, arch)


def _run_cutedsl(cutedsl, kernel: str, python: Path, arch: str) -> tuple[str, str, dict[str, object]]:
    # The user's CuTe DSL / Python settings must not leak into a scratch environment's probe.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUTE_DSL_", "PYTHON", "VIRTUAL_ENV", "PIP_"))}
    result = proc.run([str(python), "-B", str(cutedsl.probe_script()), "--arch", arch, "--kernel", kernel], timeout=PROBE_TIMEOUT, env=env)
    raw = cutedsl.interpret(kernel, arch, result)
    versions = dict(raw.get("dists") or {})
    if raw.get("bundled_cuda"):
        versions["bundled CUDA"] = raw["bundled_cuda"]
    return raw.get("status", "error"), raw.get("detail", ""), versions


def find_ptxas(python: Path) -> Path | None:
    """The ptxas an nvidia-cuda-nvcc(-cu12) wheel put into this environment."""
    venv = python.parent.parent
    found = sorted(venv.glob("lib/python*/site-packages/nvidia/*/bin/ptxas"))
    return found[0] if found else None


def _run_ptx(probe: kernels.Probe, python: Path, arch: str) -> tuple[str, str, dict[str, object]]:
    ptxas = find_ptxas(python)
    if ptxas is None:
        return "error", "no ptxas in this environment (install nvidia-cuda-nvcc or nvidia-cuda-nvcc-cu12)", {}
    version_run = proc.run([str(ptxas), "--version"], timeout=VERSION_TIMEOUT)
    found = re.search(r"V(\d+\.\d+\.\d+)", version_run.stdout or "")
    version = found.group(1) if found else None
    tool = kernels.Tool(str(ptxas), version, "pip", f"{ptxas}|{version}")
    job = kernels.Job(probe, tool, arch, "target")
    job.record = kernels.new_record(job)
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-verify-") as work:
        kernels.compile_job(job, Path(work), set(), threading.Lock())
    rec = job.record
    versions = {"ptxas": version}
    if rec["outcome"] == "compiled":
        return "ok", f"ptxas {version} compiled {probe.id} for {arch}", versions
    if rec["outcome"] == "rejected":
        why = f" ({rec['explanation']})" if rec.get("explanation") else ""
        return "fail", f"ptxas {version} rejected {probe.id} for {arch}: {rec['error']}{why}", versions
    return "error", f"ptxas {version}: {rec.get('error') or rec['outcome']}", versions
