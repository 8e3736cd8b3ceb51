"""Run by the TARGET's interpreter for whatif's dry run: `python -S -B -X sparkdoctor_site target_pip_dry.py
[--pip-from FOLDER] ARGS...` is `python -m pip ARGS...` without `site`.

whatif promises that no package's code runs. pip run as `python -m pip` starts with site, so every `.pth` import line
and the sitecustomize.py of the target ran on each dry run. Here the import path site would have made is made again
from files only (probes/shared/probe_site.py, as for the probes), and pip runs on it: the target's own pip, or with
--pip-from the `pip` package in FOLDER (sparkdoctor's own, for a venv without pip: what `pip --python` does, which
starts the target's interpreter with site). Standard library only, Python 3.8+.
"""

import os
import sys


def _rebuild_path():
    """As sparkdoctor/fix/target_dists.py: the path rebuilt by probe_site.py (beside this package in a checkout, in
    sparkdoctor/_data/ in a wheel, beside this script in a container's payload); nothing to do when site ran."""
    if not sys.flags.no_site or "sparkdoctor_site" not in getattr(sys, "_xoptions", {}):
        return
    pkg = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    here = os.path.dirname(os.path.realpath(__file__))
    for shared in (os.path.join(pkg, "_data", "probes", "shared"), os.path.join(os.path.dirname(pkg), "probes", "shared"), here):
        if os.path.isfile(os.path.join(shared, "probe_site.py")):
            sys.path.insert(1, shared)
            import probe_site

            probe_site.rebuild()
            return
    raise SystemExit("%s: started without site, and no probes/shared/probe_site.py near %s" % (os.path.basename(__file__), pkg))


def _pip_from(folder):
    """`pip` imported from `folder` alone (pip vendors what it needs): nothing else of that folder shadows the target's."""
    import importlib.util
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("pip", [folder])
    if spec is None or spec.loader is None:
        raise SystemExit("No module named pip in %s" % folder)
    module = importlib.util.module_from_spec(spec)
    sys.modules["pip"] = module
    spec.loader.exec_module(module)


if __name__ == "__main__":
    _rebuild_path()
    del sys.path[0]  # this script's folder: sparkdoctor's modules are not the target's
    args = sys.argv[1:]
    if args[:1] == ["--pip-from"] and len(args) > 1:
        _pip_from(args[1])
        args = args[2:]
    import runpy

    sys.argv = ["pip"] + args
    runpy.run_module("pip", run_name="__main__", alter_sys=True)
