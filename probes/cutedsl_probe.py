"""CuTe DSL (nvidia-cutlass-dsl) compile probe, run by the TARGET's python.

Compiles tiny kernels with the target's own CuTe DSL for an arch given on the command line
(no GPU needed: without one the DSL would fall back to sm_100a, so the arch is always explicit):

  nvfp4-mma  one warp, one NVFP4 block-scaled MMA: MmaMXF4NVF4Op, e2m1 x e2m1 -> f32,
             e4m3 scale factors, one per 16 values (m16n8k64, kind::mxf4nvf4, scale_vec::4X)
  e2m1-cvt   f32 -> e2m1 conversion (cvt ... e2m1x2.f32)

  python cutedsl_probe.py --arch sm_121a --kernel nvfp4-mma   compile one kernel in this process
  python cutedsl_probe.py --arch sm_121a [--cache FILE]       every kernel, each in its own process
                                                              (a compile server, see below)

Prints one JSON object per kernel (one per line):
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
RECORDs list, of every _cutlass_ir*.so and of every sys.path folder, this script's hash, the arch,
the driver, CUTE_DSL_*).
Only settled outcomes (ok/refused/fail/crash) are written; a timeout or an error never is.

Standard library only, Python 3.8+; portable across nvidia-cutlass-dsl 4.4 .. 4.8 (the scale-factor
partition is done here because only some builds ship helpers for it).
"""

import argparse
import hashlib
import json
import os
import re
import sys
import time

KERNELS = ("nvfp4-mma", "e2m1-cvt")
INSTRUCTION_RE = {
    "nvfp4-mma": re.compile(r"^\s*(?:@!?%p\d+\s+)?(_?mma\.[^\s]*(?:block_scale|mxf4)[^\s]*)", re.M),
    "e2m1-cvt": re.compile(r"^\s*(?:@!?%p\d+\s+)?(cvt\.[^\s]*e2m1[^\s]*)", re.M),
}
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


DIST_PREFIX = "nvidia-cutlass-dsl"
LIBS_PREFIX = DIST_PREFIX + "-libs-"
CUTLASS_IR_RE = re.compile(r"^_cutlass_ir(\.cu\d+)?\..*\.so$")
CACHEABLE = ("ok", "refused", "fail", "crash")
CACHE_FORMAT = 1


# ---- what is installed, read from disk (no import) ----------------------------------------------


def find_dists():
    """The nvidia-cutlass-dsl* dist-info folders on sys.path, in path order:
    [{"name", "version", "site", "info"}]. Listing folders is all it costs."""
    found, seen = [], set()
    for entry in sys.path:
        site = os.path.abspath(entry or ".")
        real = os.path.realpath(site)
        if real in seen:
            continue
        seen.add(real)
        try:
            names = os.listdir(site)
        except OSError:  # a missing folder or a zip on sys.path
            continue
        for folder in sorted(names):
            low = folder.lower()
            if not (low.endswith(".dist-info") and low.replace("-", "_").startswith("nvidia_cutlass_dsl")):
                continue
            info = os.path.join(site, folder)
            name, version = read_name_version(info, folder[: -len(".dist-info")])
            if name.startswith(DIST_PREFIX):
                found.append({"name": name, "version": version, "site": site, "info": info})
    return found


def read_name_version(info, stem):
    """Name and Version from METADATA's header (what pip shows); the folder name where it has none."""
    name, _, version = stem.rpartition("-")
    try:
        with open(os.path.join(info, "METADATA"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break  # the header ends at the first blank line; the long description follows
                key, _, value = line.partition(":")
                if key == "Name":
                    name = value.strip()
                elif key == "Version":
                    version = value.strip()
    except OSError:
        pass
    return re.sub(r"[-_.]+", "-", name).lower(), version or None


def dist_versions(dists):
    versions = {}
    for d in dists:
        versions.setdefault(d["name"], d["version"])  # the first on sys.path is the one imported
    return versions


def record_rows(dist):
    import csv

    try:
        with open(os.path.join(dist["info"], "RECORD"), encoding="utf-8", errors="replace", newline="") as fh:
            return [row for row in csv.reader(fh) if row]
    except OSError:
        return []


def installed_files(dists):
    """Every file the dists' RECORDs list (bytecode aside) plus every _cutlass_ir*.so on disk:
    {absolute path: [(libs build, recorded size)]} (the list is empty for non-compiler files)."""
    import glob

    files = {}
    for dist in dists:
        build = dist["name"][len(DIST_PREFIX) + 1:] if dist["name"].startswith(LIBS_PREFIX) else None
        for row in record_rows(dist):
            rel = row[0]
            if "__pycache__" in rel or rel.endswith(".pyc") or ".dist-info/" in rel:
                continue
            full = os.path.normpath(os.path.join(dist["site"], rel))
            owners = files.setdefault(full, [])
            if build and CUTLASS_IR_RE.match(os.path.basename(rel)):
                size = row[2] if len(row) > 2 else ""
                owners.append((build, int(size) if size.isdigit() else None))
    # A compiler file no RECORD lists still loads (the loader lists the folder): 4.4/4.5 and >= 4.6 layouts.
    for site in sorted({d["site"] for d in dists}):
        for so in glob.glob(os.path.join(site, "nvidia_cutlass_dsl", "*", "cutlass", "_mlir", "_mlir_libs", "_cutlass_ir*.so")):
            files.setdefault(os.path.normpath(so), [])
    return files


def stat_files(paths):
    """[path, size, mtime_ns] for each path; a missing file keeps its place with None."""
    out = []
    for path in sorted(paths):
        try:
            st = os.stat(path)
            out.append([path, st.st_size, st.st_mtime_ns])
        except OSError:
            out.append([path, None, None])
    return out


def active_build(compiler_lib, files, stats):
    """Which libs build wrote the compiler library in use: the one whose RECORD lists that file at its
    size on disk. The library the compile loaded when known, else the only one on disk; None if untold."""
    sizes = {p: size for p, size, _ in stats}
    if compiler_lib is None:
        on_disk = [p for p in files if CUTLASS_IR_RE.match(os.path.basename(p)) and sizes.get(p) is not None]
        if len(on_disk) != 1:
            return None  # the loader picks among several by the driver: only the compile can tell
        compiler_lib = on_disk[0]
    compiler_lib = os.path.normpath(compiler_lib)
    if compiler_lib not in files:
        return None
    owners = files[compiler_lib]
    size = sizes.get(compiler_lib)
    builds = sorted({b for b, want in owners if want is None or want == size})
    if len(builds) == 1:
        return builds[0]
    return "unknown" if owners else None


# ---- the cache ----------------------------------------------------------------------------------


def cache_key(arch, dists, stats):
    """Everything that decides the outcome, as JSON-plain values (a key read back compares equal)."""
    with open(os.path.abspath(__file__), "rb") as fh:
        probe = hashlib.sha256(fh.read()).hexdigest()
    env = sorted([k, v] for k, v in os.environ.items() if k.startswith("CUTE_DSL_") or k in ("PYTHONPATH", "LD_LIBRARY_PATH"))
    return {
        "format": CACHE_FORMAT,
        "probe": probe,
        "python": [sys.executable, sys.version],
        "arch": arch,
        "dists": [[d["name"], d["version"], d["info"]] for d in dists],
        "files": stats,
        # A folder on sys.path changes when anything is installed or removed in it: a .pth or a
        # `cutlass` that no RECORD above lists could change what `import cutlass` finds.
        "path": stat_files(os.path.abspath(e or ".") for e in sys.path),
        "driver": driver_identity(),
        "env": env,
    }


def driver_identity():
    """The kernel driver's version line: a driver change can change what compiles (libcuda after
    codegen in 4.4, the compiler flavour the >= 4.6 loader picks)."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as fh:
            return fh.readline().strip()
    except OSError:
        return None


def read_cache(path, key):
    """({kernel: settled result}, build) from FILE when its key is this key; ({}, None) otherwise."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}, None  # absent or corrupt: compile, then rewrite it
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("results"), dict):
        return {}, None
    results = {}
    for kernel, result in data["results"].items():
        if kernel in KERNELS and isinstance(result, dict) and result.get("kernel") == kernel and result.get("status") in CACHEABLE:
            results[kernel] = result
    build = data.get("build")
    return results, build if isinstance(build, str) else None


def write_cache(path, key, results, build):
    settled = {k: r for k, r in results.items() if r.get("status") in CACHEABLE}
    if not settled:
        return
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"key": key, "results": settled, "build": build}, fh)
        os.replace(tmp, path)  # readers see the old file or the new one, never half of one
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass  # a read-only cache costs speed, not correctness


# ---- the kernels (only defined once cutlass is importable) --------------------------------------


def build_nvfp4_mma(cutlass, cute):
    """A one-warp kernel issuing one NVFP4 block-scaled MMA; returns (jit function, fake args)."""
    warp = cute.nvgpu.warp
    f4, f32, sf_t = cutlass.Float4E2M1FN, cutlass.Float32, cutlass.Float8E4M3FN
    M, N, K, VEC = 16, 8, 64, 16

    # Plain functions (not traced as kernel code, so a Python `if` stays a Python `if`).
    def gemm_variadic(tiled_mma, c, a, sfa, b, sfb):
        cute.gemm(tiled_mma, c, [a, sfa], [b, sfb], c)

    def gemm_fields(tiled_mma, c, a, sfa, b, sfb):
        # DSLs before the variadic gemm (4.4) take the scale factors as atom fields.
        tiled_mma.set(warp.Field.SFA, sfa.iterator)
        tiled_mma.set(warp.Field.SFB, sfb.iterator)
        cute.gemm(tiled_mma, c, a, b, c)

    gemm_src = source_of(cute.gemm)
    block_scaled_gemm = gemm_variadic if ("a_vals" in gemm_src or "variadic" in gemm_src or not gemm_src) else gemm_fields

    def sf_view(gsf, mn):
        # Scale factors as an (MN, K) tensor in which every 16 consecutive K share one value:
        # stride 0 inside each block is what the MMA's scale-factor layout expects.
        layout = cute.make_layout((mn, (VEC, K // VEC)), stride=(K // VEC, (0, 1)))
        return cute.make_tensor(gsf.iterator, layout)

    def thrfrg(sf_layout, tiled_mma, which):
        # Thread-value partition of the scale factors for the SM120 block-scaled atom (the same
        # algebra as cute's C++ mma_traits_sm120.hpp SFALayout / SFBLayout for K = 64).
        shape_mnk = tiled_mma.shape_mnk
        thr = tiled_mma.thr_layout_vmnk
        perm = tiled_mma.permutation_mnk
        if which == "a":
            atom = cute.make_layout(((2, 2, 8), 64), stride=((8, 0, 1), 16))
            mn_mode, thr_mn = 0, thr[1]
        else:
            atom = cute.make_layout(((4, 8), 64), stride=((0, 1), 8))
            mn_mode, thr_mn = 1, thr[2]
        if perm is not None:
            sf_layout = cute.logical_divide(sf_layout, (perm[mn_mode], perm[2]))
        tiled = cute.zipped_divide(sf_layout, (cute.make_layout(shape_mnk[mn_mode]), cute.make_layout(shape_mnk[2])))
        tv = cute.composition(tiled, (atom, None))
        return cute.zipped_divide(tv, (None, (cute.make_layout(cute.size(thr_mn)), cute.make_layout(cute.size(thr[3])))))

    def sf_fragment(gsf, tiled_mma, tidx, which):
        thr_tensor = cute.make_tensor(gsf.iterator, thrfrg(gsf.layout, tiled_mma, which))
        vmnk = tiled_mma.thr_layout_vmnk.get_flat_coord(tidx)
        coord = (vmnk[0], (vmnk[1] if which == "a" else vmnk[2], vmnk[3]))
        part = cute.group_modes(cute.flatten(thr_tensor[coord, (None, None)]), 0, 2)
        while cute.rank(part) > 3:  # (V, MN, K): the rank cute.gemm wants for every operand
            part = cute.group_modes(part, 1, 3)
        return part

    @cute.kernel
    def kernel(gA: cute.Tensor, gB: cute.Tensor, gSFA: cute.Tensor, gSFB: cute.Tensor, gC: cute.Tensor):
        # Building the op is where the DSL checks the arch (and refuses one it does not admit).
        op = warp.MmaMXF4NVF4Op(f4, f32, sf_t)
        tiled_mma = cute.make_tiled_mma(op, (1, 1, 1), permutation_mnk=(M, N, K))
        tidx, _, _ = cute.arch.thread_idx()
        thr_mma = tiled_mma.get_slice(tidx)
        tCgA = thr_mma.partition_A(gA)
        tCgB = thr_mma.partition_B(gB)
        tCgC = thr_mma.partition_C(gC)
        tCrA = tiled_mma.make_fragment_A(tCgA)
        tCrB = tiled_mma.make_fragment_B(tCgB)
        tCrC = tiled_mma.make_fragment_C(tCgC)
        cute.autovec_copy(tCgA, tCrA)
        cute.autovec_copy(tCgB, tCrB)
        tCrC.fill(0.0)
        tCgSFA = sf_fragment(sf_view(gSFA, M), tiled_mma, tidx, "a")
        tCgSFB = sf_fragment(sf_view(gSFB, N), tiled_mma, tidx, "b")
        tCrSFA = cute.make_fragment_like(tCgSFA)
        tCrSFB = cute.make_fragment_like(tCgSFB)
        cute.autovec_copy(tCgSFA, tCrSFA)
        cute.autovec_copy(tCgSFB, tCrSFB)
        block_scaled_gemm(tiled_mma, tCrC, tCrA, tCrSFA, tCrB, tCrSFB)
        cute.autovec_copy(tCrC, tCgC)

    @cute.jit
    def launch(gA: cute.Tensor, gB: cute.Tensor, gSFA: cute.Tensor, gSFB: cute.Tensor, gC: cute.Tensor):
        kernel(gA, gB, gSFA, gSFB, gC).launch(grid=(1, 1, 1), block=(32, 1, 1))

    fake = cute.runtime.make_fake_compact_tensor
    args = (
        fake(f4, (M, K), stride_order=(1, 0), assumed_align=16),
        fake(f4, (N, K), stride_order=(1, 0), assumed_align=16),
        fake(sf_t, (M, K // VEC), stride_order=(1, 0), assumed_align=16),
        fake(sf_t, (N, K // VEC), stride_order=(1, 0), assumed_align=16),
        fake(f32, (M, N), stride_order=(1, 0), assumed_align=16),
    )
    return launch, args


def build_e2m1_cvt(cutlass, cute):
    """A one-warp kernel converting 32 x 8 f32 values to e2m1 in registers and storing them."""
    f4, f32 = cutlass.Float4E2M1FN, cutlass.Float32
    VALS = 8

    @cute.kernel
    def kernel(gX: cute.Tensor, gY: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        x = cute.make_rmem_tensor(cute.make_layout(VALS), f32)
        cute.autovec_copy(gX[tidx, None], x)
        y = cute.make_rmem_tensor(cute.make_layout(VALS), f4)
        y.store(x.load().to(f4))
        cute.autovec_copy(y, gY[tidx, None])

    @cute.jit
    def launch(gX: cute.Tensor, gY: cute.Tensor):
        kernel(gX, gY).launch(grid=(1, 1, 1), block=(32, 1, 1))

    fake = cute.runtime.make_fake_compact_tensor
    args = (
        fake(f32, (32, VALS), stride_order=(1, 0), assumed_align=16),
        fake(f4, (32, VALS), stride_order=(1, 0), assumed_align=16),
    )
    return launch, args


def source_of(fn):
    import inspect

    try:
        return inspect.getsource(inspect.unwrap(fn))
    except Exception:  # no source (a compiled or odd build): assume the current API
        return ""


BUILDERS = {"nvfp4-mma": build_nvfp4_mma, "e2m1-cvt": build_e2m1_cvt}


# ---- compile one kernel in this process ---------------------------------------------------------


def import_failure():
    """Import the DSL; None when it imports, else the one-line reason (a broken install is evidence too)."""
    try:
        import cutlass  # noqa: F401
        import cutlass.cute  # noqa: F401
    except BaseException as exc:
        return "import cutlass.cute failed: %s: %s" % (type(exc).__name__, first_line(ANSI_RE.sub("", str(exc))))
    return None


def compile_one(kernel, arch, dump_dir):
    result = {"kernel": kernel, "arch": arch, "status": "error", "detail": "", "admissible_archs": None, "instruction": None}
    t0 = time.time()
    failure = import_failure()  # already imported (and free) in a compile server's forked child
    if failure:
        result["detail"] = failure
        return result
    import cutlass
    import cutlass.cute as cute

    result["bundled_cuda"] = bundled_cuda()
    result["compiler_lib"] = compiler_lib()
    try:
        fn, args = BUILDERS[kernel](cutlass, cute)
        options = "--gpu-arch %s --keep-ptx --keep-cubin --dump-dir %s" % (arch, dump_dir)
        compiled = cute.compile(fn, *args, options=options)
        ptx = getattr(compiled, "__ptx__", None) or read_dumped(dump_dir, ".ptx")
        result["ptx"] = bool(ptx)
        result["cubin"] = bool(getattr(compiled, "__cubin__", None)) or bool(find_dumped(dump_dir, ".cubin"))
        result["instruction"] = find_instruction(kernel, ptx)
        if result["instruction"]:
            result["status"] = "ok"
            result["detail"] = "compiled for %s; PTX has %s" % (arch, result["instruction"])
        else:
            result["detail"] = "compiled for %s, but no %s instruction in the PTX" % (arch, "block-scaled mma" if kernel == "nvfp4-mma" else "e2m1 cvt")
    except BaseException as exc:
        if os.environ.get("SPARKDOCTOR_PROBE_DEBUG"):
            import traceback

            traceback.print_exc()
        classify_exception(result, exc, kernel, dump_dir)
    result["ms"] = round((time.time() - t0) * 1000)
    return result


def classify_exception(result, exc, kernel, dump_dir):
    text = ANSI_RE.sub("", exception_text(exc))
    ptx = read_dumped(dump_dir, ".ptx")
    cubin = bool(find_dumped(dump_dir, ".cubin"))
    result["ptx"], result["cubin"] = bool(ptx), cubin
    result["instruction"] = find_instruction(kernel, ptx)
    refused = re.search(r"expects arch to be one of (\[[^\]]*\]),? but got ([\w.]+)", text)
    if refused:
        result["status"] = "refused"
        result["admissible_archs"] = re.findall(r"sm_\d+[af]?", refused.group(1))
        got = refused.group(2).split(".")[-1]
        result["detail"] = "the DSL expects arch to be one of %s, but got %s" % (result["admissible_archs"], got)
        return
    ptxas = find_line(text, r"line \d+; error\s*:|ptxas (?:fatal|error)")
    if ptxas:
        result["status"] = "fail"
        result["detail"] = re.sub(r"^.*?(?=ptxas|line \d+;)", "", ptxas, count=1)
        return
    if re.search(r"libcuda|CudaDriverDependencyError|cuInit", text):
        made = " and ".join(x for x, ok in (("PTX", ptx), ("cubin", cubin)) if ok) or "nothing"
        result["detail"] = "code generation produced %s%s, but the step after it needs libcuda (the NVIDIA driver), which is missing here: %s" % (
            made,
            " (PTX has %s)" % result["instruction"] if result["instruction"] else "",
            find_line(text, r"libcuda\S* library is not accessible|libcuda") or first_line(text),
        )
        return
    result["detail"] = "%s: %s" % (type(exc).__name__, find_line(text, r"^\s*error\b|error:") or first_line(text))


def exception_text(exc):
    """The messages of an exception and of everything it was raised from."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts.append("%s: %s" % (type(exc).__name__, exc))
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def find_line(text, pattern):
    for line in text.splitlines():
        if re.search(pattern, line):
            return re.sub(r"\s+", " ", line.strip().lstrip("\u2022*- "))[:400]
    return None


def first_line(text):
    for line in str(text).splitlines():
        line = line.strip()
        if re.search(r"[A-Za-z]{3}", line):
            return line[:400]
    return "no message"


def find_instruction(kernel, ptx):
    if not ptx:
        return None
    m = INSTRUCTION_RE[kernel].search(ptx)
    return m.group(1).rstrip(";") if m else None


def find_dumped(dump_dir, suffix):
    found = []
    for root, _dirs, files in os.walk(dump_dir):
        found += [os.path.join(root, f) for f in files if f.endswith(suffix)]
    return sorted(found)


def read_dumped(dump_dir, suffix):
    texts = []
    for path in find_dumped(dump_dir, suffix):
        try:
            with open(path, "rb") as fh:
                texts.append(fh.read().decode("utf-8", "replace").replace("\x00", ""))
        except OSError:
            pass
    return "\n".join(texts) or None


def compiler_lib():
    """The _cutlass_ir*.so this process loaded (>= 4.6 ships one per CUDA major and picks at import)."""
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if CUTLASS_IR_RE.match(os.path.basename(path)):
            return path
    return None


def bundled_cuda():
    try:
        from cutlass.base_dsl.version_info import CUDA_VERSION

        return "%d.%d" % (CUDA_VERSION.major, CUDA_VERSION.minor)
    except BaseException:
        return None


# ---- run every kernel in its own process --------------------------------------------------------
#
# The probe (cheap, never imports cutlass) starts one compile server: a fresh interpreter that imports
# the DSL once (most of a compile's cost) and forks a child per kernel, so a compiler that segfaults
# or hangs on one kernel takes only that child down. Where forking is unsafe (the import initialised
# the CUDA driver, which a forked child cannot use: 4.4/4.5 query the GPU at import) or unavailable,
# the server runs a fresh `--kernel` interpreter per kernel instead.


def compile_with_server(kernels, arch, timeout):
    """{kernel: result} from a compile server given `timeout` seconds in all (its kernels compile at
    once); at the deadline the server and its children are killed, and what finished is kept."""
    import subprocess

    t0 = time.time()
    cmd = [sys.executable, "-B", os.path.abspath(__file__), "--arch", arch, "--compile", ",".join(kernels), "--timeout", "%g" % timeout]
    try:
        # Its own session, so the deadline kills the forked compiles with it.
        server = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, errors="replace", start_new_session=True)
    except OSError as exc:
        return {k: {"kernel": k, "arch": arch, "status": "error", "detail": "could not start the compile: %s" % exc} for k in kernels}
    try:
        out, err = server.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(server)
        out, err = server.communicate()
        timed_out = True
    seconds = time.time() - t0
    results = {}
    for kernel in kernels:
        result = interpret(kernel, arch, None if timed_out else server.returncode, out, err, seconds)
        if timed_out and result.get("status") == "error" and "without a result" in result.get("detail", ""):
            result = {"kernel": kernel, "arch": arch, "status": "error", "detail": "compile timed out after %gs" % timeout, "ms": round(seconds * 1000)}
        results[kernel] = result
    return results


def kill_group(child):
    import signal

    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()


def serve(kernels, arch, timeout, emit):
    """The compile server: import once, then each kernel in a forked child (or a fresh interpreter)."""
    import shutil
    import tempfile

    os.environ["CUTE_DSL_ARCH"] = arch  # older DSLs read the arch from here when an op is built
    os.environ.setdefault("CUTE_DSL_NO_CACHE", "1")  # never answer from a previous compile
    base = tempfile.mkdtemp(prefix="sparkdoctor-cutedsl-")
    os.environ["CUTE_DSL_CACHE_DIR"] = base  # some DSLs read it once, at import
    try:
        if fork_is_safe():
            t0 = time.time()
            failure = import_failure()
            if failure:
                for kernel in kernels:
                    emit({"kernel": kernel, "arch": arch, "status": "error", "detail": failure, "admissible_archs": None, "instruction": None, "ms": round((time.time() - t0) * 1000)})
                return
            if cuda_initialized() is False:
                compile_forked(kernels, arch, base, emit)
                return
        compile_execd(kernels, arch, timeout, emit)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def fork_is_safe():
    return hasattr(os, "fork") and not os.environ.get("SPARKDOCTOR_CUTEDSL_NO_FORK")


def cuda_initialized():
    """Whether this process has initialised the CUDA driver (a forked child could not use it then);
    None when it cannot tell. Without libcuda loaded it cannot have; with it, cuDeviceGetCount answers
    CUDA_ERROR_NOT_INITIALIZED (3) until cuInit, without initialising anything itself."""
    try:
        with open("/proc/self/maps") as fh:
            if "libcuda.so" not in fh.read():
                return False
    except OSError:
        return None
    try:
        import ctypes

        count = ctypes.c_int(0)
        return ctypes.CDLL("libcuda.so.1").cuDeviceGetCount(ctypes.byref(count)) != 3
    except (OSError, AttributeError):
        return None


def compile_forked(kernels, arch, base, emit):
    import warnings

    children = {}
    for kernel in kernels:
        dump_dir = os.path.join(base, kernel)
        os.mkdir(dump_dir)
        out_path = os.path.join(base, kernel + ".json")
        t0 = time.time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: an idle BLAS thread is no hazard here
            pid = os.fork()
        if pid == 0:  # the child: compile, leave the result in a file, exit without teardown
            code = 0
            try:
                os.dup2(2, 1)  # whatever the DSL prints must not pass for the server's output
                os.environ["CUTE_DSL_CACHE_DIR"] = dump_dir
                result = compile_one(kernel, arch, dump_dir)
                result["isolation"] = "fork"
                with open(out_path, "w") as fh:
                    fh.write(json.dumps(result))
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        children[pid] = (kernel, out_path, t0)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in children:
            continue
        kernel, out_path, t0 = children.pop(pid)
        try:
            with open(out_path) as fh:
                text = fh.read()
        except OSError:
            text = ""
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        result = interpret(kernel, arch, code, text, "", time.time() - t0)
        result.setdefault("isolation", "fork")
        emit(result)


def compile_execd(kernels, arch, timeout, emit):
    """Each kernel in a fresh interpreter (`--kernel`), all at once; in this server's process group,
    so the deadline that kills the server kills them too."""
    import subprocess
    import threading

    def one(kernel):
        t0 = time.time()
        cmd = [sys.executable, "-B", os.path.abspath(__file__), "--arch", arch, "--kernel", kernel]
        try:
            child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, errors="replace")
            try:
                out, err = child.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                emit({"kernel": kernel, "arch": arch, "status": "error", "detail": "compile timed out after %gs" % timeout, "ms": round((time.time() - t0) * 1000), "isolation": "exec"})
                return
            result = interpret(kernel, arch, child.returncode, out, err, time.time() - t0)
        except Exception as exc:  # e.g. no process could be started: evidence, not a traceback
            result = {"kernel": kernel, "arch": arch, "status": "error", "detail": "could not run the compile: %s: %s" % (type(exc).__name__, exc)}
        result["isolation"] = "exec"
        emit(result)

    threads = [threading.Thread(target=one, args=(k,)) for k in kernels]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def interpret(kernel, arch, returncode, stdout, stderr, seconds):
    """Turn a child's exit into one result: its JSON if it printed one, else crash / error."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("kernel") == kernel:
                return data
    tail = [l for l in (stderr or "").strip().splitlines() if l.strip()]
    ms = round(seconds * 1000)
    if returncode is not None and returncode < 0:
        return {"kernel": kernel, "arch": arch, "status": "crash", "detail": "the CuTe DSL compiler was killed by %s%s" % (signal_name(-returncode), ": " + tail[-1][:300] if tail else ""), "ms": ms}
    return {"kernel": kernel, "arch": arch, "status": "error", "detail": "probe exited %s without a result%s" % (returncode, ": " + tail[-1][:300] if tail else ""), "ms": ms}


def signal_name(number):
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


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
        import tempfile

        versions = dist_versions(find_dists())
        info = {"version": versions.get(DIST_PREFIX) or next(iter(versions.values()), None), "dists": versions}
        os.environ["CUTE_DSL_ARCH"] = args.arch  # older DSLs read the arch from here when an op is built
        os.environ.setdefault("CUTE_DSL_NO_CACHE", "1")  # never answer from a previous compile
        dump_dir = tempfile.mkdtemp(prefix="sparkdoctor-cutedsl-")
        os.environ["CUTE_DSL_CACHE_DIR"] = dump_dir
        try:
            result = compile_one(args.kernel, args.arch, dump_dir)
        finally:
            shutil.rmtree(dump_dir, ignore_errors=True)
        result.update(info)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
        os._exit(0)  # the DSL's interpreter teardown costs ~0.4 s of CPU and nothing is left to do
    if args.compile:
        import threading

        lock = threading.Lock()

        def emit(result):  # as each kernel finishes: a later timeout must not lose it
            with lock:
                sys.stdout.write(json.dumps(result) + "\n")
                sys.stdout.flush()

        kernels = [k for k in args.compile.split(",") if k in KERNELS]
        serve(kernels, args.arch, args.timeout, emit)
        sys.stdout.flush()
        os._exit(0)  # skip the DSL's interpreter teardown (~0.4 s of CPU)
    for result in probe_all(args.arch, args.timeout, args.cache, not args.refresh):
        sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
