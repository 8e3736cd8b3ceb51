"""Running compiled probes on a GPU whose arch matches and checking the outputs exactly against
sparkdoctor.fp_reference. The driver is called in a child process (cuda_driver --run-jobs), where a
crash is evidence; fp_reference is imported only when a GPU run needs it, so `check` stays fast."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkdoctor import proc
from sparkdoctor.arch import arch_cc, parse_arch
from sparkdoctor.collector import Context
from sparkdoctor.inputs import NotJSON, NumberTooLong, json_answer
from sparkdoctor.kernels.assemble import Job
from sparkdoctor.kernels.cache import Cache
from sparkdoctor.kernels.probes import Probe, ProbeError
from sparkdoctor.ptxas import version_tuple

if TYPE_CHECKING:
    from sparkdoctor import cuda_driver

RUN_TIMEOUT = 30.0  # one request's child
MAX_PARALLEL = 4  # children at once: each makes its own CUDA context
MAX_ERROR = 300  # characters of one runner error kept: a flooding child cannot bloat the report


def matching_gpu(gpus: Sequence[Mapping[str, object]] | None, arch: str) -> Mapping[str, object] | None:
    """The first GPU a cubin for `arch` runs on (a: the same cc; plain and f: later minors too)."""
    if not gpus:
        return None
    # imported on use: check loads sparkdoctor.cuda_driver only on the runs that get here
    from sparkdoctor.cuda_driver import cc_matches

    want = arch_cc(arch)
    exact = parse_arch(arch)[1] == "a"
    for gpu in gpus:
        cc = version_tuple(str(gpu.get("cc") or ""), parts=2)
        if len(cc) >= 2 and cc_matches((cc[0], cc[1]), want, exact):
            return gpu
    return None


def run_on_gpu(requests: Sequence[cuda_driver.Job]) -> list[cuda_driver.Ran]:
    """Run each request in a child process of its own (cuda_driver's job runner), at most MAX_PARALLEL at
    once; one result per request, always. Alone, because a kernel that faults poisons its process: every
    later driver call there answers with the same sticky error (an H200 gave CUDA_ERROR_ILLEGAL_ADDRESS at
    the next cuDevicePrimaryCtxRetain), and one that hangs takes its whole child down with it."""
    # imported on use: check loads concurrent.futures only on the runs that get here
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=MAX_PARALLEL) as pool:
        return [ran for alone in pool.map(lambda request: _run_child([request]), requests) for ran in alone]


def _run_child(requests: Sequence[cuda_driver.Job]) -> list[cuda_driver.Ran]:
    # imported on use: check loads sparkdoctor.cuda_driver only on the runs that get here
    from sparkdoctor import cuda_driver

    script = Path(cuda_driver.__file__)
    result = proc.run([sys.executable, "-B", str(script), "--run-jobs"], timeout=RUN_TIMEOUT, input=json.dumps({"jobs": requests}))
    failed = None
    if not result.ok:
        failed = f"the GPU runner failed: {result.describe_failure()}"
    else:
        try:
            reply = json_answer(result.stdout)
        except NotJSON as exc:
            reply, failed = {}, f"the GPU runner's answer {exc}" if isinstance(exc, NumberTooLong) else "the GPU runner printed no JSON"
        if not isinstance(reply, dict) or not isinstance(reply.get("results", []), list):
            reply, failed = {}, "the GPU runner's reply is not what it writes"
        if not failed and reply.get("error"):
            failed = str(reply["error"])[:MAX_ERROR]
        if not failed:
            by_id = {r["id"]: r for r in reply.get("results", []) if isinstance(r, dict) and isinstance(r.get("id"), str)}
            return [_read_result(req, by_id.get(req["id"])) for req in requests]
    return [{"id": req["id"], "ok": False, "error": failed} for req in requests]


def _read_result(request: cuda_driver.Job, result: object) -> cuda_driver.Ran:
    """The runner's result for `request` when it is what the runner writes: a bool `ok`, a `device`
    mapping, and when ok every output buffer asked for, in hex, of the size asked; anything else is
    an error of the run, never a verdict on the GPU's arithmetic (a short or missing buffer is not
    a wrong result)."""
    if result is None:
        return {"id": request["id"], "ok": False, "error": "no result"}
    problem = _reply_problem(request, result)
    if problem:
        return {"id": request["id"], "ok": False, "error": f"the GPU runner's result is malformed: {problem}"}
    assert isinstance(result, dict)
    error, ms = result.get("error"), result.get("ms")
    read: cuda_driver.Ran = {"id": request["id"], "ok": result["ok"], "error": None if error is None else str(error)[:MAX_ERROR],
                             "outputs": result.get("outputs") or {}, "device": result.get("device") or {}}
    if isinstance(ms, (int, float)) and not isinstance(ms, bool) and math.isfinite(ms):
        read["ms"] = float(ms)
    return read


def _reply_problem(request: cuda_driver.Job, result: object) -> str | None:
    if not isinstance(result, dict) or not isinstance(result.get("ok"), bool):
        return "no true/false 'ok'"
    device = result.get("device", {})
    if not isinstance(device, dict) or not all(isinstance(device.get(k, ""), str) for k in ("name", "cc")):
        return "'device' is not a name and a cc"
    if not result["ok"]:
        return None
    outputs = result.get("outputs")
    if not isinstance(outputs, dict):
        return "no 'outputs'"
    read: dict[str, bytes] = {}
    for name, text in outputs.items():
        try:
            read[name] = bytes.fromhex(text)
        except (TypeError, ValueError):
            return f"output '{name}' is not hex"
    for buf in request.get("buffers", []):
        if "size" in buf and buf["name"] not in read:
            return f"output '{buf['name']}' is missing"
        if "size" in buf and len(read[buf["name"]]) != buf["size"]:
            return f"output '{buf['name']}' has {len(read[buf['name']])} bytes, {buf['size']} were read back"
    return None


def reference_function(probe: Probe, field_name: str) -> Callable[..., Any]:
    """The fp_reference function a probe's `inputs` / `reference` field names (imported only when
    a GPU run needs it: `check` stays fast without one)."""
    # imported on use: check loads sparkdoctor.fp_reference only on the runs that get here
    from sparkdoctor.fp_reference import probes

    fn: Callable[..., Any] | None = getattr(probes, getattr(probe, field_name), None)
    if not callable(fn):
        raise ProbeError(f"{probe.path}: header field '{field_name}' names no function of sparkdoctor.fp_reference.probes")
    return fn


def probe_buffers(probe: Probe) -> dict[str, bytes | int]:
    buffers: dict[str, bytes | int] = reference_function(probe, "inputs")()
    if list(buffers) != list(probe.params):
        raise ProbeError(f"{probe.path}: {probe.inputs}() returns buffers {list(buffers)}, the kernel takes {list(probe.params)}")
    return buffers


def verify_outputs(probe: Probe, buffers: dict[str, bytes | int], outputs: dict[str, bytes]) -> tuple[bool, str]:
    inputs = {k: v for k, v in buffers.items() if isinstance(v, bytes)}
    expected = reference_function(probe, "reference")(inputs)
    checked = [want.compare(outputs.get(want.name, b"")) for want in expected]
    return all(same for same, _ in checked), "; ".join(note for _, note in checked)


def gpu_request(job: Job, cubin_path: Path, buffers: dict[str, bytes | int], request_id: str) -> cuda_driver.Job:
    return {
        "id": request_id, "cubin": str(cubin_path), "entry": job.probe.entry, "threads": job.probe.threads, "grid": 1,
        "cc": list(arch_cc(job.arch)), "exact_cc": parse_arch(job.arch)[1] == "a",
        "buffers": [{"name": n, "hex": v.hex()} if isinstance(v, bytes) else {"name": n, "size": v} for n, v in buffers.items()],
    }


def gpu_phase(jobs: list[Job], ctx: Context, cache: Cache, workdir: Path | None) -> None:
    facts = ctx.facts
    driver = (facts.driver or {}).get("version")
    pending: list[tuple[Job, Mapping[str, object], str]] = []
    for job in jobs:
        rec = job.record
        if job.purpose != "target":
            continue
        if not rec["compiled"]:
            rec["run_note"] = "not run: it did not compile"
            continue
        gpu = matching_gpu(facts.gpus, job.arch)
        if gpu is None:
            where = "GPU unknown (the gpu collector found nothing it could read)" if facts.gpus is None else f"no {job.arch} GPU here"
            rec["run_note"] = f"compiled, not run: {where}"
            continue
        run_key = hashlib.sha256(f"{job.key}|{gpu.get('name')}|{gpu.get('cc')}|{driver}".encode()).hexdigest()
        hit = cache.get(run_key)
        if hit is not None:
            rec.update({k: hit[0].get(k) for k in ("ran", "verified", "run_note", "run_ms")})
            continue
        pending.append((job, gpu, run_key))
    if not pending:
        return
    assert workdir is not None
    requests, cases = [], {}
    for index, (job, gpu, run_key) in enumerate(pending):
        if job.cubin is None:  # compiled, fresh or cached, always comes with its checked cubin (Cache.lookup)
            job.record["run_note"] = "not run: its cubin is gone"
            continue
        path = workdir / f"run-{index}.cubin"
        path.write_bytes(job.cubin)
        buffers = probe_buffers(job.probe)
        cases[str(index)] = (job, gpu, run_key, buffers)
        requests.append(gpu_request(job, path, buffers, str(index)))
    for result in run_on_gpu(requests) if requests else []:
        job, gpu, run_key, buffers = cases[result["id"]]
        rec = job.record
        rec["run_ms"] = result.get("ms")
        device = result.get("device") or {}
        where = f"{device.get('name') or gpu.get('name')} (cc {device.get('cc') or gpu.get('cc')})"
        if not result.get("ok"):
            rec.update(ran=False, verified=None, run_note=f"could not run on {where}: {result.get('error')}")
            continue
        outputs = {name: bytes.fromhex(h) for name, h in result.get("outputs", {}).items()}
        verified, note = verify_outputs(job.probe, buffers, outputs)
        rec.update(ran=True, verified=verified, run_note=f"ran on {where}: {note}")
        cache.put(run_key, rec)
