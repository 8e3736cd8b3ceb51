"""Run by the TARGET's interpreter (standard library only, Python 3.8+): its distributions, as JSON.

    python -B target_dists.py [--hash NAME ...]

`fix` needs more than `check` keeps: every file each distribution's RECORD lists (to copy them
into the journal and compare them after a rollback), INSTALLER and direct_url.json (where each
came from, so nothing is replaced from the wrong source), Requires-Dist (what the installed
packages demand of a family being reinstalled), and whether the target is a venv, has pip and
can be written. With --hash NAME the RECORD hashes of NAME's files are checked too.
Prints one JSON object on the last line of stdout. sparkdoctor starts it as the probes, with -S -B and
-X sparkdoctor_site=FOLDER (sparkdoctor/targets/early.py, script_argv): no .pth import line or sitecustomize of the
target runs, and probe_site.py from FOLDER (probes/shared/, or the container payload's shared/) rebuilds the import
path site would have made, from files only, before sysconfig or importlib.metadata reads it.
"""

import base64
import csv
import hashlib
import io
import json
import os
import re
import stat
import sys

if "sparkdoctor_site" in getattr(sys, "_xoptions", {}):  # -S -X sparkdoctor_site=FOLDER: probe_site.py's folder
    # under "/": a relative value (a bare option is True) never names a folder of the current one
    sys.path.insert(1, os.path.join("/", str(sys._xoptions["sparkdoctor_site"])))
    import probe_site

    probe_site.rebuild()  # before sysconfig or importlib.metadata is imported: both read sys.prefix / sys.path

import sysconfig  # noqa: E402
from importlib import metadata  # noqa: E402

if "sparkdoctor_site" in getattr(sys, "_xoptions", {}):
    import probe_io  # noqa: E402  (beside probe_site.py)

    probe_io.bound_metadata_reads(metadata)  # a METADATA that is /dev/zero or a FIFO reads as a missing one


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_text(dist, name):
    try:
        return dist.read_text(name)
    except Exception:
        return None


def record_rows(dist):
    """(path, hash, size) of each RECORD row; a hash or size the row lacks is ""."""
    text = read_text(dist, "RECORD") or ""
    return [tuple((row + ["", ""])[:3]) for row in csv.reader(io.StringIO(text)) if row]


def file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h


def mismatches(location, rows):
    out = []
    for rel, digest, _size in rows:
        if not digest.startswith("sha256="):
            continue
        full = os.path.normpath(os.path.join(location, rel))
        try:
            got = base64.urlsafe_b64encode(file_hash(full).digest()).rstrip(b"=").decode()
        except OSError:
            out.append({"path": rel, "problem": "missing"})
            continue
        if got != digest[len("sha256="):]:
            out.append({"path": rel, "problem": "modified", "full": full, "sha256": "sha256=" + got})
    return out


def egg_link(name, folders):
    """`setup.py develop` (and pip's legacy `install -e`) leaves NAME.egg-link in site-packages (or the user site, with
    --user) and no direct_url.json: the path it names, as pip finds it (the name as given, then with runs of other
    characters as -). One that is no regular file (a FIFO, a device, a folder) is never waited on: odd_links names it."""
    for folder in folders:
        for stem in (name, re.sub(r"[^A-Za-z0-9.]+", "-", name)):
            path = os.path.join(folder, stem + ".egg-link")
            try:
                fh = os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
            except OSError:
                continue
            with fh:
                first = fh.readline(4096).decode("utf-8", "replace").strip() if stat.S_ISREG(os.fstat(fh.fileno()).st_mode) else ""
            if first:
                return first
    return None


def odd_links(folders):
    """Each *.egg-link in `folders` that is no regular file (a FIFO, a device, a folder), found by stat alone: pip opens
    every .egg-link there, blocking, whenever it lists what is installed, so any pip run would wait on a FIFO."""
    odd = []
    for folder in folders:
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".egg-link"))
        except OSError:
            continue
        odd += [p for p in (os.path.join(folder, n) for n in names) if os.path.lexists(p) and not os.path.isfile(p)]
    return odd


def link_folders(purelib):
    """Where pip looks for an .egg-link: site-packages, and the user site where this interpreter reads one (not a venv
    without the system's site-packages; not with PYTHONNOUSERSITE)."""
    cfg = pyvenv_cfg()
    venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    if os.environ.get("PYTHONNOUSERSITE") or (venv and (cfg or {}).get("include-system-site-packages", "true").lower() == "false"):
        return [purelib]
    import site  # under -S: only its functions, its main() (and every .pth) never runs

    user = site.getusersitepackages()
    return [purelib, user] if venv else [user, purelib]  # pip's order


def describe(dist, hash_names, folders):
    name = dist.metadata["Name"] or "?"
    location = str(dist.locate_file(""))
    rows = record_rows(dist)
    direct = read_text(dist, "direct_url.json")
    try:
        direct = json.loads(direct) if direct else None
    except ValueError:
        direct = {"unreadable": True}
    info_dir = getattr(dist, "_path", None)
    linked = None if direct or not str(info_dir or "").endswith(".egg-info") else egg_link(name, folders)
    if linked:  # a development checkout: editable, as pip list says
        direct = {"url": "file://" + os.path.abspath(linked), "dir_info": {"editable": True}, "egg_link": True}
    out = {
        "name": name,
        "version": dist.version,
        "location": location,
        "installer": (read_text(dist, "INSTALLER") or "").strip() or None,
        "direct_url": direct,
        "requires": list(dist.requires or []),
        "files": [r[0] for r in rows],
        # a .dist-info whose RECORD is missing or empty (a copy by hand, a write cut short): pip cannot uninstall it
        "no_record": str(info_dir or "").endswith(".dist-info") and not rows,
    }
    if canonical(name) in hash_names:
        out["mismatched"] = mismatches(location, rows)
    return out, rows


def drop_overwritten(dists, rows_of):
    """A file whose bytes are what ANOTHER dist's RECORD says for the same path was overwritten by
    that dist (wheels sharing paths), not edited: it is not this dist's to restore."""
    owners = {}
    for key, (location, rows) in rows_of.items():
        for rel, digest, _size in rows:
            owners.setdefault(os.path.normpath(os.path.join(location, rel)), set()).add((key, digest))
    for key, info in dists.items():
        if "mismatched" in info:
            info["mismatched"] = [{"path": m["path"], "problem": m["problem"]} for m in info["mismatched"]
                                  if not any(k != key and d == m.get("sha256") for k, d in owners.get(m.get("full"), ()))]


def read_only(path):
    try:
        return bool(os.statvfs(path).f_flag & getattr(os, "ST_RDONLY", 1))
    except OSError:
        return False


def externally_managed(is_venv):
    """PEP 668: the OS marks its interpreter (EXTERNALLY-MANAGED in the stdlib folder; Debian, Ubuntu, DGX OS) and pip
    refuses to change it, unless PIP_BREAK_SYSTEM_PACKAGES says otherwise. A venv is never marked."""
    if is_venv or os.environ.get("PIP_BREAK_SYSTEM_PACKAGES", "").lower() in ("1", "y", "yes", "t", "true", "on"):
        return False
    return os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))


def ahead_outside(location, purelib):
    """A venv's dist in a folder outside the venv that comes before site-packages on sys.path (PYTHONPATH, a `pip
    install --target` folder): pip leaves it ("outside environment") and installs into site-packages, behind it."""
    if sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        return False
    real, prefix = os.path.realpath(location), os.path.realpath(sys.prefix)
    if real == prefix or real.startswith(prefix.rstrip(os.sep) + os.sep):
        return False
    order = [os.path.realpath(p or os.curdir) for p in sys.path]
    try:
        return order.index(real) < order.index(os.path.realpath(purelib))
    except ValueError:
        return False


def pip_on_disk(dist):
    """pip counts where its package is there to run, not where only its .dist-info stayed (a pip/ folder deleted by
    hand or by a cleanup: `python -m pip` then says "No module named pip", and sparkdoctor's own pip is needed)."""
    location = (dist or {}).get("location")
    return bool(location) and os.path.isfile(os.path.join(location, "pip", "__main__.py"))


def pyvenv_cfg():
    path = os.path.join(sys.prefix, "pyvenv.cfg")
    keys = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if "=" in line:
                    k, v = line.split("=", 1)
                    keys[k.strip().lower()] = v.strip()
    except OSError:
        return None
    return keys


def main(argv):
    hash_names = {canonical(argv[i + 1]) for i in range(len(argv) - 1) if argv[i] == "--hash"}
    purelib = sysconfig.get_paths()["purelib"]
    folders = link_folders(purelib)
    dists = {}
    rows_of = {}
    for dist in metadata.distributions():
        if os.path.basename(str(getattr(dist, "_path", ""))).startswith("~"):
            continue  # what an interrupted pip uninstall or upgrade moved aside: no distribution to pip or import
        try:
            name = dist.metadata["Name"]
        except Exception:  # a METADATA that is not UTF-8, or unreadable: left out, as check leaves it out of its packages
            continue
        if not name:
            continue
        key = canonical(name)
        if key in dists:  # the first one on sys.path is the one imported; another folder's copy is shadowed by it
            where = os.path.realpath(str(dist.locate_file("")))
            if where == os.path.realpath(dists[key].get("location") or ""):
                continue  # one folder by two names (lib64 -> lib on Fedora, RHEL, openSUSE): the same copy
            where = purelib if where == os.path.realpath(purelib) else where
            if where not in dists[key].setdefault("shadows", []):
                dists[key]["shadows"].append(where)
            continue
        try:
            dists[key], rows = describe(dist, hash_names, folders)
            if ahead_outside(dists[key]["location"], purelib):
                dists[key]["outside_env"] = True
            rows_of[key] = (dists[key]["location"], rows)
        except Exception as exc:
            dists[key] = {"name": name, "version": dist.version, "error": "%s: %s" % (type(exc).__name__, exc)}
    if hash_names:
        drop_overwritten(dists, rows_of)
    out = {
        "python": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "userbase": sysconfig.get_config_var("userbase"),
        "is_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "externally_managed": externally_managed(sys.prefix != getattr(sys, "base_prefix", sys.prefix)),
        "has_pip": pip_on_disk(dists.get("pip")),
        "purelib": purelib,
        "writable": os.access(purelib, os.W_OK),
        "read_only": read_only(purelib),
        "version": "%d.%d" % sys.version_info[:2],
        "dists": dists,
        "odd_links": odd_links(folders),
    }
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
