"""The kernel collector with real ptxas binaries, fake broken ones, the cache, and the committed
H100 evidence. GPU-free: the GPU path is covered here through its seams and for real in
tests/test_gpu_kernels.py."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import struct
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor import cuda_driver, kernels
from sparkdoctor.collect import Context
from sparkdoctor.facts import Facts
from sparkdoctor.fp_reference import probes as fp_probes
from sparkdoctor.targets.local import PythonTarget

DATA = Path(__file__).parent / "data" / "h100"
# A CUDA toolkit's ptxas, else the one the nvidia-cuda-nvcc test dependency puts in this environment.
SYSTEM_PTXAS = next(
    (
        str(p)
        for p in ("/usr/local/bin/ptxas", shutil.which("ptxas"), *(b / "ptxas" for b in kernels.tools.nvidia_wheel_bins()))
        if p and os.access(p, os.X_OK)
    ),
    None,
)
# The nvidia-cuda-nvcc 13.0 wheel's ptxas: a test dependency, so it is in every test environment.
PIP_PTXAS = next((str(b / "ptxas") for b in kernels.tools.nvidia_wheel_bins() if os.access(b / "ptxas", os.X_OK)), None)
SM12X = ["e2m1-cvt", "fp4-mma", "nvfp4-mma", "mxf4-mma"]

needs_ptxas = pytest.mark.skipif(SYSTEM_PTXAS is None, reason="no ptxas on this machine")


def ptxas_version(path: str) -> str:
    import re
    import subprocess

    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    return re.search(r"V(\d+\.\d+\.\d+)", out).group(1)


def system_toolkit() -> dict:
    return {"tool": "ptxas", "path": SYSTEM_PTXAS, "version": ptxas_version(SYSTEM_PTXAS), "source": "system"}


def make_ctx(tmp_path: Path, toolkits, arch: str | None = None, gpus=None, env=None, use_cache: bool = True, driver=None) -> Context:
    facts = Facts()
    facts.toolkits = toolkits
    facts.gpus = [] if gpus is None else gpus
    facts.env = env or {}
    facts.driver = driver
    if arch:
        facts.arch = {"value": arch, "source": "given"}
    return Context(target=PythonTarget(sys.executable, "test"), facts=facts, cache_dir=tmp_path / "cache", use_cache=use_cache)


def fake_ptxas(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def no_disassembler(monkeypatch):
    """nvdisasm costs ~0.6 s a call on these 2 cores; only the SASS tests pay for it."""
    monkeypatch.setattr(kernels.tools, "find_disassembler", lambda ptxas: None)


# ---- probe definitions ---------------------------------------------------------------------------


def test_probe_files_define_the_five_probes():
    probes = {p.id: p for p in kernels.load_probes()}
    assert set(probes) == {*SM12X, "fp8-mma-sm90"}
    for pid in SM12X:
        p = probes[pid]
        assert p.family == ("sm_120", "sm_121") and p.home_arch == "sm_121a" and p.needs_suffix and p.always
        assert ".target @ARCH@" in p.source and p.entry in p.source
    assert probes["fp8-mma-sm90"].always is False
    assert probes["nvfp4-mma"].params == ("a", "b", "c", "sfa", "sfb", "d")


def _write_probe(folder: Path, header: str, body: str = ".version 8.8\n.target @ARCH@\n.address_size 64\n") -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "x.ptx"
    path.write_text("".join(f"// {line}\n" for line in header.strip().splitlines()) + body)
    return path


GOOD_HEADER = """
id = "x"
title = "t"
instruction = "i"
family = ["sm_121"]
home_arch = "sm_121a"
needs_suffix = true
always = true
sass = 'F2FP'
entry = "k"
threads = 32
params = ["in", "out"]
inputs = "e2m1_cvt_inputs"
reference = "e2m1_cvt_expected"
"""


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda h: h.replace('threads = 32', 'threads = "32"'), "'threads' is missing or not a int"),
        (lambda h: h.replace('id = "x"', "id = x"), "header is not TOML"),
        (lambda h: h.replace("'F2FP'", "'F2FP('"), "'sass' is not a regex"),
        (lambda h: h.replace("'F2FP'", "'F2FP[[]'"), "'sass' is not a regex: Possible nested set"),
        (lambda h: h.replace('home_arch = "sm_121a"', 'home_arch = "gb10"'), "not a CUDA arch"),
    ],
)
def test_bad_probe_headers_name_file_and_field(tmp_path, edit, message):
    path = _write_probe(tmp_path, edit(GOOD_HEADER))
    with pytest.raises(kernels.ProbeError, match=message) as err:
        kernels.load_probes(tmp_path)
    assert str(path) in str(err.value)


def test_ptx_version_is_raised_to_what_the_arch_needs():
    probe = next(p for p in kernels.load_probes() if p.id == "nvfp4-mma")
    assert probe.ptx_version == "8.7"
    assert ".version 8.7\n.target sm_120a\n" in probe.ptx_for("sm_120a")
    assert ".version 8.8\n.target sm_121a\n" in probe.ptx_for("sm_121a")
    assert ".version 8.8\n.target sm_120f\n" in probe.ptx_for("sm_120f")
    fp8 = next(p for p in kernels.load_probes() if p.id == "fp8-mma-sm90")
    assert ".version 8.4\n.target sm_90a\n" in fp8.ptx_for("sm_90a")


def test_every_probe_names_existing_reference_functions():
    for probe in kernels.load_probes():
        buffers = kernels.probe_buffers(probe)
        assert callable(kernels.reference_function(probe, "reference")) and list(buffers) == list(probe.params)


def test_an_unknown_reference_function_is_named_when_it_is_needed(tmp_path):
    _write_probe(tmp_path, GOOD_HEADER.replace("e2m1_cvt_expected", "no_such_function"))
    [probe] = kernels.load_probes(tmp_path)  # loading stays cheap: fp_reference is imported for GPU runs only
    with pytest.raises(kernels.ProbeError, match="'reference' names no function") as err:
        kernels.reference_function(probe, "reference")
    assert str(tmp_path / "x.ptx") in str(err.value)


def test_probe_without_arch_placeholder_and_duplicate_ids(tmp_path):
    _write_probe(tmp_path / "a", GOOD_HEADER, ".version 8.8\n.target sm_121a\n")
    with pytest.raises(kernels.ProbeError, match="@ARCH@"):
        kernels.load_probes(tmp_path / "a")
    _write_probe(tmp_path / "b", GOOD_HEADER)
    shutil.copy(tmp_path / "b" / "x.ptx", tmp_path / "b" / "y.ptx")
    with pytest.raises(kernels.ProbeError, match="used twice"):
        kernels.load_probes(tmp_path / "b")


# ---- real ptxas -----------------------------------------------------------------------------------


def _compile_cubin(ptxas: str, probe_id: str, arch: str, tmp_path: Path) -> bytes:
    import threading

    probe = next(p for p in kernels.load_probes() if p.id == probe_id)
    job = kernels.Job(probe, kernels.Tool(ptxas, ptxas_version(ptxas), "pip", ptxas), arch, "target", key=f"cubin-{probe_id}-{arch}")
    kernels.compile_job(job, tmp_path, set(), threading.Lock())
    assert job.cubin is not None, job.record["error"]
    return job.cubin


def _compile(ptxas: str, probe_id: str, arch: str, tmp_path: Path) -> dict:
    import threading

    probe = next(p for p in kernels.load_probes() if p.id == probe_id)
    tool = kernels.Tool(ptxas, ptxas_version(ptxas), "system", ptxas)
    job = kernels.Job(probe, tool, arch, "target")
    job.record = kernels.new_record(job)
    kernels.compile_job(job, tmp_path, set(), threading.Lock())
    return job.record


@needs_ptxas
@pytest.mark.parametrize("probe_id", SM12X)
def test_system_ptxas_assembles_sm12x_probes_for_a_and_f_targets(probe_id, tmp_path):
    for arch in ("sm_121a", "sm_121f", "sm_120a"):
        rec = _compile(SYSTEM_PTXAS, probe_id, arch, tmp_path)
        assert rec["outcome"] == "compiled", (arch, rec["error"])


@needs_ptxas
@pytest.mark.parametrize("probe_id", SM12X)
def test_system_ptxas_rejects_sm12x_probes_for_plain_sm_121(probe_id, tmp_path):
    rec = _compile(SYSTEM_PTXAS, probe_id, "sm_121", tmp_path)
    assert rec["outcome"] == "rejected" and not rec["compiled"]
    assert "not supported on .target 'sm_121'" in rec["error"]
    assert rec["explanation"] == "these instructions need sm_121a or sm_121f; a build that targets plain sm_121 cannot use them"


@needs_ptxas
def test_system_ptxas_rejects_the_fp4_instructions_on_hopper(tmp_path):
    rec = _compile(SYSTEM_PTXAS, "nvfp4-mma", "sm_90a", tmp_path)
    assert rec["outcome"] == "rejected" and rec["explanation"] == "sm_90a does not have this instruction"


@needs_ptxas
def test_fp8_probe_assembles_for_hopper_and_ada(tmp_path):
    for arch in ("sm_90", "sm_90a", "sm_89"):
        assert _compile(SYSTEM_PTXAS, "fp8-mma-sm90", arch, tmp_path)["outcome"] == "compiled"


@pytest.mark.parametrize("probe_id", SM12X)
def test_pip_ptxas_13_assembles_for_sm_121a_and_rejects_plain(probe_id, tmp_path):
    assert PIP_PTXAS, "no nvidia-cuda-nvcc wheel in this environment: pip install -e '.[test]'"
    assert _compile(PIP_PTXAS, probe_id, "sm_121a", tmp_path)["outcome"] == "compiled"
    rec = _compile(PIP_PTXAS, probe_id, "sm_121", tmp_path)
    assert rec["outcome"] == "rejected" and "need sm_121a or sm_121f" in rec["explanation"]


@pytest.mark.slow
def test_pip_ptxas_12_8_cannot_target_sm_121a(tmp_path):
    from tests import venvs

    python = venvs.shared_venv("nvcc-cu12-12.8", ["nvidia-cuda-nvcc-cu12==12.8.93"])
    ptxas = next(python.parent.parent.glob("lib/python*/site-packages/nvidia/cuda_nvcc/bin/ptxas"))
    rec = _compile(str(ptxas), "nvfp4-mma", "sm_121a", tmp_path)
    assert rec["outcome"] == "rejected"
    assert rec["explanation"] == "ptxas 12.8.93 does not know sm_121a: targeting it needs CUDA 12.9 or newer"
    # the probes are written in PTX ISA 8.7, raised to 8.8 only for sm_121a: sm_120a works with 12.8
    assert _compile(str(ptxas), "nvfp4-mma", "sm_120a", tmp_path)["outcome"] == "compiled"
    rec = _compile(str(ptxas), "nvfp4-mma", "sm_120f", tmp_path)
    assert rec["outcome"] == "rejected" and rec["explanation"].startswith("ptxas 12.8.93 ")
    # its cubins use both e_flags layouts (ABI 7 up to sm_90, ABI 8 after) with the 'a' bit set
    assert kernels.cubin_arch(_compile_cubin(str(ptxas), "fp8-mma-sm90", "sm_90a", tmp_path)) == ("sm_90a", None)
    assert kernels.cubin_arch(_compile_cubin(str(ptxas), "nvfp4-mma", "sm_120a", tmp_path)) == ("sm_120a", None)


# ---- the collector end to end ---------------------------------------------------------------------


@needs_ptxas
def test_collector_without_gpu_or_arch_compiles_for_sm_121a_and_says_so(tmp_path, no_disassembler):
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()]))["kernels"]
    assert set(out) == set(SM12X)  # the sm_90 proof stays out of a Spark check
    for entry in out.values():
        assert entry["status"] == "ok", entry["detail"]
        assert entry["arch"] == "sm_121a" and entry["arch_source"] == "assumed"
        assert entry["detail"].startswith("arch sm_121a assumed (")
        [run] = entry["runs"]
        assert run["compiled"] and run["ran"] is None and run["verified"] is None
        assert run["run_note"] == "compiled, not run: no sm_121a GPU here"
        assert "compiled, not run: no sm_121a GPU here" in entry["detail"]


@needs_ptxas
def test_hopper_target_adds_the_fp8_proof_and_keeps_fp4_on_sm_121a(tmp_path, no_disassembler):
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_90a"))["kernels"]
    assert out["fp8-mma-sm90"]["arch"] == "sm_90a" and out["fp8-mma-sm90"]["status"] == "ok"
    for pid in SM12X:
        assert out[pid]["arch"] == "sm_121a" and out[pid]["arch_source"] == "home"
        assert "the target sm_90a is not sm_120/sm_121: compiled for sm_121a" in out[pid]["detail"]


@needs_ptxas
def test_plain_sm_121_target_fails_with_the_reason(tmp_path, no_disassembler):
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121"))["kernels"]
    for pid in SM12X:
        assert out[pid]["status"] == "fail"
        assert "need sm_121a or sm_121f; a build that targets plain sm_121 cannot use them" in out[pid]["detail"]


def test_plain_sm12x_settings_are_read_from_the_build_arch_lists():
    got = kernels.plain_sm12x_settings({"TORCH_CUDA_ARCH_LIST": "8.0 9.0;12.1+PTX", "FLASHINFER_CUDA_ARCH_LIST": "12.0,12.1a"})
    assert got == [("TORCH_CUDA_ARCH_LIST=8.0 9.0;12.1+PTX", "sm_121"), ("FLASHINFER_CUDA_ARCH_LIST=12.0,12.1a", "sm_120")]
    assert kernels.plain_sm12x_settings({"TORCH_CUDA_ARCH_LIST": "12.1a", "FLASHINFER_CUDA_ARCH_LIST": "12.1f 9.0a"}) == []
    assert kernels.plain_sm12x_settings({}) == []


def test_a_vllm_built_for_plain_sm121_is_diagnosed_but_release_sm120_is_not():
    release = {"vllm.cubin_archs": {"value": ["sm_90a", "sm_100f", "sm_120", "sm_120f"], "evidence": "x"}}
    assert kernels.plain_sm12x_settings({}, release) == []
    stripped = {"vllm.cubin_archs": {"value": ["sm_90a", "sm_121"], "evidence": "x"}}
    assert kernels.plain_sm12x_settings({}, stripped) == [("vLLM's compiled kernels target sm_121", "sm_121")]
    assert kernels.plain_sm12x_settings({}, {"vllm.cubin_archs": {"value": None, "evidence": "?"}}) == []


@needs_ptxas
def test_a_plain_12_1_build_setting_gets_a_diagnosis_compile(tmp_path, no_disassembler):
    ctx = make_ctx(tmp_path, [system_toolkit()], env={"TORCH_CUDA_ARCH_LIST": "12.1"})
    entry = kernels.run(ctx)["kernels"]["nvfp4-mma"]
    assert entry["status"] == "ok"  # the target (sm_121a) is fine ...
    [diag] = [r for r in entry["runs"] if r["purpose"] == "diagnosis"]
    assert diag["arch"] == "sm_121" and diag["compiled"] is False and diag["setting"] == "TORCH_CUDA_ARCH_LIST=12.1"
    # ... and the report says what the plain build would get
    assert "TORCH_CUDA_ARCH_LIST=12.1 targets plain sm_121: these instructions need sm_121a or sm_121f" in entry["detail"]
    ok = kernels.run(make_ctx(tmp_path, [system_toolkit()], env={"TORCH_CUDA_ARCH_LIST": "12.1a"}))["kernels"]["nvfp4-mma"]
    assert [r["purpose"] for r in ok["runs"]] == ["target"]


def test_unknown_or_missing_ptxas_is_skipped_not_failed(tmp_path):
    out = kernels.run(make_ctx(tmp_path, None))["kernels"]
    assert {e["status"] for e in out.values()} == {"skipped"}
    assert "toolkits collector did not report" in out["fp4-mma"]["detail"]
    out = kernels.run(make_ctx(tmp_path, []))["kernels"]
    assert out["fp4-mma"]["status"] == "skipped" and out["fp4-mma"]["detail"] == "no ptxas found"
    out = kernels.run(make_ctx(tmp_path, [{"tool": "ptxas", "path": "/opt/x/ptxas", "error": "exec format error"}]))["kernels"]
    assert out["fp4-mma"]["detail"] == "no ptxas found (/opt/x/ptxas: exec format error)"


def test_kernels_off_reports_nothing(tmp_path):
    ctx = make_ctx(tmp_path, [])
    ctx.kernels = False
    assert kernels.run(ctx) == {}


# ---- broken compilers ------------------------------------------------------------------------------


def test_a_hanging_ptxas_times_out_fast_and_is_not_cached(tmp_path, monkeypatch, no_disassembler):
    monkeypatch.setattr(kernels.assemble, "COMPILE_TIMEOUT", 0.5)
    hang = fake_ptxas(tmp_path, "ptxas", "exec sleep 60")
    toolkits = [{"tool": "ptxas", "path": hang, "version": "13.0.88", "source": "system"}]
    start = time.monotonic()
    out = kernels.run(make_ctx(tmp_path, toolkits))["kernels"]
    assert time.monotonic() - start < 30  # its 0.5 s limit, not the 60 s sleep; room for a loaded machine
    for entry in out.values():
        assert entry["status"] == "timeout"
        assert entry["runs"][0]["outcome"] == "timeout"
    errors = {entry["runs"][0]["error"] for entry in out.values()}
    assert errors <= {"ptxas timed out after 0s", "not tried: this ptxas hung on another probe (over 0s)"}
    again = kernels.run(make_ctx(tmp_path, toolkits))["kernels"]
    assert not any(e["runs"][0]["cached"] for e in again.values())


def test_a_crashing_ptxas_is_an_error_with_its_signal(tmp_path, no_disassembler):
    crash = fake_ptxas(tmp_path, "ptxas", "kill -SEGV $$")
    out = kernels.run(make_ctx(tmp_path, [{"tool": "ptxas", "path": crash, "version": "13.0.88", "source": "pip"}]))["kernels"]
    entry = out["nvfp4-mma"]
    assert entry["status"] == "error"
    assert "SIGSEGV" in entry["runs"][0]["error"] and "SIGSEGV" in entry["detail"]


@needs_ptxas
def test_an_old_ptxas_gets_a_reason_and_the_one_that_knows_the_arch_decides(tmp_path, no_disassembler):
    old = fake_ptxas(
        tmp_path, "ptxas-12.8",
        "echo \"ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\" >&2; exit 255",
    )
    toolkits = [{"tool": "ptxas", "path": old, "version": "12.8.93", "source": "triton", "used_by": ["triton"]}]
    entry = kernels.run(make_ctx(tmp_path, toolkits))["kernels"]["mxf4-mma"]
    assert entry["status"] == "fail"
    assert entry["runs"][0]["explanation"] == "ptxas 12.8.93 does not know sm_121a: targeting it needs CUDA 12.9 or newer"
    # with a system ptxas that knows sm_121a beside it, that one is tried first and decides
    entry = kernels.run(make_ctx(tmp_path, [*toolkits, system_toolkit()]))["kernels"]["mxf4-mma"]
    assert entry["status"] == "ok"
    assert [r["ptxas_source"] for r in entry["runs"]] == ["system", "triton"]
    assert "(1/2 ptxas compiled it)" in entry["detail"]
    assert "; the ptxas triton uses, ptxas 12.8.93 (triton), does not: ptxas 12.8.93 does not know sm_121a" in entry["detail"]


# ---- cache ---------------------------------------------------------------------------------------


def _statuses(out):
    return {pid: (e["status"], [(r["outcome"], r["arch"]) for r in e["runs"]]) for pid, e in out.items()}


def _cpu_s() -> float:
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@needs_ptxas
def test_cache_hit_miss_and_corruption(tmp_path, no_disassembler):
    tk = [system_toolkit()]
    start = _cpu_s()
    cold = kernels.run(make_ctx(tmp_path, tk, env={"TORCH_CUDA_ARCH_LIST": "12.1"}))["kernels"]
    cold_s = _cpu_s() - start
    assert not any(r["cached"] for e in cold.values() for r in e["runs"])
    start = _cpu_s()  # CPU seconds, this process's and its children's (a ptxas run is a child): wall time on a busy
    warm = kernels.run(make_ctx(tmp_path, tk, env={"TORCH_CUDA_ARCH_LIST": "12.1"}))["kernels"]  # machine says little
    warm_s = _cpu_s() - start
    assert all(r["cached"] for e in warm.values() for r in e["runs"])
    assert _statuses(warm) == _statuses(cold)
    # measured 1.5 ms against the cold run's 105 ms (its ptxas runs); it was held to 250 ms of wall time
    assert warm_s * 3 < cold_s, f"warm kernel collector took {warm_s * 1000:.0f} ms of CPU, the cold one {cold_s * 1000:.0f}"

    cache = tmp_path / "cache" / "kernels"
    entries = sorted(cache.glob("*.json"))
    entries[0].write_text("{ not json")
    entries[1].write_text(json.dumps({"v": kernels.CACHE_VERSION, "key": "someone-else", "record": {"outcome": "compiled", "compiled": True}}))
    again = kernels.run(make_ctx(tmp_path, tk, env={"TORCH_CUDA_ARCH_LIST": "12.1"}))["kernels"]
    runs = [r for e in again.values() for r in e["runs"]]
    assert sum(not r["cached"] for r in runs) == 2  # the two damaged entries were recomputed ...
    assert _statuses(again) == _statuses(cold)  # ... to the same verdicts
    assert json.loads(entries[0].read_text())["record"]  # and rewritten

    forced = kernels.run(make_ctx(tmp_path, tk, use_cache=False))["kernels"]
    assert not any(r["cached"] for e in forced.values() for r in e["runs"])


@needs_ptxas
def test_cache_key_changes_with_the_ptxas_and_the_source(tmp_path, monkeypatch, no_disassembler):
    wrapper = fake_ptxas(tmp_path, "ptxas", f'exec "{os.path.realpath(SYSTEM_PTXAS)}" "$@"')
    tk = [{"tool": "ptxas", "path": wrapper, "version": ptxas_version(SYSTEM_PTXAS), "source": "system"}]
    kernels.run(make_ctx(tmp_path, tk))
    assert all(e["runs"][0]["cached"] for e in kernels.run(make_ctx(tmp_path, tk))["kernels"].values())
    os.utime(wrapper, (1, 1))  # a reinstalled ptxas: new mtime
    assert not any(e["runs"][0]["cached"] for e in kernels.run(make_ctx(tmp_path, tk))["kernels"].values())

    probes = tmp_path / "probes"
    shutil.copytree(kernels.probes_dir(), probes)
    monkeypatch.setattr(kernels.probes, "probes_dir", lambda: probes)
    kernels.run(make_ctx(tmp_path, tk))
    edited = probes / "nvfp4-mma.ptx"
    edited.write_text(edited.read_text().replace("ret;", "ret; // edited"))
    out = kernels.run(make_ctx(tmp_path, tk))["kernels"]
    assert {pid: e["runs"][0]["cached"] for pid, e in out.items()} == {pid: pid != "nvfp4-mma" for pid in SM12X}


def test_a_cached_fail_is_never_served_for_another_arch(tmp_path):
    cache = kernels.Cache(tmp_path, read=True)
    cache.put("k1", {"outcome": "rejected", "compiled": False})
    assert cache.get("k1")[0]["outcome"] == "rejected"
    assert cache.get("k2") is None
    assert kernels.Cache(tmp_path, read=False).get("k1") is None


# ---- SASS ----------------------------------------------------------------------------------------

NVDISASM_SAMPLE = """
//--------------------- .text.probe_nvfp4_mma    --------------------------
\t.section\t.text.probe_nvfp4_mma,"ax",@progbits
probe_nvfp4_mma:
.text.probe_nvfp4_mma:
        /*0130*/                   LDG.E R11, desc[UR4][R10.64] ;
        /*0140*/                   OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X R16, R16, R4, R20, R8, R11, URZ ;
//--------------------- .text.probe_fp4_mma    --------------------------
        /*00e0*/                   QMMA.16832.F32.E2M1.E2M1 R12, R12, R4, R16 ;
"""

CUOBJDUMP_SAMPLE = """
\tcode for sm_90
\t\tFunction : probe_fp8_mma
        /*0150*/                   HMMA.16816.F32 R12, R12, R16, RZ ;      /* 0x000000100c0c723c */
                                                                           /* 0x000fe20000000800 */
"""


def test_split_sass_reads_nvdisasm_and_cuobjdump_output():
    got = kernels.split_sass(NVDISASM_SAMPLE)
    assert got["probe_nvfp4_mma"][-1] == "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X R16, R16, R4, R20, R8, R11, URZ"
    assert got["probe_fp4_mma"] == ["QMMA.16832.F32.E2M1.E2M1 R12, R12, R4, R16"]
    assert kernels.split_sass(CUOBJDUMP_SAMPLE) == {"probe_fp8_mma": ["HMMA.16816.F32 R12, R12, R16, RZ"]}


def test_check_sass_names_what_it_found_instead():
    probe = next(p for p in kernels.load_probes() if p.id == "nvfp4-mma")
    ok, text = kernels.check_sass(probe, ["LDG.E R1", "HMMA.16816.F32 R1, R2, R3, RZ"], None)
    assert ok is False and "tensor/convert instructions: HMMA.16816.F32" in text
    assert kernels.check_sass(probe, None, "no nvdisasm or cuobjdump found") == (None, "SASS not checked: no nvdisasm or cuobjdump found")


@needs_ptxas
def test_sass_holds_the_tensor_core_instructions(tmp_path):
    if kernels.find_disassembler(kernels.Tool(SYSTEM_PTXAS, None, "system", "")) is None:
        pytest.skip("no nvdisasm/cuobjdump (pip install nvidia-cuda-nvdisasm)")
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()]))["kernels"]
    want = {
        "e2m1-cvt": "F2FP.SATFINITE.E2M1.F32.PACK_AB_MERGE_C",
        "fp4-mma": "QMMA.16832.F32.E2M1.E2M1",
        "nvfp4-mma": "OMMA.SF.16864.F32.E2M1.E2M1.UE4M3.4X",
        "mxf4-mma": "OMMA.SF.16864.F32.E2M1.E2M1.E8",
    }
    for pid, opcode in want.items():
        run = out[pid]["runs"][0]
        assert run["sass_ok"] is True and opcode in run["sass"], run["sass"]


@needs_ptxas
def test_sass_is_still_read_when_a_probe_of_the_group_does_not_compile(tmp_path, monkeypatch):
    if kernels.find_disassembler(kernels.Tool(SYSTEM_PTXAS, None, "system", "")) is None:
        pytest.skip("no nvdisasm/cuobjdump (pip install nvidia-cuda-nvdisasm)")
    probes = tmp_path / "probes"
    shutil.copytree(kernels.probes_dir(), probes)
    broken = probes / "mxf4-mma.ptx"
    broken.write_text(broken.read_text().replace("ret;", "ret; this is not PTX;"))
    monkeypatch.setattr(kernels.probes, "probes_dir", lambda: probes)
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()]))["kernels"]
    assert out["mxf4-mma"]["status"] == "fail" and out["mxf4-mma"]["runs"][0]["sass_ok"] is None
    assert out["nvfp4-mma"]["runs"][0]["sass_ok"] is True and "OMMA.SF.16864" in out["nvfp4-mma"]["runs"][0]["sass"]


# ---- the GPU path through its seams ----------------------------------------------------------------


def _reference_outputs(probe_entry: str, request: dict, corrupt: bool = False) -> dict:
    probe = next(p for p in kernels.load_probes() if p.entry == probe_entry)
    inputs = {b["name"]: bytes.fromhex(b["hex"]) for b in request["buffers"] if "hex" in b}
    outputs = {}
    for expected in getattr(fp_probes, probe.reference)(inputs):
        values = list(expected.values)
        if corrupt:
            values[5] = values[5] + 1 if expected.fmt == "f" else values[5] ^ 0x1
        outputs[expected.name] = struct.pack(f"<{len(values)}{expected.fmt}", *values).hex()
    return outputs


GB10 = [{"index": 0, "name": "NVIDIA GB10", "cc": "12.1", "arch": "sm_121a"}]


@needs_ptxas
def test_a_matching_gpu_runs_verifies_and_caches(tmp_path, monkeypatch, no_disassembler):
    calls = []

    def gpu(requests, timeout=None):
        calls.append(len(requests))
        return [{"id": r["id"], "ok": True, "ms": 1.0, "device": {"name": "NVIDIA GB10", "cc": "12.1"},
                 "outputs": _reference_outputs(r["entry"], r)} for r in requests]

    monkeypatch.setattr(kernels.gpu_run, "run_on_gpu", gpu)
    ctx = make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10, driver={"version": "580.95.05"})
    out = kernels.run(ctx)["kernels"]
    assert calls == [4]  # one child process for every run
    for pid in SM12X:
        run = out[pid]["runs"][0]
        assert (out[pid]["status"], run["ran"], run["verified"]) == ("ok", True, True), out[pid]["detail"]
        assert run["run_note"].startswith("ran on NVIDIA GB10 (cc 12.1): ")
    again = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10, driver={"version": "580.95.05"}))["kernels"]
    assert calls == [4] and all(e["runs"][0]["verified"] for e in again.values())
    # a new driver is a new run
    kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10, driver={"version": "590.1"}))
    assert calls == [4, 4]


@needs_ptxas
def test_wrong_gpu_results_fail_and_a_broken_run_is_an_error(tmp_path, monkeypatch, no_disassembler):
    monkeypatch.setattr(kernels.gpu_run, "run_on_gpu", lambda reqs, timeout=None: [
        {"id": r["id"], "ok": True, "device": {"name": "NVIDIA GB10", "cc": "12.1"}, "outputs": _reference_outputs(r["entry"], r, corrupt=True)}
        for r in reqs])
    out = kernels.run(make_ctx(tmp_path, [system_toolkit()], arch="sm_121a", gpus=GB10))["kernels"]
    assert out["nvfp4-mma"]["status"] == "fail" and "WRONG RESULTS" in out["nvfp4-mma"]["detail"]
    assert "1 of 128 differ" in out["nvfp4-mma"]["runs"][0]["run_note"]
    assert out["e2m1-cvt"]["runs"][0]["verified"] is False

    monkeypatch.setattr(kernels.gpu_run, "run_on_gpu", lambda reqs, timeout=None: [
        {"id": r["id"], "ok": False, "error": "cuLaunchKernel: CUDA_ERROR_ILLEGAL_INSTRUCTION (an illegal instruction was encountered)"}
        for r in reqs])
    out = kernels.run(make_ctx(tmp_path / "other", [system_toolkit()], arch="sm_121a", gpus=GB10))["kernels"]
    assert out["fp4-mma"]["status"] == "error" and "CUDA_ERROR_ILLEGAL_INSTRUCTION" in out["fp4-mma"]["detail"]
    assert out["fp4-mma"]["runs"][0]["ran"] is False


def test_matching_gpu_respects_arch_specific_cubins():
    assert kernels.matching_gpu(GB10, "sm_121a") == GB10[0]
    assert kernels.matching_gpu(GB10, "sm_120a") is None  # an sm_120a cubin does not load on 12.1
    assert kernels.matching_gpu(GB10, "sm_120f") == GB10[0]  # a family cubin does
    assert kernels.matching_gpu([{"cc": "9.0"}], "sm_90") == {"cc": "9.0"}
    assert kernels.matching_gpu(None, "sm_90") is None
    assert cuda_driver.cc_matches((12, 1), (12, 0), exact=False) and not cuda_driver.cc_matches((12, 1), (12, 0), exact=True)


def _libcuda_loads() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_libcuda_loads(), reason="this machine has a CUDA driver")
def test_the_real_gpu_runner_without_a_driver_reports_it(tmp_path):
    request = {"id": "x", "cubin": str(tmp_path / "none.cubin"), "entry": "k", "threads": 32, "cc": [12, 1], "buffers": []}
    [result] = kernels.run_on_gpu([request])
    assert result["ok"] is False and "libcuda.so.1" in result["error"]


def test_cuda_driver_script_usage():
    assert cuda_driver.main(["cuda_driver.py"]) == 2


# ---- committed H100 evidence ---------------------------------------------------------------------


def test_h100_evidence_fp8_run_matches_the_reference_recomputed_here():
    raw = json.loads((DATA / "raw-runs.json").read_text())
    assert raw["gpu"]["name"].startswith("NVIDIA H100") and raw["gpu"]["cc"] == "9.0"
    run = raw["runs"]["fp8-mma-sm90"]
    assert run["verified"] is True and run["device"]["cc"] == "9.0"
    probe = next(p for p in kernels.load_probes() if p.id == "fp8-mma-sm90")
    assert run["probe_sha256"] == probe.sha256, (
        "probes/kernels/fp8-mma-sm90.ptx changed since the H100 run: regenerate tests/data/h100/ with "
        "SPARKDOCTOR_EVIDENCE_DIR=... pytest tests/test_gpu_kernels.py on an sm_90 GPU"
    )
    inputs = {k: bytes.fromhex(v) for k, v in run["inputs"].items()}
    # the evidence was made from today's generator and today's reference agrees with the GPU
    assert inputs == {k: v for k, v in fp_probes.fp8_mma_inputs().items() if isinstance(v, bytes)}
    [expected] = fp_probes.fp8_mma_expected(inputs)
    ok, note = expected.compare(bytes.fromhex(run["outputs"]["d"]))
    assert ok, note
    # and it is not a trivial result
    values = struct.unpack("<128f", bytes.fromhex(run["outputs"]["d"]))
    assert len(set(values)) > 64 and any(v < 0 for v in values) and any(v != int(v) for v in values)


@pytest.mark.parametrize("name", ["collector-sm_90a.json", "collector-sm_90.json"])
def test_h100_evidence_collector_verified_fp8_and_only_compiled_fp4(name):
    data = json.loads((DATA / name).read_text())
    facts = data["kernels"]
    fp8 = facts["fp8-mma-sm90"]
    assert fp8["status"] == "ok" and fp8["arch"] in ("sm_90", "sm_90a")
    assert all(r["ran"] is True and r["verified"] is True for r in fp8["runs"])
    assert "all 128 values match the reference" in fp8["detail"]
    for pid in SM12X:  # an H100 cannot run FP4: compiled for sm_121a, honestly not run
        assert facts[pid]["arch"] == "sm_121a"
        for r in facts[pid]["runs"]:
            assert r["compiled"] is True and r["ran"] is None and r["verified"] is None
            assert r["run_note"] == "compiled, not run: no sm_121a GPU here"


def test_a_cache_entry_cannot_rename_the_ptxas_or_the_arch_it_answers_for(tmp_path):
    """A cached record was merged whole into the job's: an entry whose `arch` was not a string ended `check` in an
    internal error (TypeError in the console's join), and one naming another ptxas or arch was shown as if that had
    compiled. What a job is (its ptxas, arch, purpose) stays the job's; an entry says only what happened. Real
    `sparkdoctor check` runs, the cache written by the first and edited as a hand or another program would."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="200",
               PYTHONPATH=str(Path(__file__).resolve().parents[1]))

    def check(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--arch", "sm_121a", *args], env=env,
                              capture_output=True, text=True, timeout=300, check=False)

    first = check("--format", "json")
    assert first.returncode in (0, 1), first.stderr
    entries = sorted((tmp_path / "cache" / "kernels").glob("*.json"))
    assert entries
    for entry in entries:
        body = json.loads(entry.read_text())
        body["record"].update(arch=1, ptxas="/elsewhere/ptxas")
        entry.write_text(json.dumps(body))
    shown = check()
    assert shown.returncode in (0, 1) and "internal error" not in shown.stderr, shown.stderr
    again = check("--format", "json")
    assert again.returncode in (0, 1) and "internal error" not in again.stderr, again.stderr
    runs = [r for e in json.loads(again.stdout)["facts"]["kernels"].values() for r in e.get("runs") or []]
    assert runs and any(r["cached"] for r in runs)
    assert all(r["arch"] == "sm_121a" and r["ptxas"] != "/elsewhere/ptxas" for r in runs), runs
