"""vLLM's GB10-relevant switches read from its source: the b12x linear and MoE backends, Marlin FP8,
the CUDA-graph estimate clamp, the Mamba align assert, the archs its _C*.so was built for and the
environment variables its envs.py knows.
"""

import ast
import os
import re

from capabilities_files import cap
from capabilities_source import (
    FREE,
    GPU_CC,
    CapabilityEval,
    const,
    find_block,
    has_string,
    line_of,
    names_in,
    parse,
)
from capabilities_vllm_env import V_ENVS
from probe_io import open_regular

MAX_BINARY = 4 << 30
V_LINEAR = "vllm/model_executor/kernels/linear/__init__.py"


V_MOE = "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py"


V_MARLIN = "vllm/model_executor/layers/quantization/utils/marlin_utils.py"


V_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
# the model runner that replaced it (0.34.0 removed gpu_model_runner.py): the estimate is a module-level function
V_RUNNER_V2 = "vllm/v1/worker/gpu/cudagraph_utils.py"


V_CONFIG = ("vllm/config/vllm.py", "vllm/config.py")




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


ESTIMATE_NAMES = {"first_capture", "shared_memory_estimate", "total_estimate", "decoder_estimate", "mem_samples", "measured", "full_estimate"}


def _clamp_in(func, path, first):
    """The line where `func` clamps the estimate at 0 (max(estimate, 0) or a branch on a negative first capture)."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "max" and len(node.args) >= 2:
            zero = any(const(a) == 0 for a in node.args)
            if zero and any(ESTIMATE_NAMES & names_in(a) for a in node.args):
                return cap(True, "%s:%d estimate clamped at 0" % (path, first + node.lineno - 1))
        if isinstance(node, ast.If) and "first_capture" in names_in(node.test) and any(isinstance(op, (ast.Lt, ast.LtE)) for op in getattr(node.test, "ops", [])):
            return cap(True, "%s:%d negative first capture handled" % (path, first + node.lineno - 1))
    return None


def vllm_cg_clamp(files):
    text = files.text(V_RUNNER)
    if text is None:  # 0.34.0 on: only the new runner, whose estimate lives in cudagraph_utils
        src, first = find_block(files.text(V_RUNNER_V2) or "", r"^def profile_cudagraph_memory\b")
        tree = parse(src) if src else None
        if tree is None:
            return cap(None, "no profile_cudagraph_memory in %s or %s: no CUDA-graph memory estimate recognised" % (V_RUNNER, V_RUNNER_V2))
        found = _clamp_in(tree.body[0], V_RUNNER_V2, first)
        return found or cap(None, "%s:%d: profile_cudagraph_memory clamps nothing recognisable: layout not recognised" % (V_RUNNER_V2, first))
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
    return _clamp_in(func, V_RUNNER, first) or cap(
        False, "%s:%d first_capture = free-memory difference, not clamped (can be negative)" % (V_RUNNER, first + assign.lineno - 1))


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
        fh, st = open_regular(path)
        if st.st_size > MAX_BINARY:
            fh.close()
            return found  # no real extension module is this large (a sparse file): unknown
        with fh:
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
        default = env_default(v, name)
        if fn == "deprecated_env":
            bits = [const(a) for a in v.args[1:3]]
            note = ", ".join(str(b) for b in bits if isinstance(b, str))
            table[name] = ["deprecated", line, note, default]
        else:
            table[name] = ["known", line, "", default]
    table.update(_removed_envs(text))
    return table


def _removed_envs(text):
    """{NAME: ["removed", line, hint, False]} from envs.py's removed_environment_variables (0.34.0 on): vLLM
    refuses to start while one of them is set, where an unknown name only draws a warning."""
    src, first = find_block(text, r"^removed_environment_variables\b")
    tree = parse(src) if src else None
    value = getattr(tree.body[0], "value", None) if tree is not None else None
    if not isinstance(value, ast.Dict):
        return {}
    out = {}
    for k, v in zip(value.keys, value.values):
        name, hint = (const(k) if k is not None else None), const(v)
        if isinstance(name, str):
            out[name] = ["removed", first + k.lineno - 1, hint if isinstance(hint, str) else "", NO_DEFAULT]
    return out


NO_DEFAULT = False  # the variable has no default: unset means unset
_READERS = ("getenv", "get", "env_with_choices", "env_list_with_choices", "env_set_with_choices")


def env_default(value, name):
    """The value the release uses when `name` is unset, as a string ("1", "latency", ""), read from the
    first reader call on it inside its table entry (os.getenv(NAME, "1"), os.environ.get(NAME, ...),
    env_with_choices(NAME, "x", [...])); NO_DEFAULT when the call has none (or None); None (unknown)
    when the default is not a literal or no reader call is recognised."""
    for node in ast.walk(value):
        if not isinstance(node, ast.Call) or not node.args or const(node.args[0]) != name:
            continue
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if fn not in _READERS:
            continue
        if len(node.args) < 2:
            return NO_DEFAULT
        arg = node.args[1]
        if isinstance(arg, ast.Constant):
            if arg.value is None:
                return NO_DEFAULT
            if isinstance(arg.value, bool):
                return "1" if arg.value else "0"
            if isinstance(arg.value, (str, int, float)):
                return str(arg.value)
        return None
    return None
