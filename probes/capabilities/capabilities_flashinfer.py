"""FlashInfer's b12x (SM120-family warp-MMA) NVFP4 GEMM: is it there, does it admit SM121, does
`auto` pick it, and does its launch hard-code sm_120.
"""

import re

from capabilities_files import cap
from capabilities_source import (
    GPU_CC,
    CapabilityEval,
    const,
    find_block,
    has_string,
    line_of,
    parse,
    returns_reachable,
)

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
