"""The GPU collector's child process: asks NVML (nvidia-ml-py) and libcuda, prints what they said.

Driver libraries are C code loaded into the process that calls them: one that segfaults or hangs
takes that process with it. So sparkdoctor never loads them itself; collect/gpu.py runs this file as

    python -I -B gpu_query.py [--skip-nvml]

and reads one JSON line per stage ({"stage", "start"} before it, the answer after it), flushed as it
goes: a stage that started and never answered is the one that crashed or hung, and the parent says
so in facts.errors. Standard library only (plus nvidia-ml-py where installed): it must not import
sparkdoctor. The answers are raw (compute capability, not arch): the parent interprets them.
"""

from __future__ import annotations

import ctypes
import json
import sys

Any = object  # annotations only: importing typing costs this short-lived process ~20 ms


def say(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _nvml_error(exc: Exception) -> str:
    return str(exc).strip() or type(exc).__name__


def nvml_answer(nv: Any = None) -> dict[str, Any]:
    """{"gpus", "driver"} | {"missing": why} | {"failed": why}; `nv` is the pynvml module (tests pass a stand-in)."""
    if nv is None:
        try:
            ctypes.CDLL("libnvidia-ml.so.1")  # what pynvml loads at nvmlInit: without it, skip its 0.1 s import
        except OSError:
            return {"missing": "libnvidia-ml.so.1 not found"}
        try:
            import pynvml as nv
        except ImportError as exc:
            return {"missing": f"nvidia-ml-py not importable: {exc}"}
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        if exc.value == nv.NVML_ERROR_LIBRARY_NOT_FOUND:
            return {"missing": "libnvidia-ml.so.1 not found"}
        return {"failed": f"NVML init: {_nvml_error(exc)}"}
    try:
        return _read(nv)
    except nv.NVMLError as exc:
        return {"failed": f"NVML: {_nvml_error(exc)}"}
    finally:
        try:
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass


def _read(nv: Any) -> dict[str, Any]:
    driver: dict[str, Any] = {"version": _text(nv.nvmlSystemGetDriverVersion())}
    try:
        driver["cuda_encoded"] = int(nv.nvmlSystemGetCudaDriverVersion())
    except nv.NVMLError:
        pass  # libcuda may still tell it
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


def main(argv: list[str]) -> int:
    if "--skip-nvml" not in argv:
        say({"stage": "nvml", "start": True})
        say({"stage": "nvml", **nvml_answer()})
    say({"stage": "libcuda", "start": True})
    say({"stage": "libcuda", "encoded": libcuda_encoded()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
