"""Static capabilities of the installed FlashInfer and vLLM, read from their files WITHOUT importing them.

Run by the TARGET's python (standard library only, Python 3.8+):

  python capabilities.py [--cache FILE]

Prints one JSON object: {"capabilities": {id: {"value": v, "evidence": "pkg/file.py:LINE ..."}},
"packages": {dist: {"version", "root"}}, "ms": N}. A package that is not installed has no ids; a
layout these rules do not recognise gives value None and evidence saying why (unknown, not False).

  flashinfer.b12x_gemm            FlashInfer has the b12x (SM120-family warp-MMA) NVFP4 GEMM backend
  flashinfer.b12x_gemm_sm121      its requirement check admits compute capability 121
  flashinfer.b12x_auto_sm121      mm_fp4's `auto` heuristic can put b12x first on SM121
  flashinfer.b12x_hardcoded_sm120 the b12x kernel launch only accepts sm_version "sm_120"
  vllm.b12x_linear / _auto        vLLM has FlashInfer's b12x NVFP4 linear kernel / it is in auto-selection
  vllm.b12x_moe / _auto           vLLM has the FLASHINFER_B12X NVFP4 MoE backend / it is in auto-selection
  vllm.marlin_fp8_sm121           VLLM_MARLIN_INPUT_DTYPE=fp8 is accepted on SM121
  vllm.cg_estimate_clamped        the CUDA-graph memory estimate cannot go negative
  vllm.mamba_align_assert         Mamba align mode asserts block_size <= max_num_batched_tokens
  vllm.cubin_archs                sm_ archs vLLM's _C*.so was built for (from the fatbin's ptxas lines)
  vllm.env.NAME                   "known" | "deprecated" | "unknown" to the installed vLLM's envs.py

Derived facts are cached per file set (path, size, mtime) in --cache, so a warm run only stats files.
"""

import json
import os
import re
import sys
import textwrap
import time

GPU_CC = (12, 1)  # the questions are about GB10
WATCHED_ENV = ("VLLM_NVFP4_GEMM_BACKEND", "VLLM_USE_FLASHINFER_MOE_FP4", "VLLM_FLASHINFER_MOE_BACKEND", "VLLM_TEST_FORCE_FP8_MARLIN", "VLLM_MARLIN_INPUT_DTYPE")
FREE = "free"  # a condition that does not depend on the GPU: assume it can hold


ast = None  # imported only when a rule has to run: a warm (cached) run never needs it


def load_ast():
    global ast
    if ast is None:
        import ast as module

        ast = module


def cap(value, evidence):
    return {"value": value, "evidence": evidence}


# ---- locating a distribution's files without importing it -------------------------------------


def find_package(dist_name, top):
    """(version, package dir or None) of an installed distribution; None when not installed.

    Looks for <name>-<version>.dist-info on sys.path the way importlib.metadata would, without its
    import cost (this probe must stay fast when warm).
    """
    want = re.sub(r"[-_.]+", "_", dist_name).lower()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            m = re.match(r"^([A-Za-z0-9_.]+?)-([^-]+)\.dist-info$", name) or re.match(r"^([A-Za-z0-9_.]+?)(?:-([^-]+?))?(?:-py[\d.]+)?\.egg-info$", name)
            if not m or re.sub(r"[-_.]+", "_", m.group(1)).lower() != want:
                continue
            info = os.path.join(entry or ".", name)
            version = m.group(2) or egg_version(info)
            pkg = os.path.join(entry or ".", top)
            if os.path.isfile(os.path.join(pkg, "__init__.py")):
                return version, os.path.abspath(pkg)
            return version, locate_elsewhere(info, entry or ".", top)
    return None


def egg_version(info):
    """Version from a (setup.py develop) .egg-info's PKG-INFO."""
    text = read_text(os.path.join(info, "PKG-INFO")) if os.path.isdir(info) else read_text(info)
    m = re.search(r"^Version:\s*(\S+)", text or "", re.M)
    return m.group(1) if m else "unknown"


def locate_elsewhere(info, site, top):
    """An editable or unusual install: RECORD or the editable finder says where the package lives."""
    record = read_text(os.path.join(info, "RECORD")) or ""
    for line in record.splitlines():
        path = line.split(",", 1)[0]
        if path.endswith(top + "/__init__.py"):
            return os.path.abspath(os.path.dirname(os.path.join(site, path)))
        if "__editable__" in path and path.endswith(".py"):
            text = read_text(os.path.join(site, path)) or ""
            m = re.search(r"['\"]%s['\"]\s*:\s*['\"]([^'\"]+)['\"]" % re.escape(top), text)
            if m and os.path.isfile(os.path.join(m.group(1), "__init__.py")):
                return m.group(1)
        if path.endswith(".pth"):
            for where in (read_text(os.path.join(site, path)) or "").splitlines():
                if os.path.isfile(os.path.join(where.strip(), top, "__init__.py")):
                    return os.path.join(where.strip(), top)
    return None


def read_text(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


class Files(object):
    """Reads files under a site dir and remembers each one's (size, mtime) for the cache."""

    def __init__(self, site):
        self.site = site
        self.seen = {}

    def stat_of(self, rel):
        try:
            st = os.stat(os.path.join(self.site, rel))
            return [st.st_size, st.st_mtime_ns]
        except OSError:
            return None

    def text(self, rel):
        self.seen[rel] = self.stat_of(rel)
        return read_text(os.path.join(self.site, rel)) if self.seen[rel] else None

    def listing(self, rel):
        path = os.path.join(self.site, rel)
        try:
            names = sorted(os.listdir(path))
        except OSError:
            names = None
        self.seen[rel + "/"] = names
        return names or []


# ---- small source helpers ----------------------------------------------------------------------


def line_of(text, index):
    return text.count("\n", 0, index) + 1


def find_block(text, pattern):
    """(source, first line) of the def/class/assignment whose first line matches `pattern` (re.M)."""
    m = re.search(pattern, text, re.M)
    if not m:
        return None, None
    start = text.rfind("\n", 0, m.start()) + 1
    lines = text[start:].split("\n")
    indent = len(lines[0]) - len(lines[0].lstrip())
    body = [lines[0]]
    for line in lines[1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or len(line) - len(line.lstrip()) > indent or stripped[0] in ")]}":
            body.append(line)
            continue
        break
    while body and not body[-1].strip():
        body.pop()
    return textwrap.dedent("\n".join(body)), line_of(text, start)


def parse(source):
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def has_string(node, value):
    return any(isinstance(n, ast.Constant) and n.value == value for n in ast.walk(node))


def names_in(node):
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def const(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


# ---- evaluating a compute-capability condition at SM121 ----------------------------------------


class CapabilityEval(object):
    """Evaluate an `if` test as it would run on a GPU of compute capability GPU_CC.

    Results: True / False; FREE when it depends on something other than the GPU (CUDA version,
    dtype, a flag), taken as satisfiable; None when the expression is beyond these rules.
    Local assignments in the enclosing function are followed (is_sm120 = major == 12 and minor == 0).
    """

    def __init__(self, func_node, cc=GPU_CC):
        self.cc = cc
        self.assigned = {}
        for n in ast.walk(func_node):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                target = n.targets[0]
                if isinstance(target, ast.Name):
                    self.assigned[target.id] = n.value
                elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
                    for i, e in enumerate(target.elts):
                        self.assigned[e.id] = ("unpack", n.value, i)

    def value(self, node, depth=0):
        if depth > 20:
            return None
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.value(e, depth + 1) for e in node.elts]
            return FREE if any(i in (None, FREE) for i in items) else tuple(items)
        if isinstance(node, ast.Name):
            if node.id in ("major", "minor", "cc_major", "cc_minor") and node.id not in self.assigned:
                return self.cc[0] if "major" in node.id else self.cc[1]
            bound = self.assigned.get(node.id)
            if bound is None:
                return FREE
            if isinstance(bound, tuple) and bound[0] == "unpack":
                whole = self.value(bound[1], depth + 1)
                return whole[bound[2]] if isinstance(whole, tuple) and len(whole) > bound[2] else FREE
            return self.value(bound, depth + 1)
        if isinstance(node, ast.BoolOp):
            vals = [self.truth(self.value(v, depth + 1)) for v in node.values]
            if isinstance(node.op, ast.And):
                if False in vals:
                    return False
                return None if None in vals else (FREE if FREE in vals else True)
            if True in vals:
                return True
            return None if None in vals else (FREE if FREE in vals else False)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.truth(self.value(node.operand, depth + 1))
            return v if v in (None, FREE) else (not v)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = self.value(node.left, depth + 1), self.value(node.comparators[0], depth + 1)
            if None in (left, right):
                return None
            if FREE in (left, right):
                return FREE
            return compare(node.ops[0], left, right)
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        return FREE

    def call(self, node, depth):
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        cc_int = self.cc[0] * 10 + self.cc[1]
        if fn in ("get_compute_capability", "get_device_capability"):
            return self.cc
        arg = self.value(node.args[0], depth + 1) if node.args else None
        if fn in ("is_device_capability", "has_device_capability", "is_device_capability_family"):
            if isinstance(arg, tuple) and len(arg) == 2:
                arg = arg[0] * 10 + arg[1]
            if not isinstance(arg, int):
                return None
            if fn == "is_device_capability":
                return cc_int == arg
            if fn == "has_device_capability":
                return cc_int >= arg
            return cc_int // 10 == arg // 10
        return FREE

    @staticmethod
    def truth(v):
        if v in (None, FREE) or isinstance(v, bool):
            return v
        return bool(v)


def compare(op, a, b):
    try:
        if isinstance(op, ast.Eq):
            return a == b
        if isinstance(op, ast.NotEq):
            return a != b
        if isinstance(op, ast.Lt):
            return a < b
        if isinstance(op, ast.LtE):
            return a <= b
        if isinstance(op, ast.Gt):
            return a > b
        if isinstance(op, ast.GtE):
            return a >= b
        if isinstance(op, ast.In):
            return a in b
        if isinstance(op, ast.NotIn):
            return a not in b
    except TypeError:
        return None
    return None


def returns_reachable(func_node, predicate, ev):
    """For each `return` whose value satisfies predicate: can it run on the GPU? [(True/False/None, line)]."""
    found = []

    def walk(stmts, path):
        for st in stmts:
            if isinstance(st, ast.Return) and st.value is not None and predicate(st.value):
                found.append((all_true(path), st.lineno))
            elif isinstance(st, ast.If):
                test = ev.truth(ev.value(st.test))
                walk(st.body, path + [test])
                walk(st.orelse, path + [None if test is None else (FREE if test == FREE else not test)])
            elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try)):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(st, field, []) or [], path)
                for h in getattr(st, "handlers", []) or []:
                    walk(h.body, path)

    walk(func_node.body, [])
    return found


def all_true(path):
    if False in path:
        return False
    return None if None in path else True


# ---- FlashInfer --------------------------------------------------------------------------------

FI_GEMM = ("flashinfer/gemm/gemm_base.py", "flashinfer/gemm.py")


def flashinfer_caps(files):
    out = {}
    rel = next((r for r in FI_GEMM if files.stat_of(r)), None)
    text = files.text(rel) if rel else None
    if text is None or not re.search(r"^def mm_fp4\b", text, re.M):
        why = "no mm_fp4 in flashinfer/gemm/gemm_base.py: FlashInfer layout not recognised"
        for k in ("b12x_gemm", "b12x_gemm_sm121", "b12x_auto_sm121", "b12x_hardcoded_sm120"):
            out["flashinfer." + k] = cap(None, why)
        return out
    req = re.search(r"^def _b12x_gemm_fp4_requirement\b", text, re.M)
    if not req:
        why = "%s has no b12x FP4 GEMM backend (_b12x_gemm_fp4_requirement)" % rel
        for k in ("b12x_gemm", "b12x_gemm_sm121", "b12x_auto_sm121", "b12x_hardcoded_sm120"):
            out["flashinfer." + k] = cap(False, why)
        return out
    req_line = line_of(text, req.start())
    out["flashinfer.b12x_gemm"] = cap(True, "%s:%d _b12x_gemm_fp4_requirement" % (rel, req_line))
    out["flashinfer.b12x_gemm_sm121"] = b12x_cc_gate(text, rel, req.start())
    out["flashinfer.b12x_auto_sm121"] = b12x_auto(text, rel)
    out["flashinfer.b12x_hardcoded_sm120"] = b12x_hardcoded(files, text, rel)
    return out


def b12x_cc_gate(text, rel, def_index):
    """The @supported_compute_capability([...]) right above _b12x_gemm_fp4_requirement."""
    above = text[max(0, def_index - 400):def_index]
    decos = list(re.finditer(r"@supported_compute_capability\(\s*(\[[^\]]*\])\s*\)\s*$", above.rstrip(), re.M))
    if not decos:
        return cap(None, "%s:%d: no @supported_compute_capability on _b12x_gemm_fp4_requirement" % (rel, line_of(text, def_index)))
    ccs = const(decos[-1].group(1))
    line = line_of(text, max(0, def_index - 400) + decos[-1].start())
    if not isinstance(ccs, list):
        return cap(None, "%s:%d: compute capability list not literal" % (rel, line))
    return cap(121 in ccs, "%s:%d @supported_compute_capability(%s)" % (rel, line, ccs))


def b12x_auto(text, rel):
    src, first = find_block(text, r"^def _heuristic_func_mm_fp4\b")
    tree = parse(src) if src else None
    if tree is None:
        return cap(None, "%s: no _heuristic_func_mm_fp4 (the mm_fp4 auto heuristic): layout not recognised" % rel)
    func = tree.body[0]
    ev = CapabilityEval(func)
    hits = returns_reachable(func, lambda v: has_string(v, "b12x"), ev)
    if not hits:
        return cap(False, "%s:%d _heuristic_func_mm_fp4 never returns b12x" % (rel, first))
    for reach, line in hits:
        if reach:
            return cap(True, "%s:%d auto returns b12x on SM%d%d" % (rel, first + line - 1, GPU_CC[0], GPU_CC[1]))
    if any(reach is None for reach, _ in hits):
        line = first + hits[0][1] - 1
        return cap(None, "%s:%d: cannot tell whether this b12x branch runs on SM121" % (rel, line))
    line = first + hits[0][1] - 1
    return cap(False, "%s:%d auto prefers b12x only behind a condition SM%d%d does not meet" % (rel, line, GPU_CC[0], GPU_CC[1]))


def b12x_hardcoded(files, gemm_text, gemm_rel):
    m = re.search(r"from \.kernels\.(dense_blockscaled_gemm_sm120\w*) import", gemm_text)
    if m:
        rel = "flashinfer/gemm/kernels/%s.py" % m.group(1)
    else:
        cands = [n for n in files.listing("flashinfer/gemm/kernels") if n.startswith("dense_blockscaled_gemm_sm120") and n.endswith(".py")]
        if not cands:
            return cap(None, "%s: b12x GEMM kernel module not found" % gemm_rel)
        rel = "flashinfer/gemm/kernels/" + cands[0]
    text = files.text(rel)
    if text is None:
        return cap(None, "%s: b12x GEMM kernel module missing" % rel)
    check = re.search(r"""sm_version\s*!=\s*["']sm_120["']""", text)
    if check:
        return cap(True, "%s:%d launch accepts only sm_version \"sm_120\"" % (rel, line_of(text, check.start())))
    return cap(False, "%s: no sm_120-only sm_version check" % rel)


# ---- vLLM --------------------------------------------------------------------------------------

V_LINEAR = "vllm/model_executor/kernels/linear/__init__.py"
V_MOE = "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py"
V_MARLIN = "vllm/model_executor/layers/quantization/utils/marlin_utils.py"
V_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
V_CONFIG = ("vllm/config/vllm.py", "vllm/config.py")
V_ENVS = "vllm/envs.py"
B12X_LINEAR = "FlashInferB12xNvFp4LinearKernel"


def vllm_caps(files):
    out = {}
    out.update(vllm_linear(files))
    out.update(vllm_moe(files))
    out["vllm.marlin_fp8_sm121"] = vllm_marlin(files)
    out["vllm.cg_estimate_clamped"] = vllm_cg_clamp(files)
    out["vllm.mamba_align_assert"] = vllm_mamba(files)
    out["vllm.cubin_archs"] = vllm_cubins(files)
    return out


def vllm_linear(files):
    text = files.text(V_LINEAR)
    src, first = find_block(text or "", r"^_POSSIBLE_NVFP4_KERNELS\b")
    tree = parse(src) if src else None
    if tree is None:
        why = "no _POSSIBLE_NVFP4_KERNELS in %s: layout not recognised" % V_LINEAR
        return {"vllm.b12x_linear": cap(None, why), "vllm.b12x_linear_auto": cap(None, why)}
    imp = re.search(r"^from (vllm\.[\w.]+) import \(?[^)]*?\b%s\b" % B12X_LINEAR, text, re.M)
    if not imp:
        why = "%s does not import %s" % (V_LINEAR, B12X_LINEAR)
        return {"vllm.b12x_linear": cap(False, why), "vllm.b12x_linear_auto": cap(False, why)}
    mod_rel = imp.group(1).replace(".", "/") + ".py"
    mod_text = files.text(mod_rel) or ""
    cls = re.search(r"^class %s\b" % B12X_LINEAR, mod_text, re.M)
    where = "%s:%d" % (mod_rel, line_of(mod_text, cls.start())) if cls else "%s:%d" % (V_LINEAR, line_of(text, imp.start()))
    out = {"vllm.b12x_linear": cap(True, "%s class %s" % (where, B12X_LINEAR))}
    cuda = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if k is not None and isinstance(k, ast.Attribute) and k.attr == "CUDA" and isinstance(v, ast.List):
                    cuda = v
    if cuda is None:
        out["vllm.b12x_linear_auto"] = cap(None, "%s:%d: no CUDA list in _POSSIBLE_NVFP4_KERNELS" % (V_LINEAR, first))
        return out
    for el in cuda.elts:
        if isinstance(el, ast.Name) and el.id == B12X_LINEAR:
            out["vllm.b12x_linear_auto"] = cap(True, "%s:%d %s is in the auto-selection list" % (V_LINEAR, first + el.lineno - 1, B12X_LINEAR))
            return out
    out["vllm.b12x_linear_auto"] = cap(False, "%s:%d _POSSIBLE_NVFP4_KERNELS[CUDA] leaves %s out (explicit opt-in only)" % (V_LINEAR, first, B12X_LINEAR))
    return out


def vllm_moe(files):
    text = files.text(V_MOE) or ""
    enum_src, enum_first = find_block(text, r"^class NvFp4MoeBackend\b")
    sel_src, sel_first = find_block(text, r"^def select_nvfp4_moe_backend\b")
    if not enum_src or not sel_src:
        why = "no NvFp4MoeBackend / select_nvfp4_moe_backend in %s: layout not recognised" % V_MOE
        return {"vllm.b12x_moe": cap(None, why), "vllm.b12x_moe_auto": cap(None, why)}
    member = re.search(r"^\s+FLASHINFER_B12X\s*=", enum_src, re.M)
    if not member:
        why = "%s:%d NvFp4MoeBackend has no FLASHINFER_B12X" % (V_MOE, enum_first)
        return {"vllm.b12x_moe": cap(False, why), "vllm.b12x_moe_auto": cap(False, why)}
    out = {"vllm.b12x_moe": cap(True, "%s:%d NvFp4MoeBackend.FLASHINFER_B12X" % (V_MOE, enum_first + line_of(enum_src, member.start()) - 1))}
    tree = parse(sel_src)
    first_list = None
    if tree is not None:
        for node in ast.walk(tree.body[0]):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "AVAILABLE_BACKENDS" for t in node.targets) and isinstance(node.value, ast.List):
                if first_list is None or node.lineno < first_list.lineno:
                    first_list = node
    if first_list is None:
        out["vllm.b12x_moe_auto"] = cap(None, "%s:%d: no AVAILABLE_BACKENDS list in select_nvfp4_moe_backend" % (V_MOE, sel_first))
        return out
    line = sel_first + first_list.lineno - 1
    listed = any(isinstance(e, ast.Attribute) and e.attr == "FLASHINFER_B12X" for e in first_list.value.elts)
    if listed:
        out["vllm.b12x_moe_auto"] = cap(True, "%s:%d FLASHINFER_B12X is in AVAILABLE_BACKENDS" % (V_MOE, line))
    else:
        out["vllm.b12x_moe_auto"] = cap(False, "%s:%d AVAILABLE_BACKENDS leaves FLASHINFER_B12X out (explicit opt-in only)" % (V_MOE, line))
    return out


def vllm_marlin(files):
    text = files.text(V_MARLIN) or ""
    src, first = find_block(text, r"^def get_marlin_input_dtype\b")
    tree = parse(src) if src else None
    if tree is None:
        return cap(None, "no get_marlin_input_dtype in %s: layout not recognised" % V_MARLIN)
    func = tree.body[0]
    for node in ast.walk(func):
        if isinstance(node, ast.If) and has_string(node.test, "fp8"):
            for inner in node.body:
                if isinstance(inner, ast.If) and any(isinstance(s, ast.Raise) for s in inner.body):
                    if not ({"is_device_capability", "is_device_capability_family", "has_device_capability"} & names_in(inner.test)):
                        continue
                    rejected = CapabilityEval(func).truth(CapabilityEval(func).value(inner.test))
                    line = first + inner.lineno - 1
                    if rejected in (None, FREE):
                        return cap(None, "%s:%d: cannot evaluate the fp8 capability guard" % (V_MARLIN, line))
                    verdict = "rejects" if rejected else "accepts"
                    return cap(not rejected, "%s:%d fp8 Marlin input guard %s SM%d%d" % (V_MARLIN, line, verdict, GPU_CC[0], GPU_CC[1]))
            return cap(True, "%s:%d fp8 Marlin input has no capability guard" % (V_MARLIN, first + node.lineno - 1))
    return cap(None, "%s:%d: no fp8 branch in get_marlin_input_dtype" % (V_MARLIN, first))


ESTIMATE_NAMES = {"first_capture", "shared_memory_estimate", "total_estimate", "decoder_estimate", "mem_samples"}


def vllm_cg_clamp(files):
    text = files.text(V_RUNNER) or ""
    src, first = find_block(text, r"^\s+def profile_cudagraph_memory\b")
    tree = parse(src) if src else None
    if tree is None:
        return cap(None, "no profile_cudagraph_memory in %s: no CUDA-graph memory estimate recognised" % V_RUNNER)
    func = tree.body[0]
    assign = None
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "first_capture" for t in node.targets):
            assign = node
            break
    if assign is None:
        return cap(None, "%s:%d: profile_cudagraph_memory has no first_capture: layout not recognised" % (V_RUNNER, first))
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "max" and len(node.args) >= 2:
            zero = any(const(a) == 0 for a in node.args)
            if zero and any(ESTIMATE_NAMES & names_in(a) for a in node.args):
                return cap(True, "%s:%d estimate clamped at 0" % (V_RUNNER, first + node.lineno - 1))
        if isinstance(node, ast.If) and "first_capture" in names_in(node.test) and any(isinstance(op, (ast.Lt, ast.LtE)) for op in getattr(node.test, "ops", [])):
            return cap(True, "%s:%d negative first capture handled" % (V_RUNNER, first + node.lineno - 1))
    return cap(False, "%s:%d first_capture = free-memory difference, not clamped (can be negative)" % (V_RUNNER, first + assign.lineno - 1))


def vllm_mamba(files):
    rel = next((r for r in V_CONFIG if files.stat_of(r)), None)
    text = files.text(rel) if rel else None
    if text is None:
        return cap(None, "no vllm/config/vllm.py: layout not recognised")
    m = re.search(r"assert\s+block_size\s*<=\s*self\.scheduler_config\.max_num_batched_tokens", text)
    if m:
        return cap(True, "%s:%d asserts block_size <= max_num_batched_tokens in Mamba align mode" % (rel, line_of(text, m.start())))
    align = re.search(r"mamba_cache_mode\s*==\s*[\"']align[\"']", text)
    if align:
        return cap(False, "%s:%d align mode without the block_size <= max_num_batched_tokens assert" % (rel, line_of(text, align.start())))
    return cap(False, "%s has no Mamba align mode" % rel)


def vllm_cubins(files):
    names = [n for n in files.listing("vllm") if n.startswith("_C") and n.endswith(".so")]
    if not names:
        return cap(None, "no vllm/_C*.so: cannot tell which GPU archs vLLM was built for")
    archs = set()
    for n in names:
        rel = "vllm/" + n
        files.seen[rel] = files.stat_of(rel)
        archs |= scan_archs(os.path.join(files.site, rel))
    if not archs:
        return cap(None, "%s: no embedded -arch sm_ strings found" % ", ".join("vllm/" + n for n in names))
    ordered = sorted(archs, key=lambda a: (int(re.sub(r"\D", "", a)), a))
    return cap(ordered, "%s: fatbin ptxas -arch lines" % ", ".join("vllm/" + n for n in names))


def scan_archs(path, chunk=1 << 24):
    """Every `-arch sm_XXX[af]` in a (large) binary, read in chunks; the last bytes of a chunk are
    scanned with the next one so that no string is cut in two."""
    found = set()
    pat = re.compile(rb"-arch[ =]?(sm_\d{2,3}[af]?)\b")
    keep = 32  # longer than any match
    try:
        with open(path, "rb") as fh:
            tail = b""
            while True:
                block = fh.read(chunk)
                data = tail + block
                stop = len(data) if not block else max(0, len(data) - keep)
                end = stop + 4  # a "-arch" that starts before stop belongs to this round
                pos = data.find(b"-arch", 0, end)
                while pos != -1:
                    m = pat.match(data, pos)
                    if m:
                        found.add(m.group(1).decode())
                    pos = data.find(b"-arch", pos + 5, end)
                if not block:
                    break
                tail = data[stop:]
    except OSError:
        pass
    return found


def vllm_env_table(files):
    """{NAME: [status, line, note]} from envs.py's environment_variables, or None if not recognised."""
    text = files.text(V_ENVS)
    if text is None:
        return None
    src, first = find_block(text, r"^environment_variables\b")
    tree = parse(src) if src else None
    if tree is None:
        return None
    stmt = tree.body[0]
    value = getattr(stmt, "value", None)
    if not isinstance(value, ast.Dict):
        return None
    table = {}
    for k, v in zip(value.keys, value.values):
        name = const(k) if k is not None else None
        if not isinstance(name, str):
            continue
        line = first + k.lineno - 1
        fn = v.func.attr if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) else getattr(getattr(v, "func", None), "id", "")
        if fn == "deprecated_env":
            bits = [const(a) for a in v.args[1:3]]
            note = ", ".join(str(b) for b in bits if isinstance(b, str))
            table[name] = ["deprecated", line, note]
        else:
            table[name] = ["known", line, ""]
    return table


def vllm_env_caps(table, names):
    out = {}
    for name in names:
        key = "vllm.env." + name
        if table is None:
            out[key] = cap(None, "%s: no environment_variables dict recognised" % V_ENVS)
            continue
        row = table.get(name)
        if row is None:
            out[key] = cap("unknown", "%s: not in environment_variables" % V_ENVS)
        elif row[0] == "deprecated":
            out[key] = cap("deprecated", "%s:%d deprecated_env(%s)" % (V_ENVS, row[1], row[2]))
        else:
            out[key] = cap("known", "%s:%d" % (V_ENVS, row[1]))
    return out


# ---- cache + main ------------------------------------------------------------------------------

PACKAGES = (("flashinfer-python", "flashinfer", flashinfer_caps), ("vllm", "vllm", None))
IDS = {
    "flashinfer": ["flashinfer." + k for k in ("b12x_gemm", "b12x_gemm_sm121", "b12x_auto_sm121", "b12x_hardcoded_sm120")],
    "vllm": ["vllm." + k for k in ("b12x_linear", "b12x_linear_auto", "b12x_moe", "b12x_moe_auto", "marlin_fp8_sm121", "cg_estimate_clamped", "mamba_align_assert", "cubin_archs")],
}


def probe_hash():
    import hashlib

    try:
        with open(os.path.abspath(__file__), "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()[:16]
    except OSError:
        return "?"


def load_cache(path):
    if not path:
        return {}
    try:
        with open(path, "r", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def still_valid(entry, files):
    seen = entry.get("seen")
    if not isinstance(seen, dict):
        return False
    for rel, recorded in seen.items():
        if rel.endswith("/"):
            path = os.path.join(files.site, rel[:-1])
            try:
                now = sorted(os.listdir(path))
            except OSError:
                now = None
        else:
            now = files.stat_of(rel)
        if now != recorded:
            return False
    return True


def compute(dist, top, rules, old, cache, probe):
    found = find_package(dist, top)
    if found is None:
        return None, None
    version, pkg = found
    if pkg is None:
        return {"version": version, "root": None}, {"unlocated": True}
    key = "%s|%s|%s|%s" % (probe, dist, version, pkg)
    files = Files(os.path.dirname(pkg))
    entry = old.get(key)
    if isinstance(entry, dict) and isinstance(entry.get("facts"), dict) and still_valid(entry, files):
        cache[key] = entry
        return {"version": version, "root": pkg}, entry["facts"]
    load_ast()
    if top == "vllm":
        facts = {"caps": vllm_caps(files), "env_table": vllm_env_table(files)}
    else:
        facts = {"caps": rules(files)}
    cache[key] = {"seen": files.seen, "facts": facts}
    cache["_dirty"] = True
    return {"version": version, "root": pkg}, facts


def save_cache(path, cache):
    if not path or not cache.pop("_dirty", False):
        return  # nothing new: leave the file alone
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(cache, fh)
        os.replace(tmp, path)
    except OSError:
        pass


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not (argv == [] or (len(argv) == 2 and argv[0] == "--cache")):
        sys.stderr.write("usage: capabilities.py [--cache FILE]\n")
        return 2
    cache_path = argv[1] if argv else None
    t0 = time.time()
    old = load_cache(cache_path)
    cache = {}  # only what this run used: entries of uninstalled versions go away
    probe = probe_hash()
    caps, packages = {}, {}
    for dist, top, rules in PACKAGES:
        info, facts = compute(dist, top, rules, old, cache, probe)
        if info is None:
            continue
        packages[dist] = info
        if facts.get("unlocated"):
            why = "%s %s is installed but its package folder was not found" % (dist, info["version"])
            caps.update((cid, cap(None, why)) for cid in IDS[top])
            continue
        caps.update(facts["caps"])
        if top == "vllm":
            names = sorted(set(WATCHED_ENV) | set(n for n in os.environ if n.startswith("VLLM_")))
            caps.update(vllm_env_caps(facts.get("env_table"), names))
    if set(old) != set(k for k in cache if k != "_dirty"):
        cache["_dirty"] = True
    save_cache(cache_path, cache)
    sys.stdout.write(json.dumps({"capabilities": caps, "packages": packages, "ms": round((time.time() - t0) * 1000, 1)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
