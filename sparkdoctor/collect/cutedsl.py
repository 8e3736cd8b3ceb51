"""CuTe DSL compile probes: the target's own nvidia-cutlass-dsl compiles tiny sm_121a kernels.

Runs probes/cutedsl_probe.py under the target's interpreter, one subprocess per kernel (a compiler
that segfaults on one kernel must not hide the other's result), both at once. Results land in
facts.kernels["cutedsl-nvfp4-mma"] and ["cutedsl-e2m1-cvt"]:

  {"kind": "cutedsl", "status": ok|refused|fail|crash|error|skipped, "detail", "arch", "version",
   "build", "bundled_cuda", "admissible_archs", "instruction", "ms", "cached", "runs": []}

`runs` stays empty: these kernels are compiled, never launched. Results are cached under
<cache>/cutedsl/ by everything that decides the outcome (interpreter, dist versions, the library
build really on disk and its compiler .so's size+mtime, the probe's source, the arch); only settled
outcomes are cached (never a timeout or an "error"), and an entry that does not parse is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.collect import Collector, Context
from sparkdoctor.locations import data_dir

KERNELS = {"cutedsl-nvfp4-mma": "nvfp4-mma", "cutedsl-e2m1-cvt": "e2m1-cvt"}
DEFAULT_ARCH = "sm_121a"
COMPILE_TIMEOUT = 60.0
CACHEABLE = ("ok", "refused", "fail", "crash")
DIST_PREFIX = "nvidia-cutlass-dsl"


def probe_script() -> Path:
    return data_dir("probes") / "cutedsl_probe.py"


def run(ctx: Context) -> dict[str, Any]:
    arch = (ctx.facts.arch or {}).get("value") or DEFAULT_ARCH
    packages = ctx.facts.packages
    if packages is not None and DIST_PREFIX not in packages:
        return {"kernels": {kid: skipped(arch, "nvidia-cutlass-dsl not installed") for kid in KERNELS}}
    dists = {name: p.get("version") for name, p in (packages or {}).items() if name.startswith(DIST_PREFIX)}
    build = (ctx.facts.cutedsl or {}).get("active_build")
    key = cache_key(ctx, dists, arch) if packages is not None else None
    with ThreadPoolExecutor(max_workers=len(KERNELS)) as pool:
        futures = {kid: pool.submit(probe_kernel, ctx, kernel, arch, key) for kid, kernel in KERNELS.items()}
        results = {kid: f.result() for kid, f in futures.items()}
    out = {}
    for kid, raw in results.items():
        if raw.get("dists") == {}:  # the package listing was unknown and the probe found nothing
            out[kid] = skipped(arch, "nvidia-cutlass-dsl not installed")
            continue
        out[kid] = shape(raw, arch, build, dists)
    return {"kernels": out}


def skipped(arch: str, why: str) -> dict[str, Any]:
    return {
        "kind": "cutedsl", "status": "skipped", "detail": why, "arch": arch, "version": None, "build": None,
        "bundled_cuda": None, "admissible_archs": None, "instruction": None, "ms": None, "cached": False, "runs": [],
    }


def shape(raw: dict[str, Any], arch: str, build: str | None, dists: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "cutedsl",
        "status": raw.get("status", "error"),
        "detail": raw.get("detail", ""),
        "arch": raw.get("arch") or arch,
        "version": raw.get("version") or dists.get(DIST_PREFIX),
        "build": build,
        "bundled_cuda": raw.get("bundled_cuda"),
        "admissible_archs": raw.get("admissible_archs"),
        "instruction": raw.get("instruction"),
        "ms": raw.get("ms"),
        "cached": bool(raw.get("cached")),
        "runs": [],
    }


# ---- one kernel -----------------------------------------------------------------------------------


def probe_kernel(ctx: Context, kernel: str, arch: str, key: dict[str, Any] | None) -> dict[str, Any]:
    path = cache_path(ctx, key, kernel) if key is not None else None
    if path is not None and ctx.use_cache:
        hit = read_cache(path, key, kernel)
        if hit is not None:
            return {**hit, "cached": True}
    result = ctx.target.run_script(probe_script(), ["--arch", arch, "--kernel", kernel], timeout=COMPILE_TIMEOUT)
    raw = interpret(kernel, arch, result)
    if path is not None and raw.get("status") in CACHEABLE:
        write_cache(path, key, kernel, raw)
    return raw


def interpret(kernel: str, arch: str, result: proc.ProcResult) -> dict[str, Any]:
    """The probe's JSON when it printed one; otherwise the way its process ended, as evidence."""
    for line in reversed((result.stdout or "").splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and data.get("kernel") == kernel:
            return data
    tail = [x.strip() for x in (result.stderr or "").splitlines() if x.strip()]
    last = f": {tail[-1][:300]}" if tail else ""
    if result.signal:
        try:
            name = signal.Signals(result.signal).name
        except ValueError:
            name = f"signal {result.signal}"
        return {"kernel": kernel, "arch": arch, "status": "crash", "detail": f"the CuTe DSL compiler was killed by {name}{last}", "ms": round(result.seconds * 1000)}
    return {"kernel": kernel, "arch": arch, "status": "error", "detail": f"compile probe gave no result: {result.describe_failure()}", "ms": round(result.seconds * 1000)}


# ---- cache ----------------------------------------------------------------------------------------


def cache_key(ctx: Context, dists: dict[str, Any], arch: str) -> dict[str, Any] | None:
    """Everything that decides the outcome; None when the compiler library cannot be identified."""
    if ctx.cache_dir is None:
        return None
    location = next((p.get("location") for n, p in (ctx.facts.packages or {}).items() if n.startswith(DIST_PREFIX) and p.get("location")), None)
    libs = compiler_libs(Path(location)) if location else []
    if not libs:
        return None  # without the .so's identity a cached answer could be stale
    cutedsl = ctx.facts.cutedsl or {}
    return {
        "python": (ctx.target.describe() or {}).get("python"),
        "dists": sorted(dists.items()),
        "build": cutedsl.get("active_build"),
        "build_hash": cutedsl.get("sha256"),
        "libs": libs,
        "probe": hashlib.sha256(probe_script().read_bytes()).hexdigest(),
        "arch": arch,
    }


def compiler_libs(site: Path) -> list[list[Any]]:
    """(path, size, mtime) of every _cutlass_ir*.so under nvidia_cutlass_dsl/ (4.4/4.5 and 4.8 layouts)."""
    found = []
    for so in sorted(site.glob("nvidia_cutlass_dsl/*/cutlass/_mlir/_mlir_libs/_cutlass_ir*.so")):
        try:
            st = so.stat()
        except OSError:
            continue
        found.append([str(so), st.st_size, st.st_mtime_ns])
    return found


def cache_path(ctx: Context, key: dict[str, Any], kernel: str) -> Path:
    digest = hashlib.sha256(json.dumps([key, kernel], sort_keys=True).encode()).hexdigest()[:24]
    return Path(ctx.cache_dir) / "cutedsl" / f"{kernel}-{digest}.json"


def read_cache(path: Path, key: dict[str, Any], kernel: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != json.loads(json.dumps(key)) or data.get("kernel") != kernel:
        return None
    result = data.get("result")
    if not isinstance(result, dict) or result.get("status") not in CACHEABLE:
        return None
    return result


def write_cache(path: Path, key: dict[str, Any], kernel: str, result: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "kernel": kernel, "result": result}), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache costs speed, not correctness


COLLECTOR = Collector("cutedsl", run, needs=("target", "gpu"), timeout=90)
