"""The gpu collector: the real no-GPU path, real (fake-script) nvidia-smi runs, NVML answers from a GB10-like stand-in."""

from __future__ import annotations

import ctypes.util
import dataclasses
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pynvml
import pytest

from sparkdoctor.collect import CollectorError, Context, gpu, gpu_query, run_collectors
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget

GB10_CSV = "0, NVIDIA GB10, 12.1, [N/A], 580.95.05\n"
CC = shutil.which("cc") or shutil.which("gcc")  # looked up before any test narrows PATH
HAS_NVIDIA = bool(shutil.which("nvidia-smi") or ctypes.util.find_library("nvidia-ml") or ctypes.util.find_library("cuda"))


@pytest.fixture(autouse=True)
def answers_are_waited_for(monkeypatch):
    """nvidia-smi's and the helper's 5 s limits are wall-clock: a stand-in (or the real helper) that answers at once
    must not time out on a loaded machine. Only the tests of a hang set a short limit, after this."""
    monkeypatch.setattr(gpu, "SMI_TIMEOUT", 600.0)
    monkeypatch.setattr(gpu, "HELPER_TIMEOUT", 600.0)


# the collector's own limit (17 s, from the 5 s ones) is wall-clock too: the tests that expect an answer lift it
ANSWERING = dataclasses.replace(gpu.COLLECTOR, timeout=600.0)


def make_ctx(arch: str | None = None) -> Context:
    return Context(target=PythonTarget(sys.executable, "test"), facts=Facts(), arch_override=arch)


def fake_tool(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def smi_path(tmp_path, monkeypatch):
    """A PATH of one folder for fake tools: a real nvidia-smi (on a GPU machine) stays out of sight."""
    folder = tmp_path / "bin"
    folder.mkdir()
    os.symlink(shutil.which("sleep"), folder / "sleep")  # the fake scripts' only non-builtin
    monkeypatch.setenv("PATH", str(folder))
    return folder


def answered(monkeypatch, nvml, libcuda: str | None = None) -> None:
    """The driver libraries' answers, as the helper process would give them."""
    monkeypatch.setattr(gpu, "query_libraries", lambda: gpu.Libraries(nvml, libcuda))


def nvml_of(fake) -> object:
    """A stand-in pynvml read by the helper's own code, interpreted by the collector's."""
    return gpu._nvml_of({"stage": "nvml", **gpu_query.nvml_answer(fake)})


@pytest.fixture
def no_nvml(monkeypatch):
    answered(monkeypatch, gpu.Missing("libnvidia-ml.so.1 not found"))


# ---- pure helpers --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "cc,arch",
    [("12.1", "sm_121a"), ("12.0", "sm_120a"), ("10.0", "sm_100a"), ("9.0", "sm_90a"), ("8.9", "sm_89"), ("8.0", "sm_80"), ("x", None)],
)
def test_arch_of(cc, arch):
    assert gpu.arch_of(cc) == arch


def test_cuda_version_of():
    assert gpu.cuda_version_of(13000) == "13.0"
    assert gpu.cuda_version_of(12090) == "12.9"
    assert gpu.cuda_version_of(12080) == "12.8"


def test_parse_smi_csv_gb10():
    obs = gpu.parse_smi_csv(GB10_CSV)
    assert obs.gpus == [{"index": 0, "name": "NVIDIA GB10", "cc": "12.1", "arch": "sm_121a", "memory_total_mib": None, "unified": None}]
    assert obs.driver == {"version": "580.95.05", "source": "nvidia-smi"}


def test_parse_smi_csv_discrete_and_comma_in_name():
    obs = gpu.parse_smi_csv("0, NVIDIA H100 80GB HBM3, 9.0, 81559, 570.86.15\n1, Odd, Name, 8.9, 24564, 570.86.15\n")
    assert [g["arch"] for g in obs.gpus] == ["sm_90a", "sm_89"]
    assert obs.gpus[0]["memory_total_mib"] == 81559
    assert obs.gpus[1]["name"] == "Odd, Name"


@pytest.mark.parametrize("text", ["garbage\n", "", "NVIDIA-SMI has failed because it couldn't communicate\n"])
def test_parse_smi_csv_rejects_other_output(text):
    with pytest.raises(gpu.Failed):
        gpu.parse_smi_csv(text)


# ---- the real no-GPU path of this machine ------------------------------------------------------------
@pytest.mark.skipif(HAS_NVIDIA, reason="this machine has NVIDIA libraries or nvidia-smi")
def test_no_gpu_for_real(smi_path):
    out = gpu.run(make_ctx())
    assert out == {"gpus": [], "driver": {}, "arch": {"value": "sm_121a", "source": "assumed", "why": "no GPU detected"}}


@pytest.mark.skipif(HAS_NVIDIA, reason="this machine has NVIDIA libraries or nvidia-smi")
def test_no_gpu_with_given_arch_for_real(smi_path):
    out = gpu.run(make_ctx(arch="sm_121a"))
    assert out["gpus"] == []
    assert out["arch"] == {"value": "sm_121a", "source": "given", "detected": None}


@pytest.mark.skipif(HAS_NVIDIA, reason="this machine has NVIDIA libraries or nvidia-smi")
def test_real_nvml_reports_missing_library():
    libs = gpu.query_libraries()  # the real helper process
    assert isinstance(libs.nvml, gpu.Missing) and libs.libcuda is None and libs.problems == []


# ---- real nvidia-smi processes (fake scripts on PATH) -------------------------------------------
def test_smi_gb10_csv(smi_path, no_nvml):
    fake_tool(smi_path, "nvidia-smi", f"printf '{GB10_CSV}'")
    out = gpu.run(make_ctx())
    assert out["gpus"][0]["name"] == "NVIDIA GB10"
    assert out["driver"] == {"version": "580.95.05", "source": "nvidia-smi"}
    assert out["arch"] == {"value": "sm_121a", "source": "detected"}


def test_smi_gets_the_query_arguments(smi_path, no_nvml):
    log = smi_path / "argv"
    fake_tool(smi_path, "nvidia-smi", f'echo "$@" > {log}\nprintf \'{GB10_CSV}\'')
    gpu.run(make_ctx())
    assert log.read_text().split() == gpu.SMI_QUERY


def test_smi_hang_times_out_in_about_5s(smi_path, no_nvml, monkeypatch):
    monkeypatch.setattr(gpu, "SMI_TIMEOUT", 5.0)  # the default, timed here
    fake_tool(smi_path, "nvidia-smi", "sleep 600")
    start = time.monotonic()
    with pytest.raises(CollectorError) as err:
        gpu.run(make_ctx())
    took = time.monotonic() - start
    # its 5 s limit, not the 600 s hang; the upper bound (it was 9 s) leaves a loaded machine room to kill and reap it
    assert 4.5 <= took < 120, took
    assert "timed out after 5" in str(err.value)
    assert "\n" not in str(err.value)


def test_smi_hang_is_an_error_line_not_fatal(smi_path, no_nvml, monkeypatch):
    monkeypatch.setattr(gpu, "SMI_TIMEOUT", 1.0)  # the 5 s default is timed in the test above
    fake_tool(smi_path, "nvidia-smi", "sleep 60")
    facts = run_collectors(make_ctx(), [gpu.COLLECTOR])
    assert facts.gpus is None and facts.driver is None  # unknown, not "no GPU"
    assert facts.arch["source"] == "unknown"
    assert len(facts.errors) == 1 and facts.errors[0]["collector"] == "gpu"
    assert "timed out" in facts.errors[0]["error"]


def test_smi_exit_9_driver_not_loaded(smi_path, no_nvml):
    fake_tool(smi_path, "nvidia-smi", "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2; exit 9")
    with pytest.raises(CollectorError) as err:
        gpu.run(make_ctx())
    assert "exited 9" in str(err.value) and "NVIDIA driver" in str(err.value)


def test_smi_exit_12_means_no_driver_libraries(smi_path, no_nvml):
    fake_tool(smi_path, "nvidia-smi", "echo 'NVIDIA-SMI could not find libnvidia-ml.so library in your system.'; exit 12")
    assert gpu.run(make_ctx())["gpus"] == []


def test_smi_no_devices(smi_path, no_nvml):
    fake_tool(smi_path, "nvidia-smi", "echo 'No devices were found'; exit 6")
    out = gpu.run(make_ctx())
    assert out["gpus"] == [] and out["arch"] == {"value": "sm_121a", "source": "assumed", "why": "no GPU detected"}


def test_smi_killed_by_signal(smi_path, no_nvml):
    fake_tool(smi_path, "nvidia-smi", "kill -SEGV $$")
    with pytest.raises(CollectorError, match="SIGSEGV"):
        gpu.run(make_ctx())


def test_nvml_failure_falls_back_to_smi_and_says_so(smi_path, monkeypatch):
    answered(monkeypatch, gpu.Failed("NVML init: Driver Not Loaded"), "13.0")
    fake_tool(smi_path, "nvidia-smi", f"printf '{GB10_CSV}'")
    ctx = make_ctx()
    out = gpu.run(ctx)
    assert out["driver"] == {"version": "580.95.05", "source": "nvidia-smi", "libcuda": "13.0", "cuda": "13.0"}
    assert ctx.facts.errors == [{"collector": "gpu", "error": "NVML init: Driver Not Loaded; GPUs read with nvidia-smi instead"}]


def test_nvml_failure_and_no_smi_is_unknown(smi_path, monkeypatch):
    answered(monkeypatch, gpu.Failed("NVML init: Driver Not Loaded"), "13.0")
    with pytest.raises(CollectorError) as err:
        gpu.run(make_ctx())
    assert str(err.value) == "NVML init: Driver Not Loaded; libcuda reports CUDA 13.0"


def test_libcuda_alone_gives_the_driver_cuda(smi_path, monkeypatch):
    answered(monkeypatch, gpu.Missing("no lib"), "13.0")
    out = gpu.run(make_ctx())
    assert out["gpus"] == []
    assert out["driver"] == {"libcuda": "13.0", "cuda": "13.0", "source": "libcuda"}


# ---- libcuda through ctypes, against a real shared library ------------------------------------------
@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build a stand-in libcuda")
    folder = tmp_path_factory.mktemp("libcuda")
    src = folder / "cuda.c"
    src.write_text("int cuDriverGetVersion(int *v) { *v = 13000; return 0; }\n")
    lib = folder / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    return lib


def test_libcuda_version_through_ctypes(fake_libcuda):
    assert gpu_query.libcuda_encoded(str(fake_libcuda)) == 13000


def test_libcuda_version_through_the_helper_process(fake_libcuda, monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", str(fake_libcuda.parent))  # how the loader finds libcuda.so.1
    libs = gpu.query_libraries()
    assert libs.libcuda == "13.0" and libs.problems == []


def test_libcuda_without_the_symbol(tmp_path):
    libc = ctypes.util.find_library("c")
    assert gpu_query.libcuda_encoded(libc) is None  # loads, but is not libcuda
    assert gpu_query.libcuda_encoded(str(tmp_path / "nope.so")) is None


# ---- NVML answers from a GB10-like stand-in (real pynvml error classes) ------------------------------
def fake_pynvml(gpus: list[dict], init_error: int | None = None, cuda: int | None = 13000, addressing: bool = True):
    mod = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVMLError", "NVML_")):
            setattr(mod, name, getattr(pynvml, name))
    calls = {"shutdown": 0}

    def init():
        if init_error is not None:
            raise pynvml.NVMLError(init_error)

    def shutdown():
        calls["shutdown"] += 1

    def cuda_version():
        if cuda is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return cuda

    def memory(h):
        if gpus[h]["memory"] is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return types.SimpleNamespace(total=gpus[h]["memory"] * 1024 * 1024)

    mod.nvmlInit = init
    mod.nvmlShutdown = shutdown
    mod.nvmlSystemGetDriverVersion = lambda: "580.95.05"
    mod.nvmlSystemGetCudaDriverVersion = cuda_version
    mod.nvmlDeviceGetCount = lambda: len(gpus)
    mod.nvmlDeviceGetHandleByIndex = lambda i: i
    mod.nvmlDeviceGetName = lambda h: gpus[h]["name"]
    mod.nvmlDeviceGetCudaComputeCapability = lambda h: gpus[h]["cc"]
    mod.nvmlDeviceGetMemoryInfo = memory
    if addressing:
        mod.nvmlDeviceGetAddressingMode = lambda h: gpus[h]["mode"]
    mod.calls = calls
    return mod


GB10 = {"name": "NVIDIA GB10", "cc": (12, 1), "memory": None, "mode": pynvml.NVML_DEVICE_ADDRESSING_MODE_ATS}
H100 = {"name": b"NVIDIA H100 80GB HBM3", "cc": (9, 0), "memory": 81559, "mode": pynvml.NVML_DEVICE_ADDRESSING_MODE_HMM}


def test_nvml_gb10(monkeypatch):
    fake = fake_pynvml([GB10])
    answered(monkeypatch, nvml_of(fake), "13.0")
    out = gpu.run(make_ctx())
    assert out["gpus"] == [
        {"index": 0, "name": "NVIDIA GB10", "cc": "12.1", "arch": "sm_121a", "memory_total_mib": None, "unified": True, "addressing_mode": "ATS"}
    ]
    assert out["driver"] == {"version": "580.95.05", "source": "nvml", "cuda": "13.0", "libcuda": "13.0"}
    assert out["arch"] == {"value": "sm_121a", "source": "detected"}
    assert fake.calls["shutdown"] == 1


def test_nvml_discrete_gpu_is_not_unified(monkeypatch):
    answered(monkeypatch, nvml_of(fake_pynvml([H100])), None)
    g = gpu.run(make_ctx())["gpus"][0]
    assert (g["name"], g["arch"], g["memory_total_mib"], g["unified"]) == ("NVIDIA H100 80GB HBM3", "sm_90a", 81559, False)


def test_nvml_without_addressing_mode_leaves_unified_unknown(monkeypatch):
    answered(monkeypatch, nvml_of(fake_pynvml([GB10], addressing=False)), None)
    g = gpu.run(make_ctx())["gpus"][0]
    assert g["unified"] is None and g["addressing_mode"] is None


def test_nvml_cuda_version_missing_is_filled_by_libcuda(monkeypatch):
    answered(monkeypatch, nvml_of(fake_pynvml([GB10], cuda=None)), "13.0")
    assert gpu.run(make_ctx())["driver"]["cuda"] == "13.0"


def test_nvml_given_arch_keeps_detected(monkeypatch):
    answered(monkeypatch, nvml_of(fake_pynvml([H100])), None)
    assert gpu.run(make_ctx(arch="sm_121a"))["arch"] == {"value": "sm_121a", "source": "given", "detected": "sm_90a"}


def test_nvml_library_not_found_is_missing():
    assert isinstance(nvml_of(fake_pynvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)), gpu.Missing)


def test_nvml_driver_not_loaded_is_failed():
    answer = nvml_of(fake_pynvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    assert isinstance(answer, gpu.Failed) and "Driver Not Loaded" in str(answer)


def test_nvml_zero_gpus_is_observed_empty(monkeypatch):
    answered(monkeypatch, nvml_of(fake_pynvml([])), "13.0")
    out = gpu.run(make_ctx())
    assert out["gpus"] == [] and out["driver"]["version"] == "580.95.05"
    assert out["arch"] == {"value": "sm_121a", "source": "assumed", "why": "no GPU detected"}


# ---- on a machine with an NVIDIA GPU -----------------------------------------------------------------
@pytest.mark.gpu
def test_real_gpu_matches_nvidia_smi():
    out = gpu.run(make_ctx())
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    assert len(out["gpus"]) == listed.count("GPU ")
    assert out["driver"]["source"] == "nvml" and out["driver"]["version"]
    assert out["driver"]["cuda"] and out["driver"]["libcuda"]
    g = out["gpus"][0]
    assert g["name"] in listed and g["arch"].startswith("sm_")
    assert out["arch"] == {"value": g["arch"], "source": "detected"}
    if g["memory_total_mib"] is not None:
        assert g["unified"] is False


@pytest.mark.gpu
def test_real_smi_agrees_with_nvml():
    via_nvml = gpu.query_libraries().nvml
    via_smi = gpu.smi_query()
    assert [(g["name"], g["cc"]) for g in via_smi.gpus] == [(g["name"], g["cc"]) for g in via_nvml.gpus]
    assert via_smi.driver["version"] == via_nvml.driver["version"]


@pytest.mark.gpu
def test_real_smi_fallback_when_nvml_fails(monkeypatch):
    real = gpu.query_libraries()
    answered(monkeypatch, gpu.Failed("NVML init: Driver Not Loaded"), real.libcuda)
    ctx = make_ctx()
    out = gpu.run(ctx)
    assert out["gpus"] and out["driver"]["source"] == "nvidia-smi" and out["driver"]["libcuda"]
    assert out["driver"]["cuda"] == out["driver"]["libcuda"]
    assert ctx.facts.errors[0]["error"].endswith("GPUs read with nvidia-smi instead")


@pytest.mark.gpu
def test_real_collector_run_is_fast():
    facts = run_collectors(make_ctx(), [gpu.COLLECTOR])
    assert facts.errors == [] and facts.gpus
    assert facts.timings_ms["gpu"] < 3000


# ---- driver libraries that crash or hang: real shared libraries, found the way the loader finds them ----
FAKE_NVML_GB10 = r"""
#include <string.h>
typedef struct { unsigned long long total, free, used; } mem_t;
int nvmlInitWithFlags(unsigned int flags) { return 0; }
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r == 3 ? "Not Supported" : "Unknown Error"; }
int nvmlSystemGetDriverVersion(char *v, unsigned int n) { strncpy(v, "580.95.05", n); return 0; }
int nvmlSystemGetCudaDriverVersion(int *v) { *v = 13000; return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)0x1; return 0; }
int nvmlDeviceGetName(void *h, char *name, unsigned int n) { strncpy(name, "NVIDIA GB10", n); return 0; }
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) { *major = 12; *minor = 1; return 0; }
int nvmlDeviceGetMemoryInfo(void *h, mem_t *m) { return 3; }
int nvmlDeviceGetMemoryInfo_v2(void *h, mem_t *m) { return 3; }
"""
SEGFAULT = "{ volatile int *p = 0; *p = 1; return 0; }"
HANG = "{ for (;;) sleep(60); return 0; }"


def build_lib(folder: Path, soname: str, source: str) -> Path:
    cc = CC
    if not cc:
        pytest.skip("no C compiler to build a stand-in driver library")
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / (soname + ".c")
    src.write_text("#include <unistd.h>\n" + source)
    lib = folder / soname
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60, env={**os.environ, "PATH": "/usr/bin:/bin"})
    return lib


@pytest.fixture
def libdir(tmp_path, monkeypatch):
    folder = tmp_path / "lib"
    folder.mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", str(folder))
    return folder


def test_nvml_that_segfaults_is_evidence_not_a_dead_check(libdir, smi_path):
    build_lib(libdir, "libnvidia-ml.so.1", f"int nvmlInitWithFlags(unsigned int f) {SEGFAULT}\nint nvmlInit_v2(void) {SEGFAULT}\n")
    build_lib(libdir, "libcuda.so.1", "int cuDriverGetVersion(int *v) { *v = 13000; return 0; }\n")
    facts = run_collectors(make_ctx(), [ANSWERING])  # in this very process: it used to die here
    assert facts.gpus is None, "a crashed driver library leaves the GPUs unknown"
    [error] = facts.errors
    assert error["collector"] == "gpu"
    assert error["error"] == "NVML: the driver library crashed its process (SIGSEGV); libcuda reports CUDA 13.0"


def test_nvml_that_hangs_is_killed_and_reported(libdir, smi_path, monkeypatch):
    monkeypatch.setattr(gpu, "HELPER_TIMEOUT", 1.0)
    build_lib(libdir, "libnvidia-ml.so.1", f"int nvmlInitWithFlags(unsigned int f) {HANG}\nint nvmlInit_v2(void) {HANG}\n")
    started = time.monotonic()
    facts = run_collectors(make_ctx(), [gpu.COLLECTOR])
    assert time.monotonic() - started < 20  # its 1 s limit, not a hang; room for a loaded machine
    [error] = facts.errors
    assert error["error"].startswith("NVML: no answer within 1.") and "hangs" in error["error"]


def test_libcuda_that_segfaults_costs_only_the_cuda_version(libdir, smi_path):
    build_lib(libdir, "libnvidia-ml.so.1", FAKE_NVML_GB10)
    build_lib(libdir, "libcuda.so.1", f"int cuDriverGetVersion(int *v) {SEGFAULT}\n")
    facts = run_collectors(make_ctx(), [ANSWERING])
    assert [g["name"] for g in facts.gpus] == ["NVIDIA GB10"]
    assert facts.arch == {"value": "sm_121a", "source": "detected"}
    assert facts.driver == {"version": "580.95.05", "source": "nvml", "cuda": "13.0"}
    assert facts.errors == [{"collector": "gpu", "error": "libcuda (cuDriverGetVersion): the driver library crashed its process (SIGSEGV)"}]


def test_nvml_crash_still_asks_libcuda_and_nvidia_smi(libdir, smi_path):
    build_lib(libdir, "libnvidia-ml.so.1", f"int nvmlInitWithFlags(unsigned int f) {SEGFAULT}\nint nvmlInit_v2(void) {SEGFAULT}\n")
    build_lib(libdir, "libcuda.so.1", "int cuDriverGetVersion(int *v) { *v = 13000; return 0; }\n")
    fake_tool(smi_path, "nvidia-smi", f"printf '{GB10_CSV}'")
    out = gpu.run(ctx := make_ctx())
    assert out["gpus"][0]["name"] == "NVIDIA GB10"
    assert out["driver"] == {"version": "580.95.05", "source": "nvidia-smi", "libcuda": "13.0", "cuda": "13.0"}
    assert ctx.facts.errors[0]["error"].endswith("(SIGSEGV); GPUs read with nvidia-smi instead")


def test_a_gb10_through_the_real_helper(libdir, smi_path):
    build_lib(libdir, "libnvidia-ml.so.1", FAKE_NVML_GB10)
    out = gpu.run(make_ctx())
    assert out["gpus"] == [
        {"index": 0, "name": "NVIDIA GB10", "cc": "12.1", "arch": "sm_121a", "memory_total_mib": None, "unified": None, "addressing_mode": None}
    ]
    # a machine with a real libcuda (a GPU box) adds what it says: not this test's subject
    assert {k: v for k, v in out["driver"].items() if k != "libcuda"} == {"version": "580.95.05", "source": "nvml", "cuda": "13.0"}


def test_smi_with_a_5000_digit_number_is_not_an_internal_error():
    huge = "9" * 5000
    obs = gpu.parse_smi_csv(f"0, NVIDIA GB10, 12.1, {huge}, 580.95.05\n")
    assert obs.gpus[0]["memory_total_mib"] is None
    with pytest.raises(gpu.Failed):
        gpu.parse_smi_csv(f"{huge}, NVIDIA GB10, 12.1, 1, 580.95.05\n")
    assert gpu.arch_of(f"{huge}.1") is None and gpu.arch_of("１２.1") is None
