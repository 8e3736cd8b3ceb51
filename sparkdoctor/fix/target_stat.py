"""Run by the TARGET's interpreter (standard library only, Python 3.8+).

    python -B target_stat.py stat [--skip NAME ...]    every RECORD-listed file of every dist but the
                                                      skipped: {path: [size, mtime_ns]} (null: missing)
    python -B target_stat.py compile PYC ...           rewrite each __pycache__ file from its source

sparkdoctor starts it with -S -X sparkdoctor_site as well (sparkdoctor/targets/early.py, _rebuild_path below).
Prints one JSON object on the last line of stdout. Sizes and mtimes only (a stat per file): cheap
enough to run over a venv of 40,000 files before and after every apply.
"""

import os
import sys


def _rebuild_path():
    """Started with -S (sparkdoctor/targets/early.py: no .pth import line or sitecustomize of the target runs): the
    import path site would have made, from files only, by probes/shared/probe_site.py (beside this package in a
    checkout, in sparkdoctor/_data/ in a wheel, beside this script in a container's payload). Nothing to do when site ran."""
    if not sys.flags.no_site or "sparkdoctor_site" not in getattr(sys, "_xoptions", {}):
        return
    pkg = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    here = os.path.dirname(os.path.realpath(__file__))  # a container's payload carries probe_site.py beside this script
    for shared in (os.path.join(pkg, "_data", "probes", "shared"), os.path.join(os.path.dirname(pkg), "probes", "shared"), here):
        if os.path.isfile(os.path.join(shared, "probe_site.py")):
            sys.path.insert(1, shared)
            import probe_site

            probe_site.rebuild()
            return
    raise SystemExit("%s: started without site, and no probes/shared/probe_site.py near %s" % (os.path.basename(__file__), pkg))


_rebuild_path()  # before sysconfig or importlib.metadata is imported: both read sys.prefix / sys.path

import json  # noqa: E402
import py_compile  # noqa: E402
import re  # noqa: E402

if sys.version_info >= (3, 8):
    from importlib import metadata
else:  # pragma: no cover (3.7)
    metadata = None


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def stat_all(skip):
    out = {}
    seen = set()
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name or canonical(name) in seen:
            continue
        seen.add(canonical(name))
        if canonical(name) in skip:
            continue
        for f in dist.files or []:
            path = os.path.normpath(str(dist.locate_file(f)))
            try:
                st = os.stat(path)
                out[path] = [st.st_size, st.st_mtime_ns]
            except OSError:
                out[path] = None
    return out


def source_of(pyc):
    """pkg/__pycache__/mod.cpython-312.pyc -> pkg/mod.py"""
    folder, name = os.path.split(pyc)
    if os.path.basename(folder) != "__pycache__" or not name.endswith(".pyc"):
        return None
    return os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")


def compile_all(pycs):
    done, failed = [], {}
    for pyc in pycs:
        src = source_of(pyc)
        optimize = 1 if ".opt-1." in pyc else 2 if ".opt-2." in pyc else -1
        try:
            if src is None or not os.path.isfile(src):
                raise OSError("no source file beside it")
            py_compile.compile(src, cfile=pyc, doraise=True, optimize=optimize)
            done.append(pyc)
        except Exception as exc:  # noqa: BLE001 (reported, never fatal)
            failed[pyc] = f"{type(exc).__name__}: {exc}"
    return {"compiled": done, "failed": failed}


def main(argv):
    if argv and argv[0] == "stat":
        skip = {canonical(argv[i + 1]) for i in range(1, len(argv) - 1) if argv[i] == "--skip"}
        out = {"stat": stat_all(skip)}
    elif argv and argv[0] == "compile":
        out = compile_all(argv[1:])
    else:
        out = {"error": "usage: target_stat.py stat [--skip NAME ...] | compile PYC ..."}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
