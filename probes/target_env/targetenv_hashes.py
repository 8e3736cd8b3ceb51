"""File hashes as RECORD writes them, cached by (path, size, mtime_ns, ctime_ns) so a warm run reads almost
nothing, and bounded by a time budget so a slow disk costs unverified files, not the whole probe.
"""

import base64
import hashlib
import json
import os
import time

from probe_io import OddFile, open_regular, read_regular, record_size
from targetenv_base import (
    CUDA_RELEASE_MARK,
    CUDA_RELEASE_RE,
    CUTLASS_IR_RE,
    MAX_IDENTITY_BYTES,
    HashBudgetSpent,
    error,
)

CACHE_FORMAT = 4


TABLE_MAGIC = "sparkdoctor hash table 4"


MAX_CACHE_BYTES = 256 << 20  # our own files; a cache past this is not ours


CHUNK = 1 << 20


class HashCache(object):
    """sha256 of files keyed by (absolute path, size, mtime_ns, ctime_ns); never trusted past a changed stat.

    ctime is in the key because a program can put a file's mtime back (`touch -r`, os.utime, some
    patch tools) but not its ctime: every write and every utime moves it. So a same-size edit with
    the mtime restored is still read again. (A chmod or a copy moves it too: one harmless re-hash.)

    Two files, both written atomically (temp file + os.replace):
      FILE        JSON: per distribution a signature of its hashed files' (size, mtime_ns, ctime_ns) and the
                  verdict computed for it, plus the few big binaries hashed for their identity
                  (the CuTe DSL compiler). A warm run reads only this small file.
      FILE.files  text: per distribution, one line per hashed file "path, size, mtime_ns, ctime_ns, sha256".
                  Read only when a distribution's signature changed, and then only that
                  distribution's section is parsed; its entries are checked against the stat.
    Any mix of old and new files is still correct: verdicts are tied to their signature and table
    entries to their (size, mtime_ns, ctime_ns).
    """

    def __init__(self, path, use_existing, budget=None):
        self.path = path
        self.deadline = time.monotonic() + budget if budget is not None else None
        self.budget_spent = False
        self.table_path = path + ".files" if path else None
        self.use_existing = bool(path) and use_existing
        self.files = {}  # abs path -> [size, mtime_ns, b64 digest, cuda release or None]
        self.verdicts = {}  # info dir -> {"sig": hex, "modified": [record paths]}
        self.sections = None  # info dir -> raw table text, loaded on first need
        self.fresh_sections = {}  # info dir -> table dict rebuilt this run
        self.loaded = False
        self.note = None if use_existing or not path else "cache ignored (--no-cache)"
        self.index_changed = False
        self.hashed = 0
        self.hashed_bytes = 0
        self.seen_dists = set()
        self.seen_files = set()
        if self.use_existing:
            self._load_index()

    def _load_index(self):
        try:
            data = json.loads(read_regular(self.path, MAX_CACHE_BYTES)[0].decode("utf-8", "surrogateescape"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            self.note = "ignored unreadable cache %s: %s" % (self.path, exc)
            return
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
            self.note = "ignored cache %s: not format %d" % (self.path, CACHE_FORMAT)
            return
        files, verdicts = data.get("files"), data.get("verdicts")
        if not isinstance(files, dict) or not isinstance(verdicts, dict):
            self.note = "ignored cache %s: wrong shape" % self.path
            return
        # an entry of another shape (another version's, a hand edit) is a miss: hashed again, never a verdict
        self.files = {k: v for k, v in files.items() if isinstance(v, list) and len(v) == 5 and isinstance(v[2], str)}
        self.verdicts = {
            k: v for k, v in verdicts.items() if isinstance(v, dict) and isinstance(v.get("sig"), str)
            and isinstance(v.get("modified"), list) and all(isinstance(m, str) for m in v["modified"])
        }
        self.loaded = True

    def _load_sections(self):
        self.sections = {}
        if not (self.use_existing and self.loaded):
            return  # a table without a valid index is not trusted either
        try:
            text = read_regular(self.table_path, MAX_CACHE_BYTES)[0].decode("utf-8", "surrogateescape")
        except OSError:
            return
        if not text.startswith(TABLE_MAGIC):
            return
        for section in text.split("\n@")[1:]:
            head, _, body = section.partition("\n")
            self.sections[head] = body

    def verdict(self, key, sig):
        self.seen_dists.add(key)
        cached = self.verdicts.get(key)
        if cached is not None and cached["sig"] == sig:
            return list(cached["modified"])
        return None

    def store_verdict(self, key, sig, modified):
        self.verdicts[key] = {"sig": sig, "modified": modified}
        self.index_changed = True

    def table_for(self, key):
        """The per-file hash table of one distribution (parsed now, kept for saving)."""
        if key not in self.fresh_sections:
            if self.sections is None:
                self._load_sections()
            table = {}
            for line in self.sections.get(key, "").split("\n"):
                parts = line.split("\t")
                if len(parts) != 5:
                    continue
                size, mtime, ctime = record_size(parts[1]), record_size(parts[2]), record_size(parts[3])
                if size is not None and mtime is not None and ctime is not None:
                    table[parts[0]] = [size, mtime, parts[4], None, ctime]
            self.fresh_sections[key] = table
        return self.fresh_sections[key]

    def digest(self, path, st, table=None, force=False):
        """(b64 digest, cuda release) of path whose stat is st; read the file only if not cached.

        Raises HashBudgetSpent instead of reading once the budget is used up (also in the middle of
        a file), unless forced."""
        store = self.files if table is None else table
        if table is None:
            self.seen_files.add(path)
        entry = store.get(path)
        if entry is not None and entry[0] == st.st_size and entry[1] == st.st_mtime_ns and entry[4] == st.st_ctime_ns:
            return entry[2], entry[3]
        if not force and self.deadline is not None and time.monotonic() > self.deadline:
            self.budget_spent = True
            raise HashBudgetSpent()
        try:
            digest, release = hash_file(path, CUTLASS_IR_RE.match(os.path.basename(path)) is not None, None if force else self.deadline)
        except HashBudgetSpent:  # the budget ran out in the middle of this file
            self.budget_spent = True
            raise
        self.hashed += 1
        self.hashed_bytes += st.st_size
        store[path] = [st.st_size, st.st_mtime_ns, digest, release, st.st_ctime_ns]
        if table is None:
            self.index_changed = True
        return digest, release

    def prefetch(self, items):
        """Hash several large files at once. hashlib and file reads release the GIL, so the big
        compiler libraries (~190 MB each) hash on all cores; cached entries are skipped, and a file
        that cannot be read is left for digest() to report."""
        todo = []
        for path, st in items:
            entry = self.files.get(path)
            if entry is None or entry[0] != st.st_size or entry[1] != st.st_mtime_ns or entry[4] != st.st_ctime_ns:
                todo.append((path, st))
        if len(todo) < 2:
            return
        from concurrent.futures import ThreadPoolExecutor

        def work(item):
            try:
                return hash_file(item[0], True)
            except OSError:
                return None

        with ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 2)) as pool:
            results = list(pool.map(work, todo))
        for (path, st), result in zip(todo, results):
            if result is not None:
                self.files[path] = [st.st_size, st.st_mtime_ns, result[0], result[1], st.st_ctime_ns]
                self.hashed += 1
                self.hashed_bytes += st.st_size
                self.index_changed = True

    def save(self):
        """Write what changed; returns True if anything was written."""
        if not self.path:
            return False
        wrote = False
        gone = set(self.verdicts) - self.seen_dists
        if self.fresh_sections:
            if self.sections is None:
                self._load_sections()
            keep = dict((k, v) for k, v in self.sections.items() if k in self.seen_dists)
            for key, table in self.fresh_sections.items():
                keep[key] = "\n".join("%s\t%d\t%d\t%d\t%s" % (p, v[0], v[1], v[4], v[2]) for p, v in sorted(table.items()))
            body = TABLE_MAGIC + "".join("\n@%s\n%s" % (k, keep[k]) for k in sorted(keep))
            wrote = self._write(self.table_path, body) or wrote
        stale_files = set(self.files) - self.seen_files
        if self.index_changed or gone or stale_files or not self.loaded:
            for key in gone:
                del self.verdicts[key]
            for key in stale_files:
                del self.files[key]
            body = json.dumps({"format": CACHE_FORMAT, "files": self.files, "verdicts": self.verdicts}, separators=(",", ":"))
            wrote = self._write(self.path, body) or wrote
        return wrote

    def _write(self, path, text):
        folder = os.path.dirname(os.path.abspath(path))
        tmp = os.path.join(folder, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
        try:
            os.makedirs(folder, exist_ok=True)
            with open(tmp, "wb") as fh:
                fh.write(text.encode("utf-8", "surrogateescape"))
            os.replace(tmp, path)
            return True
        except OSError as exc:
            error("cannot write hash cache %s: %s" % (path, exc.strerror or exc))
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False


def hash_file(path, scan_release, deadline=None):
    """sha256 as RECORD writes it (urlsafe base64, no padding); optionally the embedded CUDA release.

    Only a regular file up to MAX_IDENTITY_BYTES is read (OddFile otherwise); past `deadline`
    (time.monotonic()) it stops between chunks with HashBudgetSpent."""
    h = hashlib.sha256()
    release = None
    tail = b""
    fh, st = open_regular(path)
    with fh:
        if st.st_size > MAX_IDENTITY_BYTES:
            raise OddFile("too large to hash (%d bytes)" % st.st_size)
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise HashBudgetSpent()
            chunk = fh.read(CHUNK)
            if not chunk:
                break
            h.update(chunk)
            if scan_release and release is None:
                window = tail + chunk
                at = window.find(CUDA_RELEASE_MARK)
                if at >= 0:
                    match = CUDA_RELEASE_RE.match(window, at)
                    if match:
                        release = "%s.%s" % (match.group(1).decode(), match.group(2).decode())
                tail = chunk[-64:]
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii"), release
