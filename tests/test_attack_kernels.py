"""Hostile inputs aimed at the kernel probes: build settings that ask for the same plain-arch compile twice, a
GPU runner child whose reply is short, partial or mistyped, and a cache whose cubin was swapped behind its record.
Real ptxas compiles; the GPU runner is a real child process (a stand-in script in place of cuda_driver.py)."""

from __future__ import annotations

import json
import types

import pytest

from sparkdoctor import cuda_driver, kernels, proc
from tests.test_kernel_proof import real_cubin
from tests.test_kernels import GB10, SM12X, make_ctx, needs_ptxas, system_toolkit

# A stand-in for `cuda_driver.py --run-jobs`: it answers every job as the real runner would, with zeros read back
# (a full-size, wrong result), then MODE spoils the reply the way a broken or hostile child could.
RUNNER = """
import json, sys
MODE = {mode!r}
results = []
for job in json.load(sys.stdin)["jobs"]:
    outputs = {{b["name"]: "00" * b["size"] for b in job["buffers"] if "size" in b}}
    r = {{"id": job["id"], "ok": True, "error": None, "device": {{"name": "NVIDIA GB10", "cc": "12.1"}}, "outputs": outputs, "ms": 1.0}}
    if MODE == "short":
        r["outputs"] = {{k: v[:-2] for k, v in outputs.items()}}
    elif MODE == "missing":
        del r["outputs"]
    elif MODE == "device-text":
        r["device"] = "NVIDIA GB10"
    elif MODE == "list-id":
        r["id"] = [job["id"]]
    elif MODE == "nan-ms":
        r["ms"] = float("nan")
    elif MODE == "ok-text":
        r["ok"] = "yes"
    results.append(r)
print(json.dumps({{"results": results}}))
"""


@pytest.fixture
def no_disassembler(monkeypatch):
    monkeypatch.setattr(kernels.tools, "find_disassembler", lambda ptxas: None)


def _runner(tmp_path, monkeypatch, mode: str) -> None:
    script = tmp_path / "runner.py"
    script.write_text(RUNNER.format(mode=mode))
    monkeypatch.setattr(cuda_driver, "__file__", str(script))


@needs_ptxas
def test_two_settings_that_target_the_same_plain_arch_are_one_diagnosis(tmp_path, no_disassembler):
    """Both arch lists naming plain 12.1 queued two identical diagnosis compiles with one key: the second one's
    work folder existed already, and FileExistsError took the whole kernels collector down (every probe lost)."""
    env = {"TORCH_CUDA_ARCH_LIST": "12.1", "FLASHINFER_CUDA_ARCH_LIST": "8.0;12.1"}
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", env=env))["kernels"]
    for pid in SM12X:
        [diagnosis] = [r for r in out[pid]["runs"] if r["purpose"] == "diagnosis"]
        assert diagnosis["setting"] == "TORCH_CUDA_ARCH_LIST=12.1 and FLASHINFER_CUDA_ARCH_LIST=8.0;12.1"
        assert diagnosis["compiled"] is False
        assert "TORCH_CUDA_ARCH_LIST=12.1 and FLASHINFER_CUDA_ARCH_LIST=8.0;12.1 target plain sm_121: " in out[pid]["detail"]


@needs_ptxas
@pytest.mark.parametrize(("mode", "why"), [
    ("short", "output 'out' has 127 bytes, 128 were read back"),
    ("missing", "no 'outputs'"),
    ("device-text", "'device' is not a name and a cc"),
    ("ok-text", "no true/false 'ok'"),
    ("list-id", "no result"),
])
def test_a_gpu_runner_reply_that_cannot_be_read_is_an_error_not_a_wrong_result(tmp_path, monkeypatch, no_disassembler, mode, why):
    """A short or missing output buffer was compared as if the GPU had computed it ("WRONG RESULTS", a fail on
    the GPU's arithmetic); a `device` that was not a mapping (AttributeError) or an unhashable id (TypeError)
    took the whole kernels collector down. Each is now an error of that run, named."""
    _runner(tmp_path, monkeypatch, mode)
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10))["kernels"]
    for pid in SM12X:
        run = out[pid]["runs"][0]
        assert (out[pid]["status"], run["ran"], run["verified"]) == ("error", False, None), out[pid]["detail"]
        assert "WRONG RESULTS" not in out[pid]["detail"]
    assert why in out["e2m1-cvt"]["runs"][0]["run_note"]


@needs_ptxas
def test_a_full_wrong_read_back_still_fails_and_a_nan_time_is_dropped(tmp_path, monkeypatch, no_disassembler):
    _runner(tmp_path, monkeypatch, "nan-ms")
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10))["kernels"]
    for pid in SM12X:
        run = out[pid]["runs"][0]
        assert (out[pid]["status"], run["ran"], run["verified"]) == ("fail", True, False)
        assert run["run_ms"] is None
    json.dumps(out, allow_nan=False)  # the facts stay strict JSON


def test_a_runner_error_is_cut_to_one_short_line(tmp_path, monkeypatch):
    script = tmp_path / "runner.py"
    script.write_text("import json, sys\nsys.stdin.read()\nprint(json.dumps({'results': [{'id': 'x', 'ok': False, 'error': 'E' * 10**6}]}))\n")
    monkeypatch.setattr(cuda_driver, "__file__", str(script))
    [result] = kernels.run_on_gpu([{"id": "x"}])
    assert result["ok"] is False and len(result["error"]) == kernels.gpu_run.MAX_ERROR


@needs_ptxas
@pytest.mark.parametrize("damage", ["swapped", "cut", "gone"])
def test_a_cubin_that_is_not_the_one_cached_with_its_record_is_compiled_again(tmp_path, monkeypatch, no_disassembler, damage):
    """The cache served a compiled record on its word and sent whatever cubin sat beside it to the GPU once its
    header named the arch: a valid sm_121a cubin of another kernel was run as the probe; a damaged or missing
    one left the probe unrun ("run again with --no-cache"). A compiled entry now counts only with the cubin
    whose sha256 it was written with; anything else is a miss, compiled again."""
    sent: list[bytes] = []

    def gpu(requests, timeout=None):
        sent.extend(open(r["cubin"], "rb").read() for r in requests)
        return [{"id": r["id"], "ok": False, "error": "stand-in"} for r in requests]

    monkeypatch.setattr(kernels.gpu_run, "run_on_gpu", gpu)
    kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10, driver={"version": "580.95.05"}))
    fresh = sorted(sent)
    other = real_cubin(tmp_path / "other", "sm_121a").read_bytes()
    cubins = sorted((tmp_path / "cache" / "kernels").glob("*.cubin"))
    assert len(cubins) == len(SM12X)
    for cubin in cubins:
        if damage == "swapped":
            cubin.write_bytes(other)
        elif damage == "cut":
            cubin.write_bytes(cubin.read_bytes()[:-16])
        else:
            cubin.unlink()
    sent.clear()
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10, driver={"version": "590.1"}))["kernels"]
    assert sorted(sent) == fresh and other not in sent
    for pid in SM12X:
        run = out[pid]["runs"][0]
        assert run["cached"] is False and run["compiled"] is True and run["ran"] is False
    healed = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=[]))["kernels"]
    assert all(e["runs"][0]["cached"] for e in healed.values())  # and rewritten



@pytest.mark.parametrize("body", [
    'echo "/opt/cuda/bin/ptxas: not found" >&2; exit 127',  # a wrapper whose ptxas is gone
    "head -c 20000000 /dev/zero | tr '\\0' x >&2; exit 1",  # a flood of anything but ptxas's own lines
])
def test_a_ptxas_that_fails_without_its_own_error_line_is_an_error_never_a_cached_rejection(tmp_path, no_disassembler, body):
    """Any non-zero exit was a "rejected" compile: the probe failed ("does not compile for sm_121a") on the
    word of a wrapper that could not find its ptxas, and that verdict was cached. Only ptxas's own error lines
    make a rejection now; anything else is an error, short, and asked again next time."""
    from tests.test_kernels import fake_ptxas

    broken = fake_ptxas(tmp_path, "ptxas", body)
    toolkits = [{"tool": "ptxas", "path": broken, "version": "13.0.88", "source": "system"}]
    for _ in range(2):
        out = kernels.run(make_ctx(tmp_path, toolkits, arch="sm_121a"))["kernels"]
        for pid in SM12X:
            run = out[pid]["runs"][0]
            assert (out[pid]["status"], run["outcome"], run["cached"]) == ("error", "error", False), out[pid]["detail"]
            assert run["error"].startswith("ptxas exited ") and len(run["error"]) < 400


@needs_ptxas
def test_a_fifo_in_the_kernel_cache_is_a_miss_not_a_wait(tmp_path, no_disassembler):
    """A FIFO where an entry or its cubin belongs blocked the cache's read: the kernels collector sat out its 60 s
    and every probe's verdict was lost ("timed out after 60s"). The cache reads only regular files now."""
    import os

    from tests.hostile import hang_guard

    first = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a"))["kernels"]
    folder = tmp_path / "cache" / "kernels"
    entry, cubin = sorted(folder.glob("*.json"))[0], sorted(folder.glob("*.cubin"))[-1]
    for path in (entry, cubin):
        path.unlink()
        os.mkfifo(path)
    with hang_guard(60):
        again = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a"))["kernels"]
    assert {p: e["status"] for p, e in again.items()} == {p: e["status"] for p, e in first.items()}
    assert 1 <= sum(not r["cached"] for e in again.values() for r in e["runs"]) <= 2
    assert entry.is_file() and cubin.is_file()  # written again in place of the FIFOs


# A stand-in runner that behaves as a real driver does after a fault (measured on an H200: the next job in the same
# process failed at cuDevicePrimaryCtxRetain with the first one's CUDA_ERROR_ILLEGAL_ADDRESS) or a hang; every
# other job gets the reference's own outputs.
POISONING_RUNNER = """
import json, struct, sys, time
from sparkdoctor import kernels
from sparkdoctor.fp_reference import probes as fp_probes
BAD, MODE = {bad!r}, {mode!r}
results, poisoned = [], None
for job in json.load(sys.stdin)["jobs"]:
    r = {{"id": job["id"], "ok": False, "device": {{"name": "NVIDIA GB10", "cc": "12.1"}}, "outputs": {{}}}}
    if poisoned:
        r["error"] = "cuDevicePrimaryCtxRetain: " + poisoned
    elif job["entry"] == BAD and MODE == "hang":
        time.sleep(600)
    elif job["entry"] == BAD:
        poisoned = "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
        r["error"] = "cuCtxSynchronize: " + poisoned
    else:
        probe = next(p for p in kernels.load_probes() if p.entry == job["entry"])
        inputs = {{b["name"]: bytes.fromhex(b["hex"]) for b in job["buffers"] if "hex" in b}}
        for want in getattr(fp_probes, probe.reference)(inputs):
            r["outputs"][want.name] = struct.pack(f"<{{len(want.values)}}{{want.fmt}}", *want.values).hex()
        r.update(ok=True, error=None)
    results.append(r)
print(json.dumps({{"results": results}}))
"""


@needs_ptxas
@pytest.mark.parametrize("mode", ["fault", "hang"])
def test_a_probe_that_faults_or_hangs_on_the_gpu_costs_only_its_own_verdict(tmp_path, monkeypatch, no_disassembler, mode):
    """All probes ran in one child: after one faulted, the CUDA context was poisoned and every later probe
    reported the first one's CUDA_ERROR_ILLEGAL_ADDRESS as its own; one that hung cost every probe its run.
    Each request now has a child of its own."""
    script = tmp_path / "runner.py"
    script.write_text(POISONING_RUNNER.format(bad="probe_fp4_mma", mode=mode))
    monkeypatch.setattr(cuda_driver, "__file__", str(script))
    # RUN_TIMEOUT is wall-clock, one for every request's child: the hanging child gets 3 s, the children that answer
    # (an interpreter start and sparkdoctor's imports each) 600 s, so a loaded machine cannot time them out too
    def run(argv, timeout, input=None, **kw):
        hangs = mode == "hang" and any(job["entry"] == "probe_fp4_mma" for job in json.loads(input or "{}").get("jobs", []))
        return proc.run(argv, timeout=3.0 if hangs else 600.0, input=input, **kw)

    monkeypatch.setattr(kernels.gpu_run, "proc", types.SimpleNamespace(run=run))
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10))["kernels"]
    assert out["fp4-mma"]["status"] == "error"
    assert ("timed out" if mode == "hang" else "cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS") in out["fp4-mma"]["detail"]
    for pid in ("e2m1-cvt", "mxf4-mma", "nvfp4-mma"):
        run = out[pid]["runs"][0]
        assert (out[pid]["status"], run["ran"], run["verified"]) == ("ok", True, True), out[pid]["detail"]


def test_a_real_runner_reply_with_a_fault_reads_as_the_driver_said(tmp_path, monkeypatch):
    """tests/data/h200/cuda-driver-fault-reply.json: `cuda_driver.py --run-jobs` on an H200 (driver 580.159.04)
    with four jobs in one process: the fp8 probe, an entry the cubin lacks, a kernel that stores to address 8, and
    the fp8 probe again, which the fault before it left unable to get a context. The reader keeps each job's own
    answer, and the fp8 output is the reference's to the bit."""
    from pathlib import Path

    from sparkdoctor.fp_reference import probes as fp_probes

    reply = Path(__file__).parent / "data" / "h200" / "cuda-driver-fault-reply.json"
    script = tmp_path / "runner.py"
    script.write_text(f"import sys\nsys.stdin.read()\nprint(open({str(reply)!r}).read())\n")
    monkeypatch.setattr(cuda_driver, "__file__", str(script))
    inputs = fp_probes.fp8_mma_inputs()
    fp8 = [{"name": n, "hex": v.hex()} if isinstance(v, bytes) else {"name": n, "size": v} for n, v in inputs.items()]
    requests = [{"id": i, "buffers": fp8} for i in ("fp8", "missing")] + [{"id": "fault", "buffers": [{"name": "out", "size": 4}]},
                                                                          {"id": "fp8-after-fault", "buffers": fp8}]
    good, missing, fault, after = kernels.gpu_run._run_child(requests)
    assert good["ok"] and good["device"] == {"ordinal": 0, "name": "NVIDIA H200", "cc": "9.0"}
    [want] = fp_probes.fp8_mma_expected({k: v for k, v in inputs.items() if isinstance(v, bytes)})
    assert want.compare(bytes.fromhex(good["outputs"]["d"])) == (True, "d: all 128 values match the reference")
    assert missing["error"] == "cuModuleGetFunction: CUDA_ERROR_NOT_FOUND (named symbol not found)"
    assert fault["error"].startswith("cuCtxSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS")
    assert after["error"].startswith("cuDevicePrimaryCtxRetain: CUDA_ERROR_ILLEGAL_ADDRESS")  # poisoned by the fault
