"""Everything sparkdoctor needs to know about a target's Python environment, in one pass.

Runs under the TARGET's interpreter: standard library only, Python 3.8+. The folder is the probe:

    python -B probes/target_env --cache FILE [--records FILE] [--capabilities FILE|-] [--no-cache]
                                [--hash-budget SECONDS] [--track NAME ...]

It prints ONE JSON object, on the last line of stdout (a .pth file may print before it). What it
reports (see main()): the interpreter and host, every installed distribution, the RECORD integrity
of the serving-stack packages, FlashInfer's precompiled kernel wheels (`vllm download-kernels`), which CuTe DSL compiler build's bytes are really on disk, the
relevant environment variables (secrets redacted), ptxas binaries shipped inside site-packages, the
pip config files pip would read, and every partial failure as an error line. One odd file costs at
most its package's facts, never the run.

Speed matters (it runs on every `sparkdoctor check`), so it never imports what it inspects, hashes
only files a person can edit plus the compiler binaries whose identity matters, and caches hashes by
(path, size, mtime_ns). Its modules carry a `targetenv_` prefix: this folder is sys.path[0] here,
and a plain name (`dists`, `hashes`) could shadow a module of the target.
"""

import os
import sys
import threading
import time

sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "shared"))
# Run with -B, so nothing is written next to the probe or into the target. sparkdoctor may name a
# folder of its own cache for the compiled modules (keyed by source path, mtime and size, per Python
# version): compiling this folder's modules again on every run cost ~20% of a warm probe. A damaged
# one there is compiled again from its source (probes/shared/probe_pycache.py).
import probe_pycache  # noqa: E402  (before the cache is named: always read from its source)

probe_pycache.use(os.environ.get("SPARKDOCTOR_PROBE_PYCACHE"))

import probe_site  # noqa: E402

probe_site.rebuild()  # started with -S: sys.path as site would have made it, from files only (no .pth code runs)

from probe_io import answer  # noqa: E402
from targetenv_base import ERRORS, canonical, error, is_tracked  # noqa: E402
from targetenv_cutedsl import cutedsl_build  # noqa: E402
from targetenv_dists import (  # noqa: E402
    REQUIRES_OF,
    direct_url,
    find_distributions,
    modules_without_metadata,
    read_requires,
    torch_build,
)
from targetenv_hashes import HashCache  # noqa: E402
from targetenv_integrity import check_integrity, prepare, resolve_shared_files  # noqa: E402
from targetenv_kernels import flashinfer_kernels  # noqa: E402
from targetenv_records import RecordCache, Records  # noqa: E402
from targetenv_system import (  # noqa: E402
    describe_host,
    describe_target,
    pip_config_files,
    ptxas_candidates,
    relevant_env,
)


def parse_args(argv):
    cache_path, use_cache, extra, budget, records_path, capabilities = None, True, set(), None, None, None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--cache" and i + 1 < len(argv):
            cache_path = argv[i + 1]
            i += 1
        elif arg.startswith("--cache="):
            cache_path = arg.split("=", 1)[1]
        elif arg == "--hash-budget" and i + 1 < len(argv):
            budget = float(argv[i + 1])
            i += 1
        elif arg == "--records" and i + 1 < len(argv):
            records_path = argv[i + 1]
            i += 1
        elif arg == "--capabilities" and i + 1 < len(argv):
            capabilities = argv[i + 1]
            i += 1
        elif arg == "--no-cache":
            use_cache = False
        elif arg == "--track" and i + 1 < len(argv):
            extra.add(canonical(argv[i + 1]))
            i += 1
        elif arg.startswith("--track="):
            extra.add(canonical(arg.split("=", 1)[1]))
        else:
            raise SystemExit("target_env: unknown argument %r" % arg)
        i += 1
    return cache_path, use_cache, extra, budget, records_path, capabilities


def guarded(what, fn, *args):
    """fn(*args), or None after an error line: one part that fails never costs the others."""
    try:
        return fn(*args)
    except Exception as exc:
        error("%s failed: %s: %s" % (what, type(exc).__name__, exc))
        return None


def editable_checkout(origin):
    """The folder of an editable install's checkout (PEP 610 file:// URL), or None."""
    url = origin.get("url") or ""
    if not origin.get("editable") or not url.startswith("file://"):
        return None
    from urllib.parse import unquote

    return unquote(url[len("file://"):])


def describe_package(dist, records, cache):
    """One distribution's facts; tracked ones (a record entry, even None) add their integrity."""
    pkg = {"name": dist.name, "version": dist.version, "location": dist.location}
    if dist.metadata_error:
        pkg["metadata_error"] = dist.metadata_error
    if dist.canonical in records:
        pkg.update(check_integrity(dist, records.prepared(dist.canonical), cache))
        origin = direct_url(dist)
        if origin is not None:
            pkg["direct_url"] = origin
            checkout = editable_checkout(origin)
            if checkout and not os.path.isdir(checkout):
                error("%s %s: its editable checkout %s is gone (moved or deleted): importing it fails; reinstall it "
                      "(pip install -e PATH, from where the checkout is now)" % (dist.name, dist.version, checkout))
    elif dist.is_dist_info and not os.path.lexists(dist.record_path()):  # pip cannot uninstall it (one stat, no read)
        pkg["no_record"] = dist.info_dir
    if dist.canonical == "torch":
        pkg.update(torch_build(dist))
    if dist.canonical in REQUIRES_OF:
        requires = read_requires(dist)
        if requires is not None:
            pkg["requires"] = requires
    return pkg


def capabilities_answer(cache_path):
    """The capabilities probe (probes/capabilities/), run in this process for a local `check`: the
    target's interpreter starts once, not twice (a venv whose .pth files import much pays that start
    per process). Its answer, or {"error": why}: sparkdoctor then runs that probe on its own."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "capabilities")
    try:
        import importlib.util

        if folder not in sys.path:
            sys.path.insert(1, folder)
        path = os.path.join(folder, "__main__.py")
        spec = importlib.util.spec_from_file_location("capabilities_probe_main", path,
                                                      loader=probe_pycache.source_loader("capabilities_probe_main", path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.collect(cache_path)
    except Exception as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc)}


def main(argv):
    started = time.perf_counter()
    cache_path, use_cache, extra, budget, records_path, capabilities = parse_args(argv)
    cache = HashCache(cache_path, use_cache, budget)
    record_cache = RecordCache(records_path, use_cache)
    found = {}
    if capabilities is not None:  # beside the hashing: it reads other files (vLLM's cubins, its envs.py)
        reader = threading.Thread(target=lambda: found.update(answer=capabilities_answer(None if capabilities == "-" else capabilities)))
        reader.start()
    out = {"target": describe_target(), "host": guarded("reading the host", describe_host)}
    unlisted = []
    dists = find_distributions(unlisted)
    tracked = [key for key in sorted(dists) if is_tracked(key, extra)]
    records = Records(dists, tracked, record_cache, prepare)
    # First, so that a hash budget never leaves the build unknown (its hashes are then reused).
    out["cutedsl"] = guarded("cutedsl build check", cutedsl_build, dists, records, cache)
    packages = {}
    for key in sorted(dists):
        dist = dists[key]
        pkg = guarded("%s: integrity check" % dist.name, describe_package, dist, records, cache)
        if pkg is None:  # one odd package must not hide the others
            pkg = {"name": dist.name, "version": dist.version, "location": dist.location}
            if key in records:
                pkg["integrity"] = "unchecked"
        packages[key] = pkg
    if cache.budget_spent:
        waiting = sorted(k for k, p in packages.items() if p.get("files_unverified"))
        error(
            "hashing stopped at its %gs budget; not yet verified: %s (the next run goes on from the hash cache)"
            % (budget, ", ".join(waiting))
        )
    guarded("shared-file check", resolve_shared_files, dists, packages)
    out["packages"] = packages
    out["modules_without_metadata"] = guarded("looking for packages without metadata", modules_without_metadata, dists, extra) or []
    out["unlisted"] = unlisted
    out["flashinfer_kernels"] = guarded("flashinfer kernel check", flashinfer_kernels, dists, packages)
    out["env"] = relevant_env()
    out["ptxas_candidates"] = guarded("looking for ptxas", ptxas_candidates, dists, records) or []
    out["pip_config_files"] = guarded("reading pip config files", pip_config_files) or []
    out["path_env"] = os.environ.get("PATH", "")
    if capabilities is not None:
        reader.join()
        out["capabilities_probe"] = found.get("answer") or {"error": "the capabilities reader ended without an answer"}
    saved = cache.save()
    guarded("saving the RECORD cache", record_cache.save)
    out["cache"] = {
        "path": cache_path,
        "loaded": cache.loaded,
        "hashed_files": cache.hashed,
        "hashed_bytes": cache.hashed_bytes,
        "saved": saved,
        "note": cache.note,
    }
    out["seconds"] = round(time.perf_counter() - started, 3)
    out["errors"] = ERRORS
    answer(out)
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
