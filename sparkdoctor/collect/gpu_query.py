"""The GPU collector's child process: asks NVML (nvidia-ml-py) and libcuda, prints what they said.

Driver libraries are C code loaded into the process that calls them: one that segfaults or hangs
takes that process with it. So sparkdoctor never loads them itself; collect/gpu.py runs this file as

    python -I -B gpu_query.py [--skip-nvml] [--with-health]   # GPUs and driver (+ health readings)
    python -I -B gpu_query.py --health                        # health readings only

and reads one JSON line per stage ({"stage", "start"} before it, the answer after it), flushed as it
goes: a stage that started and never answered is the one that crashed or hung, and the parent says
so in facts.errors. Standard library only (plus nvidia-ml-py where installed): it must not import
sparkdoctor. The answers are raw (compute capability, not arch): the parent interprets them.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys

TYPE_CHECKING = False  # typing is read by mypy only: importing it costs this short-lived process ~20 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType


def say(record: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _nvml_error(exc: Exception) -> str:
    return str(exc).strip() or type(exc).__name__


def nvml_answer(nv: ModuleType | None = None) -> dict[str, object]:
    """{"gpus", "driver"} | {"missing": why} | {"failed": why}; `nv` is the pynvml module (tests pass a stand-in)."""
    if nv is None:
        try:
            ctypes.CDLL("libnvidia-ml.so.1")  # what pynvml loads at nvmlInit: without it, skip its 0.1 s import
        except OSError:
            return {"missing": "libnvidia-ml.so.1 not found"}
        try:
            import pynvml  # only once libnvidia-ml loads (above); a machine may lack the package too
        except ImportError as exc:
            return {"missing": f"nvidia-ml-py not importable: {exc}"}
        nv = pynvml
    return _session(nv, _read, library_not_found=True)


def _session(nv: ModuleType, read: Callable[[ModuleType], dict[str, object]],
             library_not_found: bool = False) -> dict[str, object]:
    """read(nv) between nvmlInit and nvmlShutdown; an NVML error is {"failed": why} (with `library_not_found`, a
    library nvmlInit cannot find is {"missing": why})."""
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        if library_not_found and exc.value == nv.NVML_ERROR_LIBRARY_NOT_FOUND:
            return {"missing": "libnvidia-ml.so.1 not found"}
        return {"failed": f"NVML init: {_nvml_error(exc)}"}
    try:
        return read(nv)
    except nv.NVMLError as exc:
        return {"failed": f"NVML: {_nvml_error(exc)}"}
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


def _read(nv: ModuleType) -> dict[str, object]:
    driver: dict[str, object] = {"version": _text(nv.nvmlSystemGetDriverVersion())}
    with contextlib.suppress(nv.NVMLError):  # libcuda may still tell it
        driver["cuda_encoded"] = int(nv.nvmlSystemGetCudaDriverVersion())
    gpus = []
    for index in range(nv.nvmlDeviceGetCount()):
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        major, minor = nv.nvmlDeviceGetCudaComputeCapability(handle)
        memory_total_mib, memory_supported = None, None
        try:
            memory_total_mib = nv.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            memory_supported = True
        except nv.NVMLError_NotSupported:
            memory_supported = False  # GB10 and other integrated GPUs: no memory of their own to report
        except nv.NVMLError:
            pass  # e.g. no permission: the size is unknown, the rest of the GPU is not
        gpus.append(
            {
                "index": index,
                "name": _text(nv.nvmlDeviceGetName(handle)),
                "cc": f"{major}.{minor}",
                "memory_total_mib": memory_total_mib,
                "memory_supported": memory_supported,
                "addressing_mode": _addressing_mode(nv, handle),
            }
        )
    return {"gpus": gpus, "driver": driver}


def _addressing_mode(nv: ModuleType, handle: object) -> str | None:
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


def libcuda_encoded(library: str = "libcuda.so.1") -> int | None:
    """cuDriverGetVersion's integer (13000); None when there is no libcuda (it needs no cuInit, so no GPU)."""
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
    return value.value


THROTTLE_BITS = ((0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
                 (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
                 (0x80, "hw_power_brake_slowdown"), (0x100, "display_clock_setting"))


def _try(call: Callable[..., object], *args: object) -> object:
    """One NVML reading, or None where the GPU does not support it (GB10's memory) or the call fails."""
    try:
        return call(*args)
    except Exception:  # NVMLError_NotSupported and friends, a missing symbol in an old nvidia-ml-py
        return None


def _mib(value: object) -> int | None:
    """Bytes as MiB; None for NVML's "not available" (all ones) or anything that is not a byte count."""
    if not isinstance(value, int) or value < 0 or value >= (1 << 63):
        return None
    return value // (1024 * 1024)


def _proc_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read(256).strip() or None
    except OSError:
        return None


def health_gpu(nv: ModuleType, index: int) -> dict[str, object]:
    h = nv.nvmlDeviceGetHandleByIndex(index)
    gpu: dict[str, object] = {"index": index}
    gpu["clock_graphics_mhz"] = _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_GRAPHICS)
    gpu["clock_sm_mhz"] = _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
    gpu["clock_memory_mhz"] = _try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
    gpu["clock_graphics_max_mhz"] = _try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_GRAPHICS)
    power = _try(nv.nvmlDeviceGetPowerUsage, h)
    limit = _try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
    gpu["power_w"] = round(power / 1000, 1) if isinstance(power, int) else None
    gpu["power_limit_w"] = round(limit / 1000, 1) if isinstance(limit, int) else None
    pstate = _try(nv.nvmlDeviceGetPerformanceState, h)
    gpu["pstate"] = pstate if isinstance(pstate, int) and 0 <= pstate <= 15 else None
    gpu["temperature_c"] = _try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
    getter = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
    mask = _try(getter, h) if getter else None
    if isinstance(mask, int):
        gpu["throttle_mask"] = mask
        gpu["throttle_reasons"] = [name for bit, name in THROTTLE_BITS if mask & bit]
        gpu["clocks_locked"] = bool(mask & 0x2)
    info = _try(nv.nvmlDeviceGetMemoryInfo, h)  # GB10: NotSupported, so None: never a number from "[N/A]"
    gpu["memory_used_mib"] = _mib(getattr(info, "used", None)) if info is not None else None
    gpu["memory_total_mib"] = _mib(getattr(info, "total", None)) if info is not None else None
    procs = _try(nv.nvmlDeviceGetComputeRunningProcesses, h)
    if isinstance(procs, list):
        gpu["processes"] = [{"pid": p.pid, "name": _proc_name(p.pid), "used_mib": _mib(getattr(p, "usedGpuMemory", None))}
                            for p in procs if isinstance(getattr(p, "pid", None), int)]
    return gpu


def health_answer(nv: ModuleType | None = None) -> dict[str, object]:
    """{"gpus": [per-GPU readings]} | {"missing": why} | {"failed": why}: clocks, power, P-state,
    temperature, throttle reasons, memory in use where the GPU reports it, compute processes."""
    if nv is None:
        try:
            ctypes.CDLL("libnvidia-ml.so.1")
            import pynvml  # only once libnvidia-ml loads: its import costs 0.1 s, and a machine may lack it
        except (OSError, ImportError) as exc:
            return {"missing": f"NVML not available: {exc}"}
        nv = pynvml
    return _session(nv, lambda nv: {"gpus": [health_gpu(nv, i) for i in range(nv.nvmlDeviceGetCount())]})


def stage(name: str, answer: Callable[[], dict[str, object]]) -> None:
    say({"stage": name, "start": True})
    say({"stage": name, **answer()})


def main(argv: list[str]) -> int:
    if "--health" not in argv:
        if "--skip-nvml" not in argv:
            stage("nvml", nvml_answer)
        stage("libcuda", lambda: {"encoded": libcuda_encoded()})
    if "--health" in argv or "--with-health" in argv:  # --with-health: `check`'s prestarted helper, health last
        stage("health", health_answer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
