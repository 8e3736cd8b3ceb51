"""CuTe DSL (nvidia-cutlass-dsl) compile probe, run by the TARGET's python.

Compiles tiny kernels with the target's own CuTe DSL for an arch given on the command line
(no GPU needed: without one the DSL would fall back to sm_100a, so the arch is always explicit):

  nvfp4-mma  one warp, one NVFP4 block-scaled MMA: MmaMXF4NVF4Op, e2m1 x e2m1 -> f32,
             e4m3 scale factors, one per 16 values (m16n8k64, kind::mxf4nvf4, scale_vec::4X)
  e2m1-cvt   f32 -> e2m1 conversion (cvt ... e2m1x2.f32)

  python -B probes/cutedsl/__main__.py --arch sm_121a --kernel nvfp4-mma   compile one kernel here
  python -B probes/cutedsl/__main__.py --arch sm_121a [--cache FILE]       every kernel, each in its
                                                     own process (a compile server: cutedsl_isolation)

First of all, before it imports anything of its own or of the DSL, it prints (and flushes) the line
  {"started": "cutedsl"}
so a process killed before that line is an interpreter that could not start, and one killed after it
is the compiler (the `--kernel` mode compiles in this very process).
Then one JSON object per kernel, each on a line of its own (a .pth file may print around them):
  {"kernel", "status": ok|refused|fail|crash|error|skipped, "detail", "arch", "version", "dists",
   "build", "compiler_lib", "bundled_cuda", "admissible_archs", "instruction", "ptx", "cubin", "ms",
   "cached", "isolation": fork|exec}
ok: compiled, `instruction` is the mma/cvt line found in the PTX; refused: the DSL rejected the arch
(admissible_archs lists what it accepts); fail: the PTX compiler rejected the generated code (detail
is its error line); crash: the compiler died on a signal; error: anything else (e.g. 4.4.x needs
libcuda after code generation: PTX/cubin exist, the runtime step failed); skipped: no
nvidia-cutlass-dsl* distribution on sys.path (told without importing anything).

--cache FILE (every-kernel mode) answers from FILE when nothing that decides the outcome changed: the key
is read from disk without importing cutlass (dist names+versions, size+mtime of every file their
RECORDs list, of every _cutlass_ir*.so and of every sys.path folder, this probe's source hash, the arch,
the driver, CUTE_DSL_*).
Only settled outcomes (ok/refused/fail/crash) are written; a timeout or an error never is.

Standard library only, Python 3.8+; portable across nvidia-cutlass-dsl 4.4 .. 4.8 (the scale-factor
partition is done here because only some builds ship helpers for it). A warm run imports only
cutedsl_install and cutedsl_cache; module names carry a `cutedsl_` prefix because this folder is
sys.path[0] in the compile children too, where `import cutlass` must not find a module of ours.
"""

import argparse
import json
import os
import re
import sys

STARTED = '{"started": "cutedsl"}'  # sparkdoctor/collect/cutedsl.py looks for this very line
if __name__ == "__main__":  # before anything of ours or of the DSL is imported
    sys.stdout.write(STARTED + "\n")
    sys.stdout.flush()

sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "shared"))

import probe_site  # noqa: E402

probe_site.rebuild()  # started with -S: sys.path as site would have made it, from files only (no .pth code runs)

from cutedsl_cache import KERNELS, cache_key, read_cache, write_cache  # noqa: E402
from cutedsl_install import (  # noqa: E402
    DIST_PREFIX,
    active_build,
    dist_versions,
    find_dists,
    installed_files,
    stat_files,
)


def probe_all(arch, timeout, cache_path=None, read_cache_file=True):
    """Every kernel's result: skipped at once without the DSL, else from the cache or a compile."""
    dists = find_dists()
    versions = dist_versions(dists)
    info = {"version": versions.get(DIST_PREFIX) or next(iter(versions.values()), None), "dists": versions}
    if not dists:
        return [dict(info, kernel=k, arch=arch, status="skipped", detail="nvidia-cutlass-dsl not installed", build=None, cached=False) for k in KERNELS]
    files = installed_files(dists)
    stats = stat_files(files)
    key = cache_key(arch, dists, stats) if cache_path else None
    cached, build = read_cache(cache_path, key) if cache_path and read_cache_file else ({}, None)
    missing = [k for k in KERNELS if k not in cached]
    if missing:
        from cutedsl_isolation import compile_with_server
    fresh = compile_with_server(missing, arch, timeout) if missing else {}
    if missing:
        loaded = next((r.get("compiler_lib") for r in fresh.values() if r.get("compiler_lib")), None)
        build = active_build(loaded, files, stats) if loaded or build is None else build
        if cache_path:
            write_cache(cache_path, key, dict(cached, **fresh), build)
    out = []
    for kernel in KERNELS:
        result = dict(cached[kernel], cached=True) if kernel in cached else dict(fresh[kernel], cached=False)
        result.update(info, build=build)
        out.append(result)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", required=True, help="target arch, e.g. sm_121a")
    ap.add_argument("--kernel", choices=KERNELS, help="compile only this kernel, in this process")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds for the compiles, which run at once (every-kernel mode)")
    ap.add_argument("--compile", metavar="K1,K2", help="compile server: these kernels, one import, a child each")
    ap.add_argument("--cache", metavar="FILE", help="answer from / record settled results in FILE (every-kernel mode)")
    ap.add_argument("--refresh", action="store_true", help="with --cache: compile anyway, then record")
    args = ap.parse_args(argv)
    if not re.match(r"^sm_\d+[af]?$", args.arch):
        ap.error("--arch must look like sm_121a")
    if args.kernel:
        import shutil

        from cutedsl_isolation import scratch
        from cutedsl_kernels import compile_one

        versions = dist_versions(find_dists())
        info = {"version": versions.get(DIST_PREFIX) or next(iter(versions.values()), None), "dists": versions}
        os.environ["CUTE_DSL_ARCH"] = args.arch  # older DSLs read the arch from here when an op is built
        os.environ.setdefault("CUTE_DSL_NO_CACHE", "1")  # never answer from a previous compile
        dump_dir = scratch()
        os.environ["CUTE_DSL_CACHE_DIR"] = dump_dir
        try:
            result = compile_one(args.kernel, args.arch, dump_dir)
        finally:
            shutil.rmtree(dump_dir, ignore_errors=True)
        result.update(info)
        sys.stdout.write("\n" + json.dumps(result) + "\n")
        sys.stdout.flush()
        os._exit(0)  # the DSL's interpreter teardown costs ~0.4 s of CPU and nothing is left to do
    if args.compile:
        import threading

        from cutedsl_isolation import serve

        lock = threading.Lock()

        def emit(result):  # as each kernel finishes: a later timeout must not lose it
            with lock:
                sys.stdout.write("\n" + json.dumps(result) + "\n")
                sys.stdout.flush()

        kernels = [k for k in args.compile.split(",") if k in KERNELS]
        serve(kernels, args.arch, args.timeout, emit)
        sys.stdout.flush()
        os._exit(0)  # skip the DSL's interpreter teardown (~0.4 s of CPU)
    for result in probe_all(args.arch, args.timeout, args.cache, not args.refresh):
        sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
