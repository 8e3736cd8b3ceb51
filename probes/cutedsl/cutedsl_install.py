"""What CuTe DSL is installed, read from disk without importing it: the nvidia-cutlass-dsl*
distributions on sys.path, the files their RECORDs list, and which libs build wrote the compiler
library in use.
"""

import os
import re
import sys

from probe_cutlass import CUTLASS_IR_RE, loaded_compiler, path_folders
from probe_io import MAX_HEADER, read_head, read_record, record_size

DIST_PREFIX = "nvidia-cutlass-dsl"


LIBS_PREFIX = DIST_PREFIX + "-libs-"


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
        head = read_head(os.path.join(info, "METADATA"), MAX_HEADER)[0].decode("utf-8", "replace")
    except OSError:  # also a FIFO or a device where METADATA should be: never read
        head = ""
    for line in head.splitlines():
        if not line.strip():
            break  # the header ends at the first blank line; the long description follows
        key, _, value = line.partition(":")
        if key == "Name":
            name = value.strip()
        elif key == "Version":
            version = value.strip()
    return re.sub(r"[-_.]+", "-", name).lower(), version or None


def dist_versions(dists):
    versions = {}
    for d in dists:
        versions.setdefault(d["name"], d["version"])  # the first on sys.path is the one imported
    return versions


def record_rows(dist):
    """RECORD rows; none when RECORD cannot be read or parsed (the compile still runs and tells)."""
    try:
        return read_record(os.path.join(dist["info"], "RECORD"))[0]
    except (OSError, ValueError):
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
                owners.append((build, record_size(row[2]) if len(row) > 2 else None))
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
    size on disk. The library the compile loaded when known, else the one `import cutlass` would load
    (the sys.path the .pth files made, probe_cutlass); None if untold."""
    sizes = {p: size for p, size, _ in stats}
    if compiler_lib is None:
        here = os.path.dirname(os.path.abspath(__file__))
        loaded = loaded_compiler(path_folders((here, os.path.join(os.path.dirname(here), "shared"))))
        if loaded is not None:
            compiler_lib = loaded["path"]
        else:  # no folder on sys.path holds `cutlass`: the only compiler file on disk, if only one
            on_disk = [p for p in files if CUTLASS_IR_RE.match(os.path.basename(p)) and sizes.get(p) is not None]
            compiler_lib = on_disk[0] if len(on_disk) == 1 else None
        if compiler_lib is None:
            return None
    compiler_lib = os.path.normpath(compiler_lib)
    if compiler_lib not in files:
        return None
    owners = files[compiler_lib]
    size = sizes.get(compiler_lib)
    builds = sorted({b for b, want in owners if want is None or want == size})
    if len(builds) == 1:
        return builds[0]
    return "unknown" if owners else None
