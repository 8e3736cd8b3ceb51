"""The import path `site` would have made, made again WITHOUT running any of the target's code; standard library only.

sparkdoctor starts a probe under the target's interpreter with `-S -B -X sparkdoctor_site=FOLDER` (sparkdoctor/
targets/early.py, script_argv): -S, so the `site` module never runs, and with it no `import` line of a .pth file and
no sitecustomize.py / usercustomize.py (a package's code, which the probes promise never to run: they read files). The
-X option asks for this module's rebuild(), and names the folder this module is in for the scripts outside probes/
(fix's, whatif's; a probe finds it beside its own folder, and a fleet node's bundle gives the option bare): the
sys.path entries site would have added, from files only, in site's order:

  1. a venv (pyvenv.cfg beside the interpreter or one folder up): sys.prefix and sys.exec_prefix become its folder,
     as site's venv() sets them, and its site-packages come first; include-system-site-packages decides whether the
     base interpreter's follow and whether the user site is read at all;
  2. the user site (~/.local/lib/pythonX.Y/site-packages), when site's own rules enable it
     (site.check_enableusersite(): not with -s / PYTHONNOUSERSITE, not under setuid);
  3. site.getsitepackages() of the remaining prefixes (Debian's dist-packages on a Debian python included: that
     function is its own, and calling it runs no site.main() under -S).

Each folder is appended, then its .pth files are read as text in sorted order (names starting with "." skipped, as
site skips them): a line that names a folder (relative to the .pth's folder) that exists is appended, comments and
blank lines are skipped, and an `import` line is NOT run. The one exception is nvidia-cutlass-dsl 4.6+'s
nvidia_cutlass_dsl_packages.pth, whose line puts nvidia_cutlass_dsl/dsl_packages first (where `import cutlass`
finds the DSL): its effect is computed here from the folders (nvidia_cutlass_dsl is a namespace package in those
wheels: importing it runs nothing) and the folder put before every site folder (after the standard library, not
before it as site puts it: a file there named like a standard module must not run in the probe), so the probes still see the compiler `import cutlass`
would load. Every other import line is listed in SKIPPED: an import-hook editable install
(`__editable___NAME_finder.install()`) is not put on the path, and the probes find such a package through its
finder's mapping, read as text (probes/capabilities/capabilities_files.py).

Without -S, or without the -X option (whatif's scratch sites run probes with -S and only PYTHONPATH on purpose), this
module changes nothing. Python 3.6+.
"""

import os
import sys

from probe_io import read_regular

XOPTION = "sparkdoctor_site"
MAX_PTH = 1 << 20  # a .pth file is a few lines; a larger one is read no further than this (a FIFO never blocks)

SKIPPED = []
"""(the .pth file, the line) of every import line that was not run."""

_DONE = []

# nvidia-cutlass-dsl 4.6 .. 4.8's nvidia_cutlass_dsl_packages.pth, whitespace and quotes aside
CUTLASS_DSL_LINE = ("import sys, os, nvidia_cutlass_dsl; "
                    "sys.path.insert(0, os.path.join(nvidia_cutlass_dsl.__path__[0], 'dsl_packages'))")


def wanted():
    """True when this interpreter started without site and sparkdoctor asked for the rebuild."""
    return bool(sys.flags.no_site) and XOPTION in getattr(sys, "_xoptions", {})


def child_flags():
    """The interpreter options a probe's own child (the cutedsl compiles) starts with: the same as this process."""
    return ["-S", "-X", XOPTION] if wanted() else []


def rebuild():
    """Append to sys.path what site would have added (see the module's doc), running nothing; once per process."""
    if _DONE or not wanted():
        return
    _DONE.append(True)
    known = _remove_duplicates()
    _guard_standard_names(list(sys.path))
    # Where cutlass-dsl's folder goes: site puts it first, before the standard library, so a file of that folder named
    # like a standard module (base64.py) would run when the probe imports that module. Right after the interpreter's
    # own entries, it still comes before every site folder (what it is for: `import cutlass` finds the DSL's).
    front = len(sys.path)
    system_site, user_site = True, None
    venv = _venv()
    if venv is not None:
        prefix, cfg = venv
        sys.prefix = sys.exec_prefix = prefix  # what site's venv() does (a Python before 3.11 starts at the base)
        system_site = cfg.get("include-system-site-packages", "true").lower() == "true"
        if not system_site:
            user_site = False
    import site  # under -S importing it runs nothing (its main() runs only without -S)

    if venv is not None:
        for folder in _site_packages(site, [sys.prefix]):
            _add_site_dir(folder, known, front)
    if user_site is None:
        user_site = site.check_enableusersite()
    # as site.main() leaves them: pip reads ENABLE_USER_SITE to fall back to a --user install (fix's pip runs under -S)
    site.ENABLE_USER_SITE = bool(user_site)
    folder = site.getusersitepackages()  # sets site.USER_BASE and USER_SITE too, as site.main() does
    if user_site:
        if os.path.isdir(folder):
            _add_site_dir(folder, known, front)
    if venv is None:
        prefixes = [sys.prefix, sys.exec_prefix]
    elif system_site:
        prefixes = [sys.prefix, getattr(sys, "base_prefix", sys.prefix), getattr(sys, "base_exec_prefix", sys.exec_prefix)]
    else:
        prefixes = [sys.prefix]
    for folder in _site_packages(site, prefixes):
        _add_site_dir(folder, known, front)


# Before 3.10 (no sys.stdlib_module_names): the standard modules an interpreter is often built without (pyenv without
# liblzma-dev, libbz2-dev, libffi-dev, libsqlite3-dev, libssl-dev), whose importers fall back when they are missing.
OPTIONAL_STANDARD = ("_bz2", "_lzma", "_ctypes", "_sqlite3", "_ssl", "_hashlib", "_uuid", "_dbm", "_gdbm", "_curses",
                     "_tkinter", "readline", "zlib", "_blake2", "_sha3", "_md5", "_sha1", "_sha256", "_sha512", "_decimal")


class _StandardNames:
    """A meta path finder, put before PathFinder: a top-level name of the standard library is looked for in the
    interpreter's own folders only, never in a site folder. An interpreter built without one (pyenv without
    liblzma-dev has no _lzma) gets ImportError, as it would without site folders, and the standard module that asked
    (bz2, lzma, zipfile and shutil import them, pip and importlib.metadata import those) falls back; a site folder's
    _lzma.py would have run instead: a package's code."""

    def __init__(self, own):
        self.own = own
        self.names = frozenset(getattr(sys, "stdlib_module_names", OPTIONAL_STANDARD))

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in self.names:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, self.own)
        if spec is None:
            raise ModuleNotFoundError("No module named %r (not in this interpreter's standard library)" % name, name=name)
        return spec


def _guard_standard_names(own):
    from importlib.machinery import PathFinder

    at = sys.meta_path.index(PathFinder) if PathFinder in sys.meta_path else len(sys.meta_path)
    sys.meta_path.insert(at, _StandardNames(own))


def _makepath(*paths):
    folder = os.path.abspath(os.path.join(*paths))
    return folder, os.path.normcase(folder)


def _remove_duplicates():
    """site's removeduppaths(), sys.path[0] aside (the script's folder, put there after site ran): each entry made
    absolute, a repeat dropped; the set of those folders (normcased) is what a .pth line must not add again."""
    kept, known = sys.path[:1], set()
    for entry in sys.path[1:]:
        folder, case = _makepath(entry)
        if case not in known:
            kept.append(folder)
            known.add(case)
    sys.path[:] = kept
    return known


def _venv():
    """(the venv's folder, its pyvenv.cfg keys) when this interpreter is a venv's, as site's venv() finds it."""
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    prefix = os.path.dirname(exe_dir)
    for conf in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(prefix, "pyvenv.cfg")):
        if not os.path.isfile(conf):
            continue
        keys = {}
        try:
            text = _decode(read_regular(conf, MAX_PTH)[0])
        except OSError:
            text = ""
        for line in text.splitlines():
            if "=" in line:
                key, _, value = line.partition("=")
                keys[key.strip().lower()] = value.strip()
        return prefix, keys
    return None


def _site_packages(site, prefixes):
    try:
        folders = site.getsitepackages(prefixes)
    except Exception:
        return []
    return [folder for folder in folders if os.path.isdir(folder)]


def _add_site_dir(sitedir, known, front):
    """site.addsitedir: the folder, then its .pth files in sorted order."""
    sitedir, case = _makepath(sitedir)
    if case not in known:
        sys.path.append(sitedir)
        known.add(case)
    try:
        names = os.listdir(sitedir)
    except OSError:
        return
    for name in sorted(n for n in names if n.endswith(".pth") and not n.startswith(".")):
        _add_pth(sitedir, name, known, front)


def _decode(data):
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return os.fsdecode(data)


def _add_pth(sitedir, name, known, front):
    """site.addpackage, an import line excepted (see the module's doc)."""
    path = os.path.join(sitedir, name)
    try:
        text = _decode(read_regular(path, MAX_PTH)[0])
    except OSError:
        return
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith(("import ", "import\t")):
            if _squeeze(line) == _squeeze(CUTLASS_DSL_LINE):
                portion = _package_folder("nvidia_cutlass_dsl")
                if portion is not None:
                    sys.path.insert(front, os.path.join(portion, "dsl_packages"))
            else:
                SKIPPED.append((path, line.rstrip()))
            continue
        try:
            folder, case = _makepath(sitedir, line.rstrip())
            if case not in known and os.path.exists(folder):
                sys.path.append(folder)
                known.add(case)
        except Exception:  # site gives up on the rest of that file
            break


def _squeeze(line):
    return "".join(line.split()).replace('"', "'")


def _package_folder(name):
    """`name.__path__[0]` as an import would find it on sys.path now, from the folders alone: the first regular
    package, else the first namespace portion; None when it is a module or absent (the import line fails)."""
    from importlib.machinery import all_suffixes

    suffixes = all_suffixes()
    portions = []
    for entry in list(sys.path):
        folder = os.path.abspath(entry or os.getcwd())
        package = os.path.join(folder, name)
        module = any(os.path.isfile(os.path.join(folder, name + s)) for s in suffixes)
        if os.path.isdir(package):
            if any(os.path.isfile(os.path.join(package, "__init__" + s)) for s in suffixes):
                return package
            if module:
                return None
            portions.append(package)
        elif module:
            return None
    return portions[0] if portions else None
