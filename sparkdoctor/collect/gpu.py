"""GPUs and the NVIDIA driver, observed from the sparkdoctor process (the GPU is the host's, not the venv's).

Order of evidence: NVML (nvidia-ml-py), then `nvidia-smi` with a short timeout (it can hang), then
libcuda's cuDriverGetVersion (needs no cuInit, so no GPU). A box with none of the three has no GPU:
that is a normal state (gpus=[], driver={}), not an error. A driver that is there but does not answer
is unknown (gpus stays None) and the reason lands in facts.errors.

The three access functions (`nvml_query`, `smi_query`, `libcuda_version`) are module-level so tests
can swap them; everything else works on their plain-data results.
"""

from __future__ import annotations

import ctypes
import shutil
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor import proc
from sparkdoctor.arch import assumed
from sparkdoctor.collect import Collector, CollectorError, Context

SMI_TIMEOUT = 5.0
SMI_QUERY = ["--query-gpu=index,name,compute_cap,memory.total,driver_version", "--format=csv,noheader,nounits"]


class Missing(Exception):
    """The access path does not exist on this machine (no library, no binary)."""


class Failed(Exception):
    """The access path exists but did not answer; the message is one line saying why."""


@dataclass
class Observation:
    gpus: list[dict[str, Any]]
    driver: dict[str, Any] = field(default_factory=dict)


def arch_of(cc: str) -> str | None:
    """"12.1" -> "sm_121a": from Hopper on, arch-specific features need the `a` target."""
    try:
        major, minor = (int(x) for x in cc.split("."))
    except ValueError:
        return None
    return f"sm_{major}{minor}a" if major >= 9 else f"sm_{major}{minor}"


def cuda_version_of(encoded: int) -> str:
    """The driver API's integer (13000) as the CUDA version people write (13.0)."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


# ---- NVML -------------------------------------------------------------------------------------------
def nvml_query() -> Observation:
    try:
        import pynvml  # lazily: nvidia-ml-py loads libnvidia-ml.so.1 at nvmlInit, and costs an import
    except ImportError as exc:
        raise Missing(f"nvidia-ml-py not importable: {exc}") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        if exc.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
            raise Missing("libnvidia-ml.so.1 not found") from None
        raise Failed(f"NVML init: {_nvml_text(exc)}") from None
    try:
        return _nvml_read(pynvml)
    except pynvml.NVMLError as exc:
        raise Failed(f"NVML: {_nvml_text(exc)}") from None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _nvml_read(nv: Any) -> Observation:
    driver: dict[str, Any] = {"version": _text(nv.nvmlSystemGetDriverVersion()), "source": "nvml"}
    try:
        driver["cuda"] = cuda_version_of(nv.nvmlSystemGetCudaDriverVersion())
    except nv.NVMLError:
        pass  # libcuda may still tell it
    gpus = []
    for index in range(nv.nvmlDeviceGetCount()):
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
        cc = f"{major}.{minor}"
        memory_total_mib, memory_supported = None, None
        try:
            memory_total_mib = nv.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            memory_supported = True
        except nv.NVMLError_NotSupported:
            memory_supported = False  # GB10 and other integrated GPUs: no memory of their own to report
        except nv.NVMLError:
            pass  # e.g. no permission: the size is unknown, the rest of the GPU is not
        mode = _addressing_mode(nv, handle)
        gpus.append(
            {
                "index": index,
                "name": _text(nv.nvmlDeviceGetName(handle)),
                "cc": cc,
                "arch": arch_of(cc),
                "memory_total_mib": memory_total_mib,
                "unified": _unified(memory_supported, mode),
                "addressing_mode": mode,
            }
        )
    return Observation(gpus, driver)


def _addressing_mode(nv: Any, handle: Any) -> str | None:
    """"ATS" / "HMM" / "none"; None where this nvidia-ml-py or driver cannot say."""
    getter = getattr(nv, "nvmlDeviceGetAddressingMode", None)
    if getter is None:
        return None
    try:
        value = getter(handle)
    except (nv.NVMLError, AttributeError):  # AttributeError: a driver without the symbol
        return None
    names = {
        getattr(nv, "NVML_DEVICE_ADDRESSING_MODE_NONE", 0): "none",
        getattr(nv, "NVML_DEVICE_ADDRESSING_MODE_HMM", 1): "HMM",
        getattr(nv, "NVML_DEVICE_ADDRESSING_MODE_ATS", 2): "ATS",
    }
    return names.get(value, str(value))


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


def _nvml_text(exc: Exception) -> str:
    return str(exc).strip() or type(exc).__name__


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


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


def parse_smi_csv(text: str) -> Observation:
    gpus, versions = [], set()
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5 or not parts[0].isdigit():
            raise Failed(f"nvidia-smi printed an unexpected line: {line.strip()[:200]}")
        cc = parts[-3]
        gpus.append(
            {
                "index": int(parts[0]),
                "name": ", ".join(parts[1:-3]),  # a name with a comma in it survives
                "cc": cc,
                "arch": arch_of(cc),
                "memory_total_mib": int(parts[-2]) if parts[-2].isdigit() else None,  # "[N/A]" on GB10
                "unified": None,  # nvidia-smi's [N/A] alone does not prove it (see _unified)
            }
        )
        versions.add(parts[-1])
    if not gpus:
        raise Failed("nvidia-smi printed no GPUs and no error")
    return Observation(gpus, {"version": sorted(versions)[0], "source": "nvidia-smi"})


# ---- libcuda ----------------------------------------------------------------------------------------
def libcuda_version(library: str = "libcuda.so.1") -> str | None:
    """The CUDA version the installed driver library supports; None when there is no libcuda."""
    try:
        lib = ctypes.CDLL(library)
    except OSError:
        return None
    value = ctypes.c_int(0)
    try:
        status = lib.cuDriverGetVersion(ctypes.byref(value))
    except AttributeError:
        return None
    if status != 0 or value.value <= 0:
        return None
    return cuda_version_of(value.value)


# ---- the collector ----------------------------------------------------------------------------------
def run(ctx: Context) -> dict[str, Any]:
    problems: list[str] = []
    observed: Observation | None = None
    try:
        observed = nvml_query()
    except Missing:
        pass
    except Failed as exc:
        problems.append(str(exc))
    if observed is None:
        try:
            observed = smi_query()
            if problems:  # NVML is there but broken: say so even though nvidia-smi answered
                ctx.facts.add_error("gpu", f"{problems[0]}; GPUs read with nvidia-smi instead")
        except Missing:
            pass
        except Failed as exc:
            problems.append(str(exc))  # already names nvidia-smi
    libcuda = libcuda_version()
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


COLLECTOR = Collector("gpu", run, timeout=10)
