"""Run by the TARGET's interpreter (standard library only, Python 3.8+).

    python -B target_stat.py stat [--skip NAME ...]    every RECORD-listed file of every dist but the
                                                      skipped: {path: [size, mtime_ns]} (null: missing)
    python -B target_stat.py compile PYC ...           rewrite each __pycache__ file from its source

sparkdoctor starts it with -S -B -X sparkdoctor_site=FOLDER, as target_dists.py (see there).
Prints one JSON object on the last line of stdout. Sizes and mtimes only (a stat per file): cheap
enough to run over a venv of 40,000 files before and after every apply.
"""

import json
import os
import py_compile
import re
import sys

if "sparkdoctor_site" in getattr(sys, "_xoptions", {}):  # -S -X sparkdoctor_site=FOLDER: probe_site.py's folder
    # under "/": a relative value (a bare option is True) never names a folder of the current one
    sys.path.insert(1, os.path.join("/", str(sys._xoptions["sparkdoctor_site"])))
    import probe_site

    probe_site.rebuild()  # before sysconfig or importlib.metadata is imported: both read sys.prefix / sys.path

from importlib import metadata  # noqa: E402


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def stat_all(skip):
    out = {}
    seen = set()
    for dist in metadata.distributions():
        if os.path.basename(str(getattr(dist, "_path", ""))).startswith("~"):
            continue  # pip's leftover of an interrupted uninstall or upgrade: target_dists leaves it out too
        try:
            name = dist.metadata["Name"]
            files = dist.files or [] if name else []
        except Exception:  # noqa: BLE001 (a METADATA or RECORD that is not UTF-8, or no CSV: target_dists leaves it out too)
            continue
        if not name or canonical(name) in seen:
            continue
        seen.add(canonical(name))
        if canonical(name) in skip:
            continue
        for f in files:
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
