"""CuTe DSL's own arch guard, read from the installed files: does the SM120 block-scaled MMA op
(MmaSM120BlockScaledOp, the warp-level FP4 MMA every SM12x CuTe DSL FP4 kernel uses) admit sm_121a?

Up to 4.5.x the Python package sits in nvidia_cutlass_dsl/python_packages (written by libs-base or
libs-cu13, whichever pip touched last); from 4.6 in nvidia_cutlass_dsl/dsl_packages (libs-core). The
file on disk is what the compiler runs, so a hand edit counts as what it says.
"""

import os
import re
import sys

from capabilities_files import cap, read_text

WARP_MMA = ("nvidia_cutlass_dsl/dsl_packages/cutlass/cute/nvgpu/warp/mma.py",
            "nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu/warp/mma.py")
CAP = "cutedsl.sm120_blockscaled_sm121a"
_CLASS = re.compile(r"^class MmaSM120BlockScaledOp\b", re.M)
_ADMISSIBLE = re.compile(r"admissible_archs\s*=\s*\[([^\]]*)\]")
_NEXT_CLASS = re.compile(r"^class \w", re.M)


def locate(paths=None):
    """(site dir, relative path) of the first warp/mma.py found on sys.path, or None."""
    for entry in paths if paths is not None else sys.path:
        for rel in WARP_MMA:
            if os.path.isfile(os.path.join(entry or ".", rel)):
                return entry or ".", rel
    return None


def admitted_archs(text):
    """(archs, line) of MmaSM120BlockScaledOp.admissible_archs, or None when the layout is not recognised."""
    cls = _CLASS.search(text)
    if not cls:
        return None
    end = _NEXT_CLASS.search(text, cls.end())
    body = text[cls.start():end.start() if end else len(text)]
    m = _ADMISSIBLE.search(body)
    if not m:
        return None
    archs = re.findall(r"sm_\d+[af]?", m.group(1))
    return archs, text.count("\n", 0, cls.start() + m.start()) + 1


def cutedsl_caps(paths=None):
    found = locate(paths)
    if found is None:
        return {}
    site, rel = found
    text = read_text(os.path.join(site, rel))
    got = admitted_archs(text or "")
    if got is None:
        return {CAP: cap(None, "%s: no MmaSM120BlockScaledOp.admissible_archs recognised" % rel)}
    archs, line = got
    return {CAP: cap("sm_121a" in archs, "%s:%d admissible_archs = [%s]" % (rel, line, ", ".join(archs)))}
