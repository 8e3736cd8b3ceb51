"""The integrity check's inputs from each tracked RECORD, kept between runs while the RECORD is unchanged.

Reading and splitting the tracked RECORDs (torch's alone is ~3 MB, 26k rows in a vLLM venv) and
deriving the rows to check cost ~30 ms of a ~130 ms warm probe. What the check needs from a RECORD
(full paths, stated sizes, which rows get hashed) is kept in FILE.records (FILE: the hash cache),
packed (joined strings and int arrays, so loading it creates a handful of objects, not 100k), and
reused while the RECORD file is the same one: same path, size, mtime_ns AND ctime_ns. A program can
put a file's mtime back (`touch -r`, os.utime) but not its ctime, which every write and every utime
moves: any change to a RECORD has it read again.

Nothing here decides what is modified: every file a RECORD lists is still stat'ed on every run, and
its size (and, for hashed files, its mtime) compared. The cache only saves re-parsing a RECORD that
has not changed. marshal keeps it fast; the file carries the interpreter's version (marshal's format
is per version), and anything unexpected in it is ignored.
"""

import marshal
import os
import stat
import sys
from array import array

from probe_io import MAX_RECORD, read_regular
from targetenv_dists import read_record

MAGIC = "sparkdoctor records 2"
MAX_CACHE_BYTES = 256 << 20
UNSTATED = -2  # RECORD gives no size: nothing to compare
ODD = -1  # RECORD's size field is no size a file has ("012", "x"): never matches


def record_key(st):
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Prepared(object):
    """One RECORD's rows to check, packed; unpacked on use (paths and sizes always, the rest lazily)."""

    __slots__ = ("packed", "_rels", "_hashes")

    def __init__(self, packed):
        self.packed = packed  # (fulls, rels, hashes: "\0"-joined; sizes, candidates: array("q") bytes)
        self._rels = self._hashes = None

    @classmethod
    def pack(cls, fulls, rels, hashes, sizes, candidates):
        sizes = [UNSTATED if s is None else s for s in sizes]
        return cls(("\0".join(fulls), "\0".join(rels), "\0".join(hashes), array("q", sizes).tobytes(), array("q", candidates).tobytes()))

    def _split(self, text):
        return text.split("\0") if text else []

    def fulls(self):
        return self._split(self.packed[0])

    def sizes(self):
        """Stated sizes as ints (ODD never matches), None where RECORD states none."""
        sizes = array("q")
        sizes.frombytes(self.packed[3])
        out = sizes.tolist()
        if UNSTATED in out:
            out = [None if s == UNSTATED else s for s in out]
        return out

    def candidates(self):
        out = array("q")
        out.frombytes(self.packed[4])
        return out.tolist()

    @property
    def rels(self):
        if self._rels is None:
            self._rels = self._split(self.packed[1])
        return self._rels

    @property
    def hashes(self):
        if self._hashes is None:
            self._hashes = self._split(self.packed[2])
        return self._hashes


class RecordCache(object):
    """RECORD path -> (key, packed Prepared) for this interpreter; loaded once, saved when it changed."""

    def __init__(self, path, use_existing):
        self.path = path
        self.entries = {}
        self.fresh = {}
        self.changed = False
        if path and use_existing:
            self._load()

    def _load(self):
        try:
            data = marshal.loads(read_regular(self.path, MAX_CACHE_BYTES)[0])
        except FileNotFoundError:
            return
        except Exception:  # damaged, truncated, too large, another Python's format: read the RECORDs again
            self.changed = True
            return
        if isinstance(data, tuple) and len(data) == 3 and data[0] == MAGIC and data[1] == sys.version and isinstance(data[2], dict):
            self.entries = data[2]
        else:
            self.changed = True

    def lookup(self, path):
        """(Prepared, stat) for the RECORD at `path` when the cache holds this very file; else None."""
        entry = self.entries.get(path)
        if entry is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not (stat.S_ISREG(st.st_mode) and st.st_size <= MAX_RECORD):
            return None
        if not (isinstance(entry, tuple) and len(entry) == 2 and entry[0] == record_key(st)):
            return None
        packed = entry[1]
        if not (isinstance(packed, tuple) and len(packed) == 5 and all(isinstance(p, t) for p, t in zip(packed, (str, str, str, bytes, bytes)))):
            return None
        if len(packed[3]) % 8 or len(packed[4]) % 8:
            return None
        self.fresh[path] = entry
        return Prepared(packed), st

    def store(self, path, st, prepared):
        if st is not None:
            self.fresh[path] = (record_key(st), prepared.packed)
            self.changed = True

    def save(self):
        """Write the RECORDs seen this run (atomically); True if written."""
        if not self.path or not (self.changed or set(self.fresh) != set(self.entries)):
            return False
        folder = os.path.dirname(os.path.abspath(self.path))
        tmp = os.path.join(folder, ".%s.%d.tmp" % (os.path.basename(self.path), os.getpid()))
        try:
            os.makedirs(folder, exist_ok=True)
            with open(tmp, "wb") as fh:
                marshal.dump((MAGIC, sys.version, self.fresh), fh)
            os.replace(tmp, self.path)
            return True
        except (OSError, ValueError):
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False


class Records(object):
    """The tracked distributions' RECORDs. `get(key)` gives the parsed rows (None: no readable RECORD),
    parsing now a RECORD the cache answered for; `prepared(key)` gives the integrity check's inputs."""

    def __init__(self, dists, tracked, cache, prepare):
        self.dists, self.cache, self.prepare = dists, cache, prepare
        self.rows = {}
        self.ready = {}
        for key in tracked:
            dist = dists[key]
            path = dist.record_path()
            hit = self.cache.lookup(path) if path is not None else None
            if hit is not None:
                self.ready[key], dist.record_stat = hit
            else:
                self.rows[key] = read_record(dist)

    def __contains__(self, key):
        return key in self.rows or key in self.ready

    def get(self, key, default=None):
        if key in self.ready and key not in self.rows:
            self.rows[key] = read_record(self.dists[key])
        return self.rows.get(key, default)

    def prepared(self, key):
        """The check's inputs, or None when the dist has no readable RECORD."""
        if key in self.ready:
            return self.ready[key]
        rows = self.rows.get(key)
        if rows is None:
            return None
        dist = self.dists[key]
        ready = self.ready[key] = self.prepare(dist, rows)
        self.cache.store(dist.record_path(), dist.record_stat, ready)
        return ready
