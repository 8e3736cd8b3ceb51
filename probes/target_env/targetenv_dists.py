"""Installed distributions found the way importlib.metadata's path finder finds them (*.dist-info /
*.egg-info in each sys.path folder), without importing importlib.metadata or email (slow to import),
and what their metadata says: RECORD rows, PEP 610 origin, torch's CUDA build.
"""

import json
import os
import re
import sys

from probe_io import MAX_HEADER, MAX_SOURCE, read_head, read_regular
from probe_io import read_record as read_record_file
from targetenv_base import canonical, error


class Dist(object):
    __slots__ = ("name", "canonical", "version", "location", "info_dir", "is_dist_info", "record_stat", "record_error", "metadata_error")

    def __init__(self, name, version, location, info_dir, is_dist_info):
        self.name = name
        self.canonical = canonical(name)
        self.version = version
        self.location = location
        self.info_dir = info_dir
        self.is_dist_info = is_dist_info
        self.record_stat = None
        self.record_error = None  # why a RECORD that is there could not be read
        self.metadata_error = None  # why METADATA could not be read (name and version from the folder name)

    def record_path(self):
        return os.path.join(self.info_dir, "RECORD") if self.is_dist_info else None


def read_headers(path):
    """Name and Version from a METADATA/PKG-INFO header block (what the email parser would give)."""
    head, _ = read_head(path, MAX_HEADER)
    end = head.find(b"\n\n")  # the long description after the headers is never decoded
    text = (head if end < 0 else head[:end]).decode("utf-8", "replace")
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key in ("name", "version") and key not in found:
            found[key] = value.strip()
            if len(found) == 2:
                break
    return found.get("name"), found.get("version")


# The serving-stack components whose Requires-Dist are reported (check judges them: a `pip install --no-deps vllm`
# leaves vLLM unable to import, and nothing else would say so).
REQUIRES_OF = ("vllm", "torch", "flashinfer-python", "nvidia-cutlass-dsl", "triton")


def read_requires(dist):
    """The Requires-Dist values of a dist's metadata, in order; None for a METADATA that cannot be read.

    An .egg-info's PKG-INFO carries them too when a recent setuptools wrote it; otherwise its
    requires.txt does (or nothing, when the dist needs nothing), converted as importlib.metadata does."""
    if dist.metadata_error:
        return None
    meta = dist.info_dir
    if dist.is_dist_info or os.path.isdir(meta):
        meta = os.path.join(meta, "METADATA" if dist.is_dist_info else "PKG-INFO")
    try:
        head, _ = read_head(meta, MAX_HEADER)
    except OSError:
        return None
    end = head.find(b"\n\n")
    text = (head if end < 0 else head[:end]).decode("utf-8", "replace")
    found = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "requires-dist" and value.strip():
            found.append(value.strip())
    if found or dist.is_dist_info or not os.path.isdir(dist.info_dir):
        return found
    try:
        source = read_regular(os.path.join(dist.info_dir, "requires.txt"), MAX_HEADER)[0].decode("utf-8", "replace")
    except FileNotFoundError:
        return found  # setuptools writes no requires.txt for a dist that requires nothing
    except OSError:
        return None
    return egg_requires(source)


def egg_requires(source):
    """requires.txt as Requires-Dist strings: unconditioned lines first, then `[extra]`, `[:marker]` and
    `[extra:marker]` sections, each line given that section's marker (importlib.metadata's conversion)."""
    found = []
    section = None
    for line in source.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        extra, _, markers = (section or "").partition(":")
        if extra and markers:
            markers = "(%s)" % markers
        conditions = [part for part in (markers, extra and 'extra == "%s"' % extra) if part]
        space = " " if "@" in line else ""  # PEP 508: a URL requirement needs a space before its `;`
        found.append(line + (space + "; " + " and ".join(conditions) if conditions else ""))
    return found


def name_from_folder(entry):
    """(name, version) from a metadata folder's name: 'vllm-0.22.0.dist-info', 'six-1.17.0-py3.8.egg-info'."""
    stem = entry.rsplit(".", 1)[0]
    parts = stem.split("-")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        return None, None
    return parts[0], parts[1]


def path_entries(unlisted):
    """sys.path folders in order, without the probe's own folders (this one and probes/shared).

    A folder that is not there (or is a zip) is skipped, as the import system skips it; one that
    cannot be looked at (no permission on it or a parent) goes to `unlisted`: what it holds is
    unknown, not absent."""
    here = os.path.dirname(os.path.abspath(__file__))
    seen = set([here, os.path.join(os.path.dirname(here), "shared")])
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder in seen:
            continue
        seen.add(folder)
        try:
            if os.path.isdir(folder) or not os.path.lexists(folder):
                os.stat(folder)  # raises for a folder behind a parent without search permission
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            unlisted.append({"path": folder, "error": exc.strerror or str(exc)})
            continue
        if os.path.isdir(folder):
            yield folder


def find_distributions(unlisted):
    """Installed distributions, first on sys.path wins (as importlib.metadata resolves them); the
    sys.path folders that could not be listed go to `unlisted` ([{"path", "error"}])."""
    dists = {}
    for folder in path_entries(unlisted):
        try:
            names = sorted(os.listdir(folder))
        except OSError as exc:
            unlisted.append({"path": folder, "error": exc.strerror or str(exc)})
            continue
        here = {}
        for entry in names:
            is_dist_info = entry.endswith(".dist-info")
            if not (is_dist_info or entry.endswith(".egg-info")) or entry.startswith("~"):
                # `~ix-1.17.0.dist-info`: what an interrupted pip uninstall or upgrade moved aside (pip's
                # AdjacentTempDirectory); no distribution to Python's import or importlib.metadata, ignored by pip
                continue
            info_dir = os.path.join(folder, entry)
            meta = info_dir
            if os.path.isdir(info_dir):
                meta = os.path.join(info_dir, "METADATA" if is_dist_info else "PKG-INFO")
            metadata_error = None
            try:
                name, version = read_headers(meta)
            except FileNotFoundError:
                error("%s: cannot read %s: no such file" % (info_dir, os.path.basename(meta)))
                if not (is_dist_info and os.path.isfile(os.path.join(info_dir, "RECORD"))):
                    continue
                # pip installed it (its RECORD is there) and only METADATA is lost: the files are in place and import,
                # so the folder's name stands in, and RECORD names the lost file (files_missing)
                metadata_error = "cannot read METADATA: no such file"
                name, version = name_from_folder(entry)
            except OSError as exc:
                # There but unreadable (no permission, a FIFO, a device): the dist is installed, so
                # its folder name (name-version.dist-info) stands in; absent would be a wrong answer.
                metadata_error = "cannot read %s: %s" % (os.path.basename(meta), exc.strerror or exc)
                error("%s: %s" % (info_dir, metadata_error))
                name, version = name_from_folder(entry)
            if not name or not version:
                error("%s: %s has no %s (corrupt metadata)" % (info_dir, os.path.basename(meta), "Name" if not name else "Version"))
                continue
            dist = Dist(name, version, folder, info_dir, is_dist_info)
            dist.metadata_error = metadata_error
            if dist.canonical in here:
                kept = here[dist.canonical]
                if kept.version == version and kept.is_dist_info != is_dist_info:
                    # one install described twice (Debian's python3-cryptography ships NAME-V.dist-info and
                    # NAME.egg-info): no leftover; the .dist-info (it has RECORD) is the one read
                    if is_dist_info and not kept.is_dist_info:
                        here[dist.canonical] = dist
                    continue
                error(
                    "%s: two metadata folders for %s (%s and %s); a stale one is left over from an upgrade"
                    % (folder, name, os.path.basename(here[dist.canonical].info_dir), entry)
                )
                continue
            here[dist.canonical] = dist
        for key, dist in here.items():
            dists.setdefault(key, dist)
    return dists


def read_record(dist, only=None):
    """RECORD rows [path, hash, size] of a dist (those containing `only`, if given), or None without
    RECORD. A RECORD that is there but cannot be read (unreadable, not a regular file, too large, a
    line csv cannot parse) is also None, with dist.record_error saying why: that package's
    integrity is unchecked, and nothing else is lost."""
    path = dist.record_path()
    if path is None:
        return None
    try:
        rows, dist.record_stat = read_record_file(path, only)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        dist.record_error = getattr(exc, "strerror", None) or str(exc)
        error("%s: cannot read RECORD: %s" % (dist.info_dir, dist.record_error))
        return None
    return rows


def direct_url(dist):
    """PEP 610 direct_url.json: where a package came from when not from an index (a source build,
    an editable checkout, a wheel file); None for ordinary index installs."""
    if not dist.is_dist_info:
        return None
    try:
        data = json.loads(read_regular(os.path.join(dist.info_dir, "direct_url.json"), MAX_HEADER)[0].decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    dir_info = data.get("dir_info") if isinstance(data.get("dir_info"), dict) else {}
    vcs = data.get("vcs_info") if isinstance(data.get("vcs_info"), dict) else {}
    return {"url": data.get("url"), "editable": bool(dir_info.get("editable")), "commit": vcs.get("commit_id")}


def torch_build(dist):
    """cuda and git_version from torch/version.py, read as text (importing torch takes seconds).

    "cuda": None is a CPU-only build, and only when version.py says so (`cuda = None`); a version.py
    that is missing, unreadable or assigns no cuda leaves the build unknown: "build_error" says why."""
    path = os.path.join(dist.location, "torch", "version.py")
    try:
        text = read_regular(path, MAX_SOURCE)[0].decode("utf-8", "replace")
    except OSError as exc:
        why = "cannot read torch/version.py (broken install?): %s" % (exc.strerror or exc)
        error("torch %s: %s" % (dist.version, why))
        return {"cuda": None, "git_version": None, "build_error": why}
    build = {"cuda": _assigned(text, "cuda"), "git_version": _assigned(text, "git_version")}
    if build["cuda"] is NOT_ASSIGNED:
        build["cuda"] = None
        build["build_error"] = "torch/version.py assigns no cuda"
        error("torch %s: %s" % (dist.version, build["build_error"]))
    if build["git_version"] is NOT_ASSIGNED:
        build["git_version"] = None
    return build


NOT_ASSIGNED = object()


def _assigned(text, name):
    """The string a module-level `name = '...'` or `name: T = '...'` assigns; None for `= None`,
    NOT_ASSIGNED when nothing is assigned."""
    match = re.search(r"^%s\s*(?::[^=\n]*)?=\s*(?:'([^'\n]*)'|\"([^\"\n]*)\"|(None)\b)" % re.escape(name), text, re.M)
    if not match:
        return NOT_ASSIGNED
    if match.group(3):
        return None
    return match.group(1) if match.group(1) is not None else match.group(2)


# The top-level package of each tracked component, as its wheel installs it (cutlass-dsl's sits in the folder its .pth
# names); a name given with --track stands for itself (`six` -> six.py or six/).
TRACKED_MODULES = {"torch": "torch", "triton": "triton", "vllm": "vllm", "flashinfer": "flashinfer-python",
                   "cutlass": "nvidia-cutlass-dsl", "quack": "quack-kernels", "b12x": "b12x"}
VERSION_FILES = ("__init__.py", "version.py", "_version.py")


def modules_without_metadata(dists, extra):
    """Tracked components whose top-level package is on sys.path (so `import` finds it) while no metadata folder
    describes them (a .dist-info deleted by hand or by an image clean-up, files copied in without pip): pip does not
    list them, and sparkdoctor, which reads versions from metadata, would call them not installed. Found by their
    file names only (nothing is imported); the version is what `__version__ = '...'` in their files says, or None."""
    wanted = dict(TRACKED_MODULES)
    for name in extra:
        wanted.setdefault(name.replace("-", "_"), name)
    found = []
    for folder in path_entries([]):
        for module in sorted(wanted):
            distribution = wanted[module]
            if distribution in dists or module == "cutlass" and any(k.startswith("nvidia-cutlass") for k in dists):
                del wanted[module]  # described (nvidia-cutlass, the C++ library's Python interface, may own `cutlass`)
                continue
            package = os.path.join(folder, module)
            if os.path.isfile(os.path.join(package, "__init__.py")):
                files = [os.path.join(package, f) for f in VERSION_FILES]
            elif os.path.isfile(package + ".py"):
                package += ".py"
                files = [package]
            else:
                continue
            del wanted[module]  # the first on sys.path is the one imported
            found.append({"module": module, "distribution": distribution, "path": package, "version": _version_in(files)})
    return found


def _version_in(files):
    for path in files:
        try:
            text = read_regular(path, MAX_SOURCE)[0].decode("utf-8", "replace")
        except OSError:
            continue
        version = _assigned(text, "__version__")
        if version and version is not NOT_ASSIGNED:
            return version
    return None
