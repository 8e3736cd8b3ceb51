"""The kernels themselves and compiling one in this process: only ever imported by a compile
child, once cutlass is importable. Classifies what the DSL and its PTX compiler said.
"""

import os
import re
import sys
import time

from cutedsl_install import CUTLASS_IR_RE

INSTRUCTION_RE = {
    "nvfp4-mma": re.compile(r"^\s*(?:@!?%p\d+\s+)?(_?mma\.[^\s]*(?:block_scale|mxf4)[^\s]*)", re.M),
    "nvfp4-mma-tile": re.compile(r"^\s*(?:@!?%p\d+\s+)?(_?mma\.[^\s]*(?:block_scale|mxf4)[^\s]*)", re.M),
    "e2m1-cvt": re.compile(r"^\s*(?:@!?%p\d+\s+)?(cvt\.[^\s]*e2m1[^\s]*)", re.M),
}


ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def build_nvfp4_mma(cutlass, cute, warps=(1, 1), kblocks=1):
    """A kernel issuing NVFP4 block-scaled MMAs on a tile of warps[0] x warps[1] warps (each warp
    one 16x8 atom) over `kblocks` k-blocks of 64; returns (jit function, fake args). The default is
    the minimal one-warp, one-MMA kernel."""
    warp = cute.nvgpu.warp
    f4, f32, sf_t = cutlass.Float4E2M1FN, cutlass.Float32, cutlass.Float8E4M3FN
    M, N, K, VEC = 16 * warps[0], 8 * warps[1], 64 * kblocks, 16
    ATOM_K = 64
    THREADS = 32 * warps[0] * warps[1]

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
        tiled_mma = cute.make_tiled_mma(op, (warps[0], warps[1], 1), permutation_mnk=(M, N, ATOM_K))
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
        kernel(gA, gB, gSFA, gSFB, gC).launch(grid=(1, 1, 1), block=(THREADS, 1, 1))

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


def build_nvfp4_mma_tile(cutlass, cute):
    """The realistic tile: 2x2 warps and 4 k-blocks, the shape of the b12x GEMM's inner loop. Some
    installs compile the minimal kernel and kill the compiler (SIGSEGV) on this one."""
    return build_nvfp4_mma(cutlass, cute, warps=(2, 2), kblocks=4)


BUILDERS = {"nvfp4-mma": build_nvfp4_mma, "nvfp4-mma-tile": build_nvfp4_mma_tile, "e2m1-cvt": build_e2m1_cvt}


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
            result["detail"] = "compiled for %s, but no %s instruction in the PTX" % (arch, "block-scaled mma" if kernel.startswith("nvfp4-mma") else "e2m1 cvt")
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
