"""Installed distributions found the way importlib.metadata's path finder finds them (*.dist-info /
*.egg-info in each sys.path folder), without importing importlib.metadata or email (slow to import),
and what their metadata says: RECORD rows, PEP 610 origin, torch's CUDA build.
"""

import csv
import json
import os
import re
import sys

from targetenv_base import canonical, error


class Dist(object):
    __slots__ = ("name", "canonical", "version", "location", "info_dir", "is_dist_info", "record_stat")

    def __init__(self, name, version, location, info_dir, is_dist_info):
        self.name = name
        self.canonical = canonical(name)
        self.version = version
        self.location = location
        self.info_dir = info_dir
        self.is_dist_info = is_dist_info
        self.record_stat = None

    def record_path(self):
        return os.path.join(self.info_dir, "RECORD") if self.is_dist_info else None


def read_headers(path):
    """Name and Version from a METADATA/PKG-INFO header block (what the email parser would give)."""
    with open(path, "rb") as fh:
        head = fh.read(65536)
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


def path_entries():
    """sys.path folders in order, without the probe's own folders (this one and probes/shared)."""
    here = os.path.dirname(os.path.abspath(__file__))
    seen = set([here, os.path.join(os.path.dirname(here), "shared")])
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder in seen or not os.path.isdir(folder):
            continue
        seen.add(folder)
        yield folder


def find_distributions():
    """Installed distributions, first on sys.path wins (as importlib.metadata resolves them)."""
    dists = {}
    for folder in path_entries():
        try:
            names = sorted(os.listdir(folder))
        except OSError as exc:
            error("cannot list %s: %s" % (folder, exc.strerror or exc))
            continue
        here = {}
        for entry in names:
            is_dist_info = entry.endswith(".dist-info")
            if not (is_dist_info or entry.endswith(".egg-info")):
                continue
            info_dir = os.path.join(folder, entry)
            meta = info_dir
            if os.path.isdir(info_dir):
                meta = os.path.join(info_dir, "METADATA" if is_dist_info else "PKG-INFO")
            try:
                name, version = read_headers(meta)
            except OSError as exc:
                error("%s: cannot read %s: %s" % (info_dir, os.path.basename(meta), exc.strerror or exc))
                continue
            if not name or not version:
                error("%s: %s has no %s (corrupt metadata)" % (info_dir, os.path.basename(meta), "Name" if not name else "Version"))
                continue
            dist = Dist(name, version, folder, info_dir, is_dist_info)
            if dist.canonical in here:
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
    """RECORD rows [path, hash, size] of a dist (those containing `only`, if given), or None without RECORD."""
    path = dist.record_path()
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read()
            dist.record_stat = os.fstat(fh.fileno())
    except FileNotFoundError:
        return None
    except OSError as exc:
        error("%s: cannot read RECORD: %s" % (dist.info_dir, exc.strerror or exc))
        return None
    text = data.decode("utf-8", "replace")
    if only is not None:
        text = "\n".join(line for line in text.splitlines() if only in line)
    return parse_record(text)


def parse_record(text):
    """RECORD is CSV; hash and size never hold a comma, so only a quoted path needs the csv module."""
    rows = []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith('"'):
            rows.extend(row for row in csv.reader([line]) if row)
            continue
        row = line.rsplit(",", 2)
        if len(row) == 3:
            rows.append(row)
    return rows


def direct_url(dist):
    """PEP 610 direct_url.json: where a package came from when not from an index (a source build,
    an editable checkout, a wheel file); None for ordinary index installs."""
    if not dist.is_dist_info:
        return None
    try:
        with open(os.path.join(dist.info_dir, "direct_url.json"), "rb") as fh:
            data = json.loads(fh.read(65536).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    dir_info = data.get("dir_info") if isinstance(data.get("dir_info"), dict) else {}
    vcs = data.get("vcs_info") if isinstance(data.get("vcs_info"), dict) else {}
    return {"url": data.get("url"), "editable": bool(dir_info.get("editable")), "commit": vcs.get("commit_id")}


def torch_build(dist):
    """cuda and git_version from torch/version.py, read as text (importing torch takes seconds)."""
    path = os.path.join(dist.location, "torch", "version.py")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        error("torch %s: cannot read torch/version.py (broken install?): %s" % (dist.version, exc.strerror or exc))
        return {"cuda": None, "git_version": None}
    return {"cuda": _assigned(text, "cuda"), "git_version": _assigned(text, "git_version")}


def _assigned(text, name):
    """The string a module-level `name = '...'` or `name: T = '...'` assigns; None for None or absent."""
    match = re.search(r"^%s\s*(?::[^=\n]*)?=\s*(?:'([^'\n]*)'|\"([^\"\n]*)\")" % re.escape(name), text, re.M)
    if not match:
        return None
    return match.group(1) if match.group(1) is not None else match.group(2)
