"""Run by the TARGET's interpreter for whatif's dry run and every pip call of fix's (the plan's dry run, the downloads,
the install and the uninstall): `python -S -B -X sparkdoctor_site=SHARED target_pip_dry.py [--pip-from FOLDER] ARGS...`
is `python -m pip ARGS...` without `site`.

sparkdoctor never runs a package's code. pip run as `python -m pip` starts with site, so every `.pth` import line
and the sitecustomize.py of the target ran on each call (fix --yes and --rollback ran them once per install and
uninstall). Here the import path site would have made is made again from files only (probe_site.py in SHARED, as for
fix's target_dists.py; site.ENABLE_USER_SITE, USER_BASE and USER_SITE set as site.main() sets them, so pip picks the
install scheme it picks with site), and pip runs on it: the target's own pip, or with --pip-from the `pip` package in
FOLDER (sparkdoctor's own, for a venv without pip, for the calls that change nothing: what `pip --python` does, which
starts the target's interpreter with site). pip installs wheels only and byte-compiles them in its own process, so the
audit hook below, which lets no process start, stops nothing an install needs. Standard library only, Python 3.8+.
"""

import errno
import os
import sys

if "sparkdoctor_site" in getattr(sys, "_xoptions", {}):  # -S -X sparkdoctor_site=FOLDER: probe_site.py's folder
    # under "/": a relative value (a bare option is True) never names a folder of the current one
    sys.path.insert(1, os.path.join("/", str(sys._xoptions["sparkdoctor_site"])))
    import probe_site

    probe_site.rebuild()  # before pip is imported: it reads sys.prefix / sys.path


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


def _environment_pip():
    """The folder of the environment's own pip when PYTHONPATH is set: the first folder of sys.path that holds one,
    PYTHONPATH's left out (a pip there is not the environment's: fix's rollback ran it, and it put nothing back). None
    without PYTHONPATH, or when only PYTHONPATH holds one."""
    from importlib.machinery import PathFinder

    added = set(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    for folder in sys.path if added else []:
        if folder and os.path.abspath(folder) not in added and PathFinder.find_spec("pip", [folder]) is not None:
            return folder
    return None


# What starts a process. pip starts one to build a source distribution (its setup.py or build backend: the package's code)
# or check out a VCS link; a wheel's install needs none. `--only-binary :all:` on the command line is not
# enough: an option line of a constraint file (PIP_CONSTRAINT, pip's config) outranks it, and `--no-binary NAME` there
# had pip build NAME's sdist. So nothing here starts a process at all.
_STARTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty")


def _no_process(event, _args):
    """An OSError, as a missing program gives: what pip asks of the system in passing (lsb_release for its user agent,
    rustc's version) falls back as it does without them; a build fails, saying why."""
    if event in _STARTS:
        raise PermissionError(errno.EPERM, "sparkdoctor's pip call starts no process (a build would run a package's code)")


if __name__ == "__main__":
    if hasattr(sys, "addaudithook"):  # 3.8+
        sys.addaudithook(_no_process)
    del sys.path[0]  # this script's folder: sparkdoctor's modules are not the target's
    args = sys.argv[1:]
    if args[:1] == ["--pip-from"] and len(args) > 1:
        _pip_from(args[1])
        args = args[2:]
    else:
        folder = _environment_pip()
        if folder:
            _pip_from(folder)
    import runpy

    sys.argv = ["pip"] + args
    runpy.run_module("pip", run_name="__main__", alter_sys=True)
