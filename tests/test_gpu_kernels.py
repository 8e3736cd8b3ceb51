"""On a machine with an NVIDIA GPU: the kernel probes compiled, loaded through libcuda, run and
compared exactly with sparkdoctor.fp_reference, through the same code path `check` uses.

ptxas: every one of $SPARKDOCTOR_TEST_PTXAS (os.pathsep-separated), `ptxas` on PATH and
/usr/local/cuda/bin/ptxas that exists. With $SPARKDOCTOR_EVIDENCE_DIR set, the facts and the raw
buffers of every run are written there (that is how tests/data/h100/ was made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sparkdoctor import cuda_driver, kernels
from sparkdoctor.arch import arch_base
from sparkdoctor.collect import Context
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget

pytestmark = pytest.mark.gpu

EVIDENCE = os.environ.get("SPARKDOCTOR_EVIDENCE_DIR")


def _gpus() -> list[dict]:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout
    gpus = []
    for line in out.strip().splitlines():
        index, name, cc, driver = (x.strip() for x in line.split(","))
        gpus.append({"index": int(index), "name": name, "cc": cc, "arch": "sm_" + cc.replace(".", "") + "a", "driver": driver})
    return gpus


def _ptxas_toolkits() -> list[dict]:
    candidates = [p for p in os.environ.get("SPARKDOCTOR_TEST_PTXAS", "").split(os.pathsep) if p]
    candidates += [shutil.which("ptxas") or "", "/usr/local/cuda/bin/ptxas"]
    found, seen = [], set()
    for path in candidates:
        if not path or not os.access(path, os.X_OK) or os.path.realpath(path) in seen:
            continue
        seen.add(os.path.realpath(path))
        text = subprocess.run([path, "--version"], check=False, capture_output=True, text=True, timeout=30).stdout
        version = re.search(r"V(\d+\.\d+\.\d+)", text)
        found.append({"tool": "ptxas", "path": path, "version": version.group(1) if version else None, "source": "system"})
    return found


def _context(arch: str, cache: Path) -> Context:
    gpus = _gpus()
    facts = Facts()
    facts.gpus = [{k: v for k, v in g.items() if k != "driver"} for g in gpus]
    facts.driver = {"version": gpus[0]["driver"], "source": "nvidia-smi"}
    facts.arch = {"value": arch, "source": "given"}
    facts.toolkits = _ptxas_toolkits()
    facts.env = {}
    return Context(target=PythonTarget(sys.executable, "test"), facts=facts, cache_dir=cache)


def _save(name: str, data) -> None:
    if EVIDENCE:
        Path(EVIDENCE).mkdir(parents=True, exist_ok=True)
        (Path(EVIDENCE) / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def gpu():
    gpus = _gpus()
    if not _ptxas_toolkits():
        pytest.skip("no ptxas on this GPU machine")
    return gpus[0]


def test_driver_sees_the_gpu(gpu):
    drv = cuda_driver.Driver()
    drv.init()
    assert drv.device_count() >= 1
    dev = drv.device(0)
    major, minor = drv.compute_capability(dev)
    assert f"{major}.{minor}" == gpu["cc"]
    assert drv.name(dev) == gpu["name"]
    assert drv.version() >= 12000


def test_driver_errors_are_named(gpu):
    drv = cuda_driver.Driver()
    drv.init()
    drv.ctx_create(drv.device(0))
    with pytest.raises(cuda_driver.CudaError) as err:
        drv.module_load_data(b"this is not a cubin")
    assert err.value.name.startswith("CUDA_ERROR_")
    assert "cuModuleLoadData" in str(err.value)
    drv.ctx_release(drv.device(0))


@pytest.mark.parametrize("suffix", ["a", ""])
def test_collector_runs_and_verifies_what_this_gpu_can_run(gpu, suffix, tmp_path):
    arch = gpu["arch"][:-1] + suffix
    ctx = _context(arch, tmp_path / "cache")
    facts = kernels.run(ctx)["kernels"]
    _save(f"collector-{arch}.json", {"gpu": gpu, "toolkits": ctx.facts.toolkits, "kernels": facts})
    ran = {pid: r for pid, entry in facts.items() for r in entry["runs"] if r["ran"] is not None}
    if arch_base(arch) in ("sm_89", "sm_90"):
        assert facts["fp8-mma-sm90"]["status"] == "ok", facts["fp8-mma-sm90"]["detail"]
        assert "fp8-mma-sm90" in ran
    if arch_base(arch) in ("sm_120", "sm_121") and suffix:
        assert {"e2m1-cvt", "fp4-mma", "nvfp4-mma", "mxf4-mma"} <= set(ran)
    for pid, entry in facts.items():
        for r in entry["runs"]:
            if r["ran"]:
                assert r["verified"] is True, (pid, r["run_note"])
            elif r["purpose"] == "target" and r["compiled"] and kernels.matching_gpu(ctx.facts.gpus, r["arch"]) is None:
                assert r["run_note"].startswith("compiled, not run: no ") and r["ran"] is None
    # Warm: everything from the cache, the GPU verdicts too, and the same verdicts.
    again = kernels.run(_context(arch, tmp_path / "cache"))["kernels"]
    assert all(r["cached"] for entry in again.values() for r in entry["runs"])
    assert {p: e["status"] for p, e in again.items()} == {p: e["status"] for p, e in facts.items()}


def test_raw_buffers_of_every_runnable_probe(gpu):
    """The bytes in and out of each probe this GPU can run, kept as evidence a test re-checks
    anywhere (tests/test_kernels.py recomputes the reference from them)."""
    toolkit = _ptxas_toolkits()[0]
    ptxas = kernels.Tool(toolkit["path"], toolkit["version"], "system", toolkit["path"])
    records = {}
    with tempfile.TemporaryDirectory() as work:
        for probe in kernels.load_probes():
            arch = gpu["arch"] if arch_base(gpu["arch"]) in probe.family else None
            if arch is None:
                continue
            job = kernels.Job(probe, ptxas, arch, "target")
            job.record = kernels.new_record(job)
            kernels.compile_job(job, Path(work), set(), __import__("threading").Lock())
            assert job.record["compiled"], job.record["error"]
            cubin = Path(work) / f"{probe.id}.cubin"
            cubin.write_bytes(job.cubin)
            buffers = kernels.probe_buffers(probe)
            [result] = kernels.run_on_gpu([kernels.gpu_run.gpu_request(job, cubin, buffers, probe.id)])
            assert result["ok"], result["error"]
            outputs = {k: bytes.fromhex(v) for k, v in result["outputs"].items()}
            verified, note = kernels.verify_outputs(probe, buffers, outputs)
            records[probe.id] = {
                "probe_sha256": probe.sha256, "arch": arch, "ptxas_version": toolkit["version"], "device": result["device"], "verified": verified, "note": note,
                "inputs": {k: v.hex() for k, v in buffers.items() if isinstance(v, bytes)}, "outputs": result["outputs"],
            }
    _save("raw-runs.json", {"gpu": gpu, "runs": records})
    assert records, f"no probe targets {gpu['arch']}"
    assert all(r["verified"] for r in records.values()), {k: r["note"] for k, r in records.items()}
