"""Finding an installed distribution's package folder and reading its files without importing it,
remembering each file's (size, mtime) so the cache can tell when a derived fact went stale.
"""

import os
import re
import sys

from probe_io import MAX_SOURCE
from probe_io import read_text as read_regular_text


def cap(value, evidence):
    return {"value": value, "evidence": evidence}


def find_package(dist_name, top):
    """(version, package dir or None) of an installed distribution; None when not installed.

    Looks for <name>-<version>.dist-info on sys.path the way importlib.metadata would, without its
    import cost (this probe must stay fast when warm).
    """
    want = re.sub(r"[-_.]+", "_", dist_name).lower()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            m = re.match(r"^([A-Za-z0-9_.]+?)-([^-]+)\.dist-info$", name) or re.match(r"^([A-Za-z0-9_.]+?)(?:-([^-]+?))?(?:-py[\d.]+)?\.egg-info$", name)
            if not m or re.sub(r"[-_.]+", "_", m.group(1)).lower() != want:
                continue
            info = os.path.join(entry or ".", name)
            version = m.group(2) or egg_version(info)
            pkg = os.path.join(entry or ".", top)
            if os.path.isfile(os.path.join(pkg, "__init__.py")):
                return version, os.path.abspath(pkg)
            return version, locate_elsewhere(info, entry or ".", top)
    return None


def egg_version(info):
    """Version from a (setup.py develop) .egg-info's PKG-INFO."""
    text = read_text(os.path.join(info, "PKG-INFO")) if os.path.isdir(info) else read_text(info)
    m = re.search(r"^Version:\s*(\S+)", text or "", re.M)
    return m.group(1) if m else "unknown"


def locate_elsewhere(info, site, top):
    """An editable or unusual install: RECORD or the editable finder says where the package lives."""
    record = read_text(os.path.join(info, "RECORD")) or ""
    for line in record.splitlines():
        path = line.split(",", 1)[0]
        if path.endswith(top + "/__init__.py"):
            return os.path.abspath(os.path.dirname(os.path.join(site, path)))
        if "__editable__" in path and path.endswith(".py"):
            text = read_text(os.path.join(site, path)) or ""
            m = re.search(r"['\"]%s['\"]\s*:\s*['\"]([^'\"]+)['\"]" % re.escape(top), text)
            if m and os.path.isfile(os.path.join(m.group(1), "__init__.py")):
                return m.group(1)
        if path.endswith(".pth"):
            for where in (read_text(os.path.join(site, path)) or "").splitlines():
                if os.path.isfile(os.path.join(where.strip(), top, "__init__.py")):
                    return os.path.join(where.strip(), top)
    return None


def read_text(path):
    """A source or metadata file's text; None when it cannot be read, is not a regular file or is
    larger than any source file (a FIFO or /dev/zero never blocks or floods the probe)."""
    try:
        return read_regular_text(path, MAX_SOURCE)
    except OSError:
        return None


class Files(object):
    """Reads files under a site dir and remembers each one's (size, mtime) for the cache."""

    def __init__(self, site):
        self.site = site
        self.seen = {}

    def stat_of(self, rel):
        try:
            st = os.stat(os.path.join(self.site, rel))
            return [st.st_size, st.st_mtime_ns]
        except OSError:
            return None

    def text(self, rel):
        self.seen[rel] = self.stat_of(rel)
        return read_text(os.path.join(self.site, rel)) if self.seen[rel] else None

    def listing(self, rel):
        path = os.path.join(self.site, rel)
        try:
            names = sorted(os.listdir(path))
        except OSError:
            names = None
        self.seen[rel + "/"] = names
        return names or []
