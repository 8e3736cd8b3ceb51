"""Run by the TARGET's interpreter for whatif's dry run and every pip call of fix's (the plan's dry run, the downloads,
the install and the uninstall): `python -S -B -X sparkdoctor_site=SHARED target_pip_dry.py [--pip-from FOLDER] ARGS...`
is `python -m pip ARGS...` without `site`. With `--keep-settings NAME,...` first (fix's calls), pip runs with only those
of the user's pip settings (_only_settings), and `--print-settings` next prints them all first, as one line (a plan's
dry run: the note on the settings set aside costs no pip start of its own); `--list-settings` prints them all.

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
import json
import os
import sys

if "sparkdoctor_site" in getattr(sys, "_xoptions", {}):  # -S -X sparkdoctor_site=FOLDER: probe_site.py's folder
    # under "/": a relative value (a bare option is True) never names a folder of the current one
    sys.path.insert(1, os.path.join("/", str(sys._xoptions["sparkdoctor_site"])))
    import probe_site

    probe_site.rebuild()  # before pip is imported: it reads sys.prefix / sys.path
    from importlib import metadata

    import probe_io

    probe_io.bound_metadata_reads(metadata)  # pip reads each installed dist's METADATA: a /dev/zero one held it for good


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


def _settings():
    """pip's settings as pip merges them (its environment variables and every config file), read with pip's own
    Configuration, not `pip config list`: PIP_USER=1 is that command's own --user, and it then read the user's file
    alone. A file pip cannot parse fails here as it would fail the install."""
    try:
        from pip._internal.configuration import Configuration

        config = Configuration(isolated=False)
        config.load()
        return dict(config.items())
    except Exception as exc:  # pip's ConfigurationError, or a pip without this class
        raise SystemExit("ERROR: cannot read pip's settings: %s" % (exc,)) from None


SHOWN = "sparkdoctor-pip-settings: "
"""The line `--print-settings` writes first: a JSON object of every setting, as `--list-settings` names them."""


def _only_settings(keep, command, show=False):
    """pip's settings narrowed to the names in `keep` (fix's: those needed to reach the package index at all), each
    with the value pip itself would use for `command` (find-links without its remote pages, unless no-index makes it
    the only source): every other PIP_* variable is dropped, the kept ones found
    only in a config file become variables (pip's order: the environment, then the command's section, then
    [global]), and PIP_CONFIG_FILE=os.devnull, which pip documents as loading no configuration file at all
    (`--isolated` still loads the global and site files). `show`: every setting read is printed first (SHOWN)."""
    values = _settings()
    if show:
        sys.stdout.write(SHOWN + json.dumps(values, sort_keys=True) + "\n")
        sys.stdout.flush()  # before anything pip writes
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        if name[4:].lower().replace("_", "-") not in keep:
            del os.environ[name]
    for key in sorted(keep):
        name = "PIP_" + key.upper().replace("-", "_")
        value = values.get(command + "." + key) or values.get("global." + key)
        if name not in os.environ and value:
            os.environ[name] = value
    links = os.environ.get("PIP_FIND_LINKS", "")
    if links and os.environ.get("PIP_NO_INDEX", "").strip().lower() not in ("1", "true", "yes", "y", "on", "t"):
        # beside an index, a remote page of links is a second source, as an extra index is (fix/pip_settings.py): only
        # the user's own files are kept; with no-index it is the only source, the user's index, and kept whole
        local = [e for e in links.split() if "://" not in e or e.lower().startswith("file:")]
        if local:
            os.environ["PIP_FIND_LINKS"] = " ".join(local)
        else:
            del os.environ["PIP_FIND_LINKS"]
    os.environ["PIP_CONFIG_FILE"] = os.devnull


if __name__ == "__main__":
    if hasattr(sys, "addaudithook"):  # 3.8+
        sys.addaudithook(_no_process)
    del sys.path[0]  # this script's folder: sparkdoctor's modules are not the target's
    args = sys.argv[1:]
    keep = None
    if args[:1] == ["--keep-settings"] and len(args) > 1:
        keep = set(k for k in args[1].split(",") if k)
        args = args[2:]
    show = args[:1] == ["--print-settings"]
    if show:
        args = args[1:]
    if args[:1] == ["--pip-from"] and len(args) > 1:
        _pip_from(args[1])
        args = args[2:]
    else:
        folder = _environment_pip()
        if folder:
            _pip_from(folder)
    if args == ["--list-settings"]:  # `section.key='value'` lines, as `pip config list` writes them
        for key, value in sorted(_settings().items()):
            print("%s=%r" % (key, value))
        sys.exit(0)
    if keep is not None and args:
        _only_settings(keep, args[0], show)
    import runpy

    sys.argv = ["pip"] + args
    runpy.run_module("pip", run_name="__main__", alter_sys=True)
