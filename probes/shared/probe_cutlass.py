"""Which CuTe DSL compiler library `import cutlass` loads, decided as the interpreter decides it; standard library only.

The interpreter's sys.path is the one the target's .pth files made (made again from the files by probe_site under
sparkdoctor's -S, that .pth's import line included; site ran them when a probe runs without -S): a
4.4/4.5 libs wheel's nvidia_cutlass_dsl.pth names nvidia_cutlass_dsl/python_packages, 4.6+'s
nvidia_cutlass_dsl_packages.pth puts nvidia_cutlass_dsl/dsl_packages first. `import cutlass` takes the
first folder on that path holding the regular package `cutlass/`; its _mlir/_mlir_libs/ holds the
compiler library (_cutlass_ir.*.so, or one _cutlass_ir.cu<N>.*.so per CUDA major from 4.6, the newest
the driver supports chosen at import). A compiler file in a folder no .pth puts on the path (what a
downgrade leaves of the newer wheels) is never loaded, whatever pip lists.

Used by probes/target_env (the build `check` reports) and probes/cutedsl (the build a compile ran on,
when no compile said which library it loaded): one implementation.
"""

import os
import re
import sys

from probe_io import read_text

CUTLASS_IR_RE = re.compile(r"^_cutlass_ir(\.cu(\d+))?\..*\.so$")


MAX_PTH = 64 * 1024


def path_folders(skip=()):
    """sys.path as absolute folders, in order, without the probe's own folders (`skip`) and repeats."""
    out, seen = [], set(os.path.abspath(s) for s in skip)
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder not in seen:
            seen.add(folder)
            out.append(folder)
    return out


def cutlass_folder(folders):
    """The folder `import cutlass` imports from: the first on the path with cutlass/__init__.py; None if none."""
    for folder in folders:
        if os.path.isfile(os.path.join(folder, "cutlass", "__init__.py")):
            return folder
    return None


def mlir_libs(folder):
    return os.path.join(folder, "cutlass", "_mlir", "_mlir_libs")


def compiler_names(folder):
    """The _cutlass_ir*.so names in the imported package's _mlir_libs/ (what its loader can load)."""
    try:
        return sorted(n for n in os.listdir(mlir_libs(folder)) if CUTLASS_IR_RE.match(n))
    except OSError:
        return []


def put_there_by(folder, folders):
    """The .pth file (in a folder on the path) that names `folder`, or None (a plain sys.path entry)."""
    tail = os.path.basename(folder.rstrip(os.sep))
    for site in folders:
        try:
            names = sorted(n for n in os.listdir(site) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                text = read_text(os.path.join(site, name), MAX_PTH)
            except OSError:
                continue
            if tail and tail in text:
                return os.path.join(site, name)
    return None


def loaded_compiler(folders):
    """What `import cutlass` loads: {"folder", "pth", "path" (the compiler library, None when untold),
    "why"}; None when no folder on the path holds `cutlass`. Of several flavoured libraries the loader
    takes the newest the driver supports (asked only then; with no driver, the newest)."""
    folder = cutlass_folder(folders)
    if folder is None:
        return None
    pth = put_there_by(folder, folders)
    where = "%s (on sys.path%s)" % (os.path.join(folder, "cutlass"), ", from %s" % os.path.basename(pth) if pth else "")
    out = {"folder": folder, "pth": pth, "path": None, "why": "import cutlass loads %s" % where}
    names = compiler_names(folder)
    plain = [n for n in names if not CUTLASS_IR_RE.match(n).group(2)]
    flavoured = {}
    for n in names:
        major = CUTLASS_IR_RE.match(n).group(2)
        if major:
            flavoured[int(major)] = n
    if not names:
        out["why"] += ", whose _mlir_libs holds no compiler library"
        return out
    if plain and not flavoured:
        out["path"] = os.path.join(mlir_libs(folder), plain[0])
        return out
    pick, why = pick_flavour(flavoured)
    out["why"] += "; " + why
    if pick is None:
        return out
    out["path"] = os.path.join(mlir_libs(folder), flavoured[pick])
    out["flavor"] = pick
    return out


def pick_flavour(majors):
    """(the CUDA major the loader picks among the flavoured compilers `majors`, why): the only one, else the newest
    the driver supports (the driver asked only then), else with no driver the newest; (None, why) when the driver
    supports none of them (import fails)."""
    if len(majors) == 1:
        pick = next(iter(majors))
        return pick, "only cu%d is on disk" % pick
    driver = driver_cuda_version()
    if driver is None:
        pick = max(majors)
        return pick, "no CUDA driver here, so the loader picks the newest (cu%d); a driver older than CUDA %d would pick an older one" % (
            pick, pick)
    fit = [v for v in majors if driver // 1000 >= v]
    if not fit:
        return None, "the CUDA driver (%d) supports none of them, import fails" % driver
    pick = max(fit)
    return pick, "the driver reports CUDA %d.%d, so the loader picks cu%d" % (driver // 1000, (driver % 1000) // 10, pick)


_DRIVER = []


def driver_cuda_version():
    """cuDriverGetVersion, as the CuTe DSL loader asks it (no cuInit, no context), asked once per process;
    None without a driver."""
    if not _DRIVER:
        _DRIVER.append(_ask_driver())
    return _DRIVER[0]


def _ask_driver():
    try:
        import ctypes

        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return version.value
    except (OSError, AttributeError):
        return None
    return None
