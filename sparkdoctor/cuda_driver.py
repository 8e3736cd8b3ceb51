"""A minimal ctypes binding to the CUDA driver API (libcuda): enough to load a cubin, copy buffers,
launch one kernel and read the results back. Standard library only (it imports nothing of sparkdoctor, so it runs
from a source checkout that was never installed, by any interpreter), so it also runs as a script:

    python cuda_driver.py --run-jobs < jobs.json

which is how sparkdoctor runs probe kernels: in a child process, so that a driver crash or a hung
kernel kills the child (and becomes evidence), never the doctor.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys
import time
from typing import Any, TypedDict


class Buffer(TypedDict, total=False):
    name: str
    hex: str  # an input's bytes
    size: int  # an output's length: read back after the launch


class Job(TypedDict):
    """One launch, as sparkdoctor.kernels.gpu_run.gpu_request writes it."""

    id: str
    cubin: str
    entry: str
    threads: int
    grid: int
    cc: list[int]  # [major, minor]
    exact_cc: bool
    buffers: list[Buffer]


class _Ran(TypedDict):
    id: str
    ok: bool
    error: str | None


class Ran(_Ran, total=False):
    """One job's result (`device` once one was picked, `ms` once it was tried)."""

    outputs: dict[str, str]  # output buffer name -> its bytes in hex
    device: dict[str, object]
    ms: float


CUDA_SUCCESS = 0
_ATTR_CC_MAJOR = 75  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
_ATTR_CC_MINOR = 76


# The ABI entry points of the calls whose plain names are legacy. Names are never guessed: some
# "_v2" symbols take different arguments (cuCtxSynchronize_v2 takes a context).
_SYMBOLS = {
    "cuMemAlloc": "cuMemAlloc_v2",
    "cuMemFree": "cuMemFree_v2",
    "cuMemcpyHtoD": "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH": "cuMemcpyDtoH_v2",
    "cuDevicePrimaryCtxRelease": "cuDevicePrimaryCtxRelease_v2",
}


class CudaError(RuntimeError):
    """A driver call failed; the message names the call and the driver's error name and text."""

    def __init__(self, call: str, code: int, name: str, text: str) -> None:
        super().__init__(f"{call}: {name} ({text})")
        self.call, self.result, self.name, self.text = call, code, name, text  # result: the CUresult number


class CudaUnavailable(RuntimeError):
    """libcuda cannot be loaded here (no driver)."""


class Driver:
    def __init__(self, library: str = "libcuda.so.1") -> None:
        try:
            self.lib = ctypes.CDLL(library)
        except OSError as exc:
            raise CudaUnavailable(f"cannot load {library}: {exc}") from None
        self._fn: dict[str, Any] = {}

    # ---- plumbing --------------------------------------------------------------------------------
    def _get(self, name: str):
        if name not in self._fn:
            symbol = _SYMBOLS.get(name, name)
            try:
                self._fn[name] = getattr(self.lib, symbol)
            except AttributeError:
                raise CudaUnavailable(f"libcuda has no {symbol}") from None
        return self._fn[name]

    def _call(self, name: str, *args) -> None:
        code = self._get(name)(*args)
        if code != CUDA_SUCCESS:
            raise CudaError(name, code, *self.describe_error(code))

    def describe_error(self, code: int) -> tuple[str, str]:
        """(name, text) of a CUresult, e.g. ("CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid")."""
        name_p, text_p = ctypes.c_char_p(), ctypes.c_char_p()
        got_name = self.lib.cuGetErrorName(code, ctypes.byref(name_p)) == CUDA_SUCCESS and name_p.value
        got_text = self.lib.cuGetErrorString(code, ctypes.byref(text_p)) == CUDA_SUCCESS and text_p.value
        name = name_p.value.decode() if got_name and name_p.value else f"CUresult {code}"
        text = text_p.value.decode() if got_text and text_p.value else "unknown error"
        return name, text

    # ---- devices ---------------------------------------------------------------------------------
    def init(self) -> None:
        self._call("cuInit", ctypes.c_uint(0))

    def version(self) -> int:
        v = ctypes.c_int()
        self._call("cuDriverGetVersion", ctypes.byref(v))
        return v.value

    def device_count(self) -> int:
        n = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(n))
        return n.value

    def device(self, ordinal: int) -> int:
        dev = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(dev), ctypes.c_int(ordinal))
        return dev.value

    def compute_capability(self, dev: int) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._call("cuDeviceGetAttribute", ctypes.byref(major), ctypes.c_int(_ATTR_CC_MAJOR), ctypes.c_int(dev))
        self._call("cuDeviceGetAttribute", ctypes.byref(minor), ctypes.c_int(_ATTR_CC_MINOR), ctypes.c_int(dev))
        return major.value, minor.value

    def name(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", buf, ctypes.c_int(len(buf)), ctypes.c_int(dev))
        return buf.value.decode(errors="replace")

    # ---- contexts, modules, memory, launches -----------------------------------------------------
    def ctx_create(self, dev: int) -> ctypes.c_void_p:
        """Retain the device's primary context and make it current (what the runtime API does)."""
        ctx = ctypes.c_void_p()
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), ctypes.c_int(dev))
        self._call("cuCtxSetCurrent", ctx)
        return ctx

    def ctx_release(self, dev: int) -> None:
        self._call("cuDevicePrimaryCtxRelease", ctypes.c_int(dev))

    def ctx_synchronize(self) -> None:
        self._call("cuCtxSynchronize")

    def module_load_data(self, image: bytes) -> ctypes.c_void_p:
        module = ctypes.c_void_p()
        self._image = ctypes.create_string_buffer(image, len(image))  # kept alive while loading
        self._call("cuModuleLoadData", ctypes.byref(module), self._image)
        return module

    def module_unload(self, module: ctypes.c_void_p) -> None:
        self._call("cuModuleUnload", module)

    def module_get_function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        fn = ctypes.c_void_p()
        self._call("cuModuleGetFunction", ctypes.byref(fn), module, name.encode())
        return fn

    def mem_alloc(self, size: int) -> int:
        ptr = ctypes.c_uint64()
        self._call("cuMemAlloc", ctypes.byref(ptr), ctypes.c_size_t(size))
        return ptr.value

    def mem_free(self, ptr: int) -> None:
        self._call("cuMemFree", ctypes.c_uint64(ptr))

    def memcpy_htod(self, ptr: int, data: bytes) -> None:
        src = ctypes.create_string_buffer(data, len(data))
        self._call("cuMemcpyHtoD", ctypes.c_uint64(ptr), src, ctypes.c_size_t(len(data)))

    def memcpy_dtoh(self, ptr: int, size: int) -> bytes:
        dst = ctypes.create_string_buffer(size)
        self._call("cuMemcpyDtoH", dst, ctypes.c_uint64(ptr), ctypes.c_size_t(size))
        return dst.raw

    def launch(self, fn: ctypes.c_void_p, grid: int, block: int, pointers: list[int]) -> None:
        """cuLaunchKernel with 1-D grid/block and only 64-bit device-pointer parameters."""
        values = [ctypes.c_uint64(p) for p in pointers]
        params = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
        self._call(
            "cuLaunchKernel",
            fn,
            ctypes.c_uint(grid), ctypes.c_uint(1), ctypes.c_uint(1),
            ctypes.c_uint(block), ctypes.c_uint(1), ctypes.c_uint(1),
            ctypes.c_uint(0), ctypes.c_void_p(None), params, ctypes.c_void_p(None),
        )


def cc_matches(device_cc: tuple[int, int], want: tuple[int, int], exact: bool) -> bool:
    """An arch-specific (a) cubin runs only on its own cc; plain and family (f) cubins run on later
    minors of the same major."""
    if exact:
        return device_cc == want
    return device_cc[0] == want[0] and device_cc[1] >= want[1]


def pick_device(drv: Driver, want: tuple[int, int], exact: bool) -> tuple[int, int, str, tuple[int, int]] | None:
    """(ordinal, handle, name, cc) of the first CUDA device a cubin for `want` runs on."""
    for ordinal in range(drv.device_count()):
        dev = drv.device(ordinal)
        cc = drv.compute_capability(dev)
        if cc_matches(cc, want, exact):
            return ordinal, dev, drv.name(dev), cc
    return None


def run_job(drv: Driver, job: Job) -> Ran:
    """Load job["cubin"], fill its buffers, launch job["entry"] once, read the output buffers back."""
    start = time.monotonic()
    result: Ran = {"id": job.get("id"), "ok": False, "error": None, "outputs": {}}
    major, minor = job["cc"]
    picked = pick_device(drv, (major, minor), bool(job.get("exact_cc")))
    if picked is None:
        result["error"] = f"no CUDA device with compute capability {major}.{minor}"
        return result
    ordinal, dev, name, cc = picked
    result["device"] = {"ordinal": ordinal, "name": name, "cc": f"{cc[0]}.{cc[1]}"}
    pointers: list[int] = []
    module = None
    context = False
    try:
        drv.ctx_create(dev)
        context = True
        with open(job["cubin"], "rb") as fh:
            module = drv.module_load_data(fh.read())
        fn = drv.module_get_function(module, job["entry"])
        for buf in job["buffers"]:
            data = bytes.fromhex(buf["hex"]) if "hex" in buf else bytes(buf["size"])
            ptr = drv.mem_alloc(max(len(data), 1))
            pointers.append(ptr)
            drv.memcpy_htod(ptr, data)
        drv.launch(fn, int(job.get("grid", 1)), int(job["threads"]), pointers)
        drv.ctx_synchronize()
        for buf, ptr in zip(job["buffers"], pointers, strict=False):
            if "size" in buf:
                result["outputs"][buf["name"]] = drv.memcpy_dtoh(ptr, buf["size"]).hex()
        result["ok"] = True
    except (CudaError, CudaUnavailable, OSError) as exc:
        result["error"] = str(exc)
    finally:
        for ptr in pointers:
            with contextlib.suppress(CudaError):  # after a kernel fault the context is gone; the error above says why
                drv.mem_free(ptr)
        if module is not None:
            with contextlib.suppress(CudaError):
                drv.module_unload(module)
        if context:
            with contextlib.suppress(CudaError):
                drv.ctx_release(dev)
        result["ms"] = round((time.monotonic() - start) * 1000, 1)
    return result


def run_jobs(jobs: list[Job], library: str = "libcuda.so.1") -> dict[str, object]:
    try:
        drv = Driver(library)
        drv.init()
        version = drv.version()
    except (CudaError, CudaUnavailable) as exc:
        return {"error": str(exc), "results": []}
    return {"driver_version": version, "results": [run_job(drv, job) for job in jobs]}


def main(argv: list[str]) -> int:
    if argv[1:] != ["--run-jobs"]:
        print("usage: cuda_driver.py --run-jobs < jobs.json", file=sys.stderr)
        return 2
    request = json.load(sys.stdin)
    print(json.dumps(run_jobs(request["jobs"], request.get("library", "libcuda.so.1"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
