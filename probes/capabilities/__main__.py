"""Static capabilities of the installed FlashInfer and vLLM, read from their files WITHOUT importing them.

Run by the TARGET's python (standard library only, Python 3.8+):

  python -B probes/capabilities/__main__.py [--cache FILE]

Prints one JSON object (the last line of stdout): {"capabilities": {id: {"value": v, "evidence": "pkg/file.py:LINE ..."}},
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
  vllm.env.NAME                   "known" | "deprecated" | "removed" (refused while set) | "unknown" to the installed vLLM's envs.py
  env_default.NAME                the value the installed vLLM uses when NAME is unset (False: none)
  cutedsl.sm120_blockscaled_sm121a  the installed CuTe DSL's SM120 block-scaled MMA op admits sm_121a

Derived facts are cached per file set (path, size, mtime) in --cache, so a warm run only stats files
and never imports ast or the rule modules (capabilities_flashinfer, capabilities_vllm). Module names
carry a `capabilities_` prefix: this folder is sys.path[0] here and must not shadow the target's.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(os.path.dirname(HERE), "shared")
sys.path.insert(1, SHARED)
# Run with -B: nothing is written next to the probe or into the target, unless sparkdoctor names a
# folder of its own cache for the compiled modules (as for probes/target_env).
import probe_pycache  # noqa: E402  (before the cache is named: always read from its source)

probe_pycache.use(os.environ.get("SPARKDOCTOR_PROBE_PYCACHE"))

import probe_site  # noqa: E402

probe_site.rebuild()  # started with -S: sys.path as site would have made it, from files only (no .pth code runs)

from capabilities_files import Files, cap, find_package  # noqa: E402
from capabilities_vllm_env import WATCHED_ENV, vllm_env_caps, vllm_env_defaults  # noqa: E402
from probe_io import answer, replace_file, source_hash  # noqa: E402

# (distribution, top-level package, the module holding its rules, imported only on a cache miss)
PACKAGES = (("flashinfer-python", "flashinfer", "capabilities_flashinfer"), ("vllm", "vllm", "capabilities_vllm"))


IDS = {
    "flashinfer": ["flashinfer." + k for k in ("b12x_gemm", "b12x_gemm_sm121", "b12x_auto_sm121", "b12x_hardcoded_sm120")],
    "vllm": ["vllm." + k for k in ("b12x_linear", "b12x_linear_auto", "b12x_moe", "b12x_moe_auto", "marlin_fp8_sm121", "cg_estimate_clamped", "mamba_align_assert", "cubin_archs")],
}


def probe_hash():
    try:
        return source_hash(HERE, SHARED)[:16]
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


def _shaped(facts):
    """Derived facts as compute() writes them; anything else (another version's, a hand edit) is a miss, not an answer."""
    caps = facts.get("caps") if isinstance(facts, dict) else None
    return isinstance(caps, dict) and all(isinstance(k, str) and isinstance(v, dict) for k, v in caps.items())


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
    if isinstance(entry, dict) and _shaped(entry.get("facts")) and still_valid(entry, files):
        cache[key] = entry
        return {"version": version, "root": pkg}, entry["facts"]
    module = __import__(rules)
    if top == "vllm":
        facts = {"caps": module.vllm_caps(files), "env_table": module.vllm_env_table(files)}
    else:
        facts = {"caps": module.flashinfer_caps(files)}
    cache[key] = {"seen": files.seen, "facts": facts}
    cache["_dirty"] = True
    return {"version": version, "root": pkg}, facts


def save_cache(path, cache):
    if not path or not cache.pop("_dirty", False):
        return  # nothing new: leave the file alone
    replace_file(path, json.dumps(cache).encode("utf-8"))  # one that cannot be written is a miss next time


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not (argv == [] or (len(argv) == 2 and argv[0] == "--cache")):
        sys.stderr.write("usage: capabilities [--cache FILE]\n")
        return 2
    answer(collect(argv[1] if argv else None))
    return 0


def collect(cache_path):
    """The probe's answer (a dict); probes/target_env calls this in its own process for a local check."""
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
            caps.update(vllm_env_defaults(facts.get("env_table")))
    from capabilities_cutedsl import (
        cutedsl_caps,  # one small file read with a regex: not cached
    )
    caps.update(cutedsl_caps())
    if set(old) != set(k for k in cache if k != "_dirty"):
        cache["_dirty"] = True
    save_cache(cache_path, cache)
    return {"capabilities": caps, "packages": packages, "ms": round((time.time() - t0) * 1000, 1)}


if __name__ == "__main__":
    sys.exit(main())
