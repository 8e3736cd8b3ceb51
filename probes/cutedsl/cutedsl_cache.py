"""The probe's answer cache: keyed by everything that decides a compile's outcome, read from disk
without importing cutlass, so a warm run compiles nothing. Only settled outcomes are kept.
"""

import json
import os
import sys

import probe_io
from cutedsl_install import stat_files
from probe_io import source_hash

KERNELS = ("nvfp4-mma", "nvfp4-mma-tile", "e2m1-cvt")


CACHEABLE = ("ok", "refused", "fail", "crash")


CACHE_FORMAT = 1
PROBES_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ours(folder):
    """A sys.path entry that is this probe's folder or probes/shared (not the target's)."""
    return folder == PROBES_ROOT or folder.startswith(PROBES_ROOT + os.sep)


def cache_key(arch, dists, stats):
    """Everything that decides the outcome, as JSON-plain values (a key read back compares equal)."""
    probe = source_hash(os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.abspath(probe_io.__file__)))
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
        # (not the probes' own folders: source_hash covers them, and a container run unpacks them afresh)
        "path": stat_files(e for e in (os.path.abspath(x or ".") for x in sys.path) if not _ours(e)),
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
    # readers see the old file or the new one, never half of one; one that cannot be written costs speed, not correctness
    probe_io.replace_file(path, json.dumps({"key": key, "results": settled, "build": build}).encode("utf-8"))
