"""Which CuTe DSL compiler build `import cutlass` really loads: pip lists every libs-* build installed,
but only the compiler library on the import path (the folder the .pth files in force put first on
sys.path, and there, from 4.6, the flavour the loader picks by driver; probe_cutlass) compiles
anything, and its bytes say which wheel wrote it (the RECORD whose sha256 matches).
"""

import base64
import os

from probe_cutlass import loaded_compiler, mlir_libs, path_folders, pick_flavour
from probe_io import record_size
from targetenv_base import CUTLASS_IR_RE
from targetenv_dists import read_record


def cutedsl_build(dists, records, cache):
    libs = sorted((d for d in dists.values() if d.canonical.startswith("nvidia-cutlass-dsl-libs-")), key=lambda d: d.canonical)
    umbrella = dists.get("nvidia-cutlass-dsl")
    if umbrella is None and not libs:
        return {
            "active_build": None,
            "installed_builds": [],
            "bundled_cuda": None,
            "sha256": None,
            "evidence": "nvidia-cutlass-dsl is not installed",
            "files": [],
        }
    builds = [d.canonical[len("nvidia-cutlass-dsl-"):] for d in libs]
    # abs path -> {record path, recorded digests by build}
    recorded = {}
    for dist in libs:
        rows = records.get(dist.canonical)
        if rows is None:
            rows = read_record(dist)
        for row in rows or []:
            if len(row) < 3 or not CUTLASS_IR_RE.match(os.path.basename(row[0])):
                continue
            full = os.path.normpath(os.path.join(dist.location, row[0]))
            info = recorded.setdefault(full, {"rel": row[0], "by": []})
            algo, _, digest = row[1].partition("=")
            info["by"].append((dist, row[2], digest if algo == "sha256" else None))
    here = os.path.dirname(os.path.abspath(__file__))
    loaded = loaded_compiler(path_folders((here, os.path.join(os.path.dirname(here), "shared"))))
    # A flavoured compiler file nobody records still loads (the loader lists the folder).
    for folder in sorted({os.path.dirname(p) for p in recorded} | ({mlir_libs(loaded["folder"])} if loaded else set())):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            full = os.path.join(folder, name)
            if CUTLASS_IR_RE.match(name) and full not in recorded:
                recorded[full] = {"rel": full, "by": []}
    stats = []
    for full in sorted(recorded):
        try:
            stats.append((full, os.stat(full)))
        except OSError:
            pass  # reported per file below
    cache.prefetch(stats)
    files = []
    for full in sorted(recorded):
        info = recorded[full]
        entry = {"path": full, "size": None, "matches": [], "cuda_release": None, "flavor": None}
        flavor = CUTLASS_IR_RE.match(os.path.basename(full)).group(2)
        entry["flavor"] = int(flavor) if flavor else None
        try:
            st = os.stat(full)
        except OSError as exc:
            entry["error"] = exc.strerror or str(exc)
            files.append(entry)
            continue
        entry["size"] = st.st_size
        try:
            digest, release = cache.digest(full, st, force=True)  # the build check never waits
        except OSError as exc:
            entry["error"] = exc.strerror or str(exc)
            files.append(entry)
            continue
        entry["cuda_release"] = release
        entry["sha256"] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
        for dist, size, want in info["by"]:
            if want and want == digest and (record_size(size) is None or record_size(size) == st.st_size):
                entry["matches"].append("%s %s" % (dist.canonical, dist.version))
        files.append(entry)
    active, evidence, chosen = _by_import_path(files, loaded) if loaded else _choose_build(files)
    return {
        "active_build": active,
        "installed_builds": builds,
        "bundled_cuda": chosen.get("cuda_release") if chosen else None,
        "sha256": chosen.get("sha256") if chosen else None,
        "evidence": evidence,
        "files": files,
    }


def _build_of(match):
    """'nvidia-cutlass-dsl-libs-cu13 4.5.0' -> 'libs-cu13'."""
    return match.split(" ")[0][len("nvidia-cutlass-dsl-"):]


def _same(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def _owner(f):
    return f["matches"][0] if f["matches"] else "matches no RECORD"


def _by_import_path(files, loaded):
    """The build of the compiler library `import cutlass` loads (probe_cutlass.loaded_compiler); the
    compiler files off the import path are named as never loaded."""
    libs = mlir_libs(loaded["folder"])
    present = [f for f in files if f.get("size") is not None]
    here = [f for f in present if _same(os.path.dirname(f["path"]), libs)]
    parts = []
    flavoured = sorted((f for f in here if f["flavor"] is not None), key=lambda f: f["flavor"])
    if flavoured:
        parts.append("flavoured layout (a build per CUDA major, chosen at import by the driver): %s"
                     % "; ".join("cu%d %s" % (f["flavor"], "intact (%s)" % f["matches"][0] if f["matches"] else "matches no RECORD") for f in flavoured))
    parts.append(loaded["why"])
    away = [f for f in present if f not in here]
    if away:
        parts.append("never loaded, off the import path: %s" % "; ".join("%s (%s)" % (f["path"], _owner(f)) for f in away))
    chosen = next((f for f in here if loaded["path"] and _same(f["path"], loaded["path"])), None)
    if chosen is None:
        return "unknown", "; ".join(parts), None
    name = os.path.basename(chosen["path"])
    if not chosen["matches"]:
        parts.append("%s (%d bytes) matches the RECORD of no installed build" % (name, chosen["size"]))
        return "unknown", "; ".join(parts), chosen
    parts.append("%s matches the RECORD of %s" % (name, ", ".join(chosen["matches"])))
    builds = sorted({_build_of(m) for m in chosen["matches"]})
    return (builds[0] if len(builds) == 1 else "unknown"), "; ".join(parts), chosen


def _choose_build(files):
    """No folder on sys.path holds `cutlass` (import fails): judged from the compiler files on disk."""
    present = [f for f in files if f.get("size") is not None]
    if not present:
        if files:
            return "unknown", "no CuTe DSL compiler file is on disk (%s missing)" % os.path.basename(files[0]["path"]), None
        return "unknown", "no installed nvidia-cutlass-dsl-libs-* RECORD lists a _cutlass_ir*.so", None
    flavored = [f for f in present if f["flavor"] is not None]
    if not flavored:
        # 4.4/4.5 layout: every build writes the same file; the last install wins, whatever pip lists.
        chosen = present[0]
        name = os.path.basename(chosen["path"])
        if not chosen["matches"]:
            return "unknown", "%s (%d bytes) matches the RECORD of no installed build" % (name, chosen["size"]), chosen
        builds = sorted({_build_of(m) for m in chosen["matches"]})
        active = builds[0] if len(builds) == 1 else "unknown"
        return active, "%s matches the RECORD of %s" % (name, ", ".join(chosen["matches"])), chosen
    # >= 4.6 layout: one _cutlass_ir.cu<N>.*.so per toolkit flavour, chosen at import by the driver.
    by_flavor = {}
    for f in flavored:
        by_flavor[f["flavor"]] = f
    described = []
    for flavor in sorted(by_flavor):
        f = by_flavor[flavor]
        described.append("cu%d %s" % (flavor, "intact (%s)" % f["matches"][0] if f["matches"] else "matches no RECORD"))
    flavor, why = pick_flavour(by_flavor)
    if flavor is None:
        return "unknown", "%s; %s" % ("; ".join(described), why), None
    chosen = by_flavor[flavor]
    evidence = "flavoured layout (a build per CUDA major, chosen at import by the driver): %s; %s" % ("; ".join(described), why)
    if not chosen["matches"]:
        return "unknown", evidence, chosen
    builds = sorted({_build_of(m) for m in chosen["matches"]})
    return (builds[0] if len(builds) == 1 else "unknown"), evidence, chosen
