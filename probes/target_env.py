"""Everything sparkdoctor needs to know about a target's Python environment, in one pass.

Runs under the TARGET's interpreter: standard library only, Python 3.8+, prints ONE JSON object.

    python -B probes/target_env.py --cache FILE [--no-cache] [--track NAME ...]

What it reports (see main()): the interpreter and host, every installed distribution, the RECORD
integrity of the serving-stack packages, which CuTe DSL compiler build's bytes are really on disk,
the relevant environment variables (secrets redacted), ptxas binaries shipped inside site-packages,
the pip config files pip would read, and every partial failure as an error line.

Speed matters (it runs on every `sparkdoctor check`), so it never imports what it inspects, never
imports importlib.metadata or email (slow to import; distributions are found the way
importlib.metadata's path finder finds them: *.dist-info / *.egg-info in each sys.path folder),
hashes only files a person can edit plus the compiler binaries whose identity matters, and caches
hashes by (path, size, mtime_ns).
"""

import array
import base64
import csv
import hashlib
import json
import os
import re
import stat
import sys
import time

# Mirrors sparkdoctor.facts.TRACKED_PREFIXES (a probe cannot import sparkdoctor).
TRACKED_PREFIXES = (
    "torch",
    "triton",
    "vllm",
    "flashinfer",
    "nvidia-cutlass-dsl",
    "cuda-python",
    "cuda-bindings",
    "quack-kernels",
    "b12x",
)
# Files a person edits by hand (patches, "mods"); binaries are checked by size only.
HASHABLE_SUFFIXES = (
    ".py", ".pyi", ".json", ".toml", ".yaml", ".yml", ".cfg", ".ini", ".txt", ".sh", ".cuh", ".h", ".cu", ".jinja",
)
# Not checked at all: torch's C++ SDK (9k+ headers, 60% of torch's RECORD) is there to build
# extensions against; patching it changes no serving behaviour, and stat-ing it costs a third of a
# warm run.
SKIPPED_PREFIXES = ("torch/include/", "torch/share/cmake/")
# The CuTe DSL compiler (MLIR/LLVM, libNVVM and the PTX compiler in one extension module).
CUTLASS_IR_RE = re.compile(r"^_cutlass_ir(\.cu(\d+))?\..*\.so$")
# The PTX compiler inside it announces its CUDA release like ptxas --version does.
CUDA_RELEASE_MARK = b"Cuda compilation tools, release "
CUDA_RELEASE_RE = re.compile(rb"Cuda compilation tools, release (\d+)\.(\d+)")
ENV_NAMES = frozenset(
    {
        "TORCH_CUDA_ARCH_LIST",
        "FLASHINFER_CUDA_ARCH_LIST",
        "CUDA_HOME",
        "CUDA_VISIBLE_DEVICES",
        "PIP_CONSTRAINT",
        "PYTORCH_CUDA_ALLOC_CONF",
        "FLA_USE_TMA",
    }
)
ENV_PREFIXES = ("CUTE_DSL_", "TRITON_", "VLLM_")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
CACHE_FORMAT = 3
TABLE_MAGIC = "sparkdoctor hash table 3"
MAX_CONFIG_TEXT = 65536
CHUNK = 1 << 20

ERRORS = []


class HashBudgetSpent(Exception):
    """The run's time budget for hashing is used up; what is left waits for the next run."""


def error(message):
    ERRORS.append({"collector": "target_env", "error": message})


def canonical(name):
    """PEP 503 normalised name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_tracked(name, extra):
    if name in extra:
        return True
    return name == "torch" or any(name == p or name.startswith(p + "-") for p in TRACKED_PREFIXES)


# ---- interpreter and host --------------------------------------------------------------------------


def describe_target():
    base_prefix = getattr(sys, "base_prefix", sys.prefix)
    return {
        "version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "prefix": sys.prefix,
        "base_prefix": base_prefix,
        "is_venv": sys.prefix != base_prefix,
        "executable": sys.executable,
    }


def describe_host():
    uname = os.uname()
    host = {"os": None, "machine": uname.machine, "kernel": uname.release}
    try:
        with open("/etc/os-release", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("PRETTY_NAME="):
                    host["os"] = line.split("=", 1)[1].strip().strip("\"'")
                    break
    except OSError as exc:
        error("cannot read /etc/os-release: %s" % (exc.strerror or exc))
    return host


# ---- distributions -----------------------------------------------------------------------------------


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
    """sys.path folders in order, without the probe's own folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    seen = set()
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder == here or folder in seen or not os.path.isdir(folder):
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


# ---- hashing with a cache ----------------------------------------------------------------------------


class HashCache(object):
    """sha256 of files keyed by (absolute path, size, mtime_ns); never trusted past a changed stat.

    Two files, both written atomically (temp file + os.replace):
      FILE        JSON: per distribution a signature of its hashed files' (size, mtime_ns) and the
                  verdict computed for it, plus the few big binaries hashed for their identity
                  (the CuTe DSL compiler). A warm run reads only this small file.
      FILE.files  text: per distribution, one line per hashed file "path, size, mtime_ns, sha256".
                  Read only when a distribution's signature changed, and then only that
                  distribution's section is parsed; its entries are checked against the stat.
    Any mix of old and new files is still correct: verdicts are tied to their signature and table
    entries to their (size, mtime_ns).
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
            with open(self.path, "rb") as fh:
                data = json.loads(fh.read().decode("utf-8", "surrogateescape"))
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
        self.files = {k: v for k, v in files.items() if isinstance(v, list) and len(v) == 4}
        self.verdicts = {
            k: v for k, v in verdicts.items() if isinstance(v, dict) and isinstance(v.get("sig"), str) and isinstance(v.get("modified"), list)
        }
        self.loaded = True

    def _load_sections(self):
        self.sections = {}
        if not (self.use_existing and self.loaded):
            return  # a table without a valid index is not trusted either
        try:
            with open(self.table_path, "rb") as fh:
                text = fh.read().decode("utf-8", "surrogateescape")
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
                if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
                    table[parts[0]] = [int(parts[1]), int(parts[2]), parts[3], None]
            self.fresh_sections[key] = table
        return self.fresh_sections[key]

    def digest(self, path, st, table=None, force=False):
        """(b64 digest, cuda release) of path whose stat is st; read the file only if not cached.

        Raises HashBudgetSpent instead of reading once the budget is used up, unless forced."""
        store = self.files if table is None else table
        if table is None:
            self.seen_files.add(path)
        entry = store.get(path)
        if entry is not None and entry[0] == st.st_size and entry[1] == st.st_mtime_ns:
            return entry[2], entry[3]
        if not force and self.deadline is not None and time.monotonic() > self.deadline:
            self.budget_spent = True
            raise HashBudgetSpent()
        digest, release = hash_file(path, CUTLASS_IR_RE.match(os.path.basename(path)) is not None)
        self.hashed += 1
        self.hashed_bytes += st.st_size
        store[path] = [st.st_size, st.st_mtime_ns, digest, release]
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
            if entry is None or entry[0] != st.st_size or entry[1] != st.st_mtime_ns:
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
                self.files[path] = [st.st_size, st.st_mtime_ns, result[0], result[1]]
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
                keep[key] = "\n".join("%s\t%d\t%d\t%s" % (p, v[0], v[1], v[2]) for p, v in sorted(table.items()))
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


def hash_file(path, scan_release):
    """sha256 as RECORD writes it (urlsafe base64, no padding); optionally the embedded CUDA release."""
    h = hashlib.sha256()
    release = None
    tail = b""
    with open(path, "rb") as fh:
        while True:
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


# ---- integrity ---------------------------------------------------------------------------------------


def check_integrity(dist, rows, cache):
    """Compare the files on disk with the dist's RECORD: sizes always, hashes for editable files."""
    result = {"integrity": "no-record", "files_modified": [], "files_missing": [], "files_unreadable": [], "files_checked": 0}
    if rows is None:
        return result
    modified, missing, unreadable = result["files_modified"], result["files_missing"], result["files_unreadable"]
    # RECORD itself and generated files carry no hash.
    rows = [
        r
        for r in rows
        if r[1] and not r[0].endswith(".pyc") and "__pycache__" not in r[0] and not r[0].startswith(SKIPPED_PREFIXES)
    ]
    result["files_checked"] = len(rows)
    prefix = dist.location + os.sep
    fulls = [r[0] if r[0][:1] == "/" else prefix + r[0] for r in rows]
    # The hot path of a warm run is one stat per file (tens of thousands): keep it in C-level loops
    # and fall back to the careful per-file loop only when some file cannot be stat'ed.
    try:
        stats = list(map(os.stat, fulls))
    except OSError:
        stats = [_stat_or_report(full, row[0], modified, missing, unreadable) for full, row in zip(fulls, rows)]
    wrong = [
        i
        for i, row, st in zip(range(len(rows)), rows, stats)
        if st is not None and (st.st_mode & 0o170000 != 0o100000 or (row[2] and row[2] != str(st.st_size)))
    ]
    for i in wrong:
        st = stats[i]
        if st.st_mode & 0o170000 != 0o100000:
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            unreadable.append({"path": rows[i][0], "error": "%s where RECORD lists a file" % kind})
        modified.append(rows[i][0])
    wrong = set(wrong)
    hashable = HASHABLE_SUFFIXES
    selected = [
        i
        for i, row in enumerate(rows)
        if (row[0].endswith(hashable) or ("_cutlass_ir" in row[0] and CUTLASS_IR_RE.match(os.path.basename(row[0]))))
        and row[1][:7] == "sha256="
        and stats[i] is not None
        and i not in wrong
    ]
    # The signature: RECORD's identity plus (index, size, mtime_ns) of every file to hash.
    stamp = [len(rows)]
    for i in selected:
        st = stats[i]
        stamp += (i, st.st_size, st.st_mtime_ns)
    rst = dist.record_stat
    head = "%s\t%d\t%d\n" % (dist.info_dir, rst.st_size, rst.st_mtime_ns) if rst else dist.info_dir + "\n"
    sig = hashlib.sha256(head.encode("utf-8", "surrogateescape") + array.array("q", stamp).tobytes()).hexdigest()
    bad = cache.verdict(dist.info_dir, sig)
    unverified = 0
    if bad is None:
        to_hash = [(rows[i][0], fulls[i], stats[i], rows[i][1][7:]) for i in selected]
        bad, unverified = _hash_all(dist, to_hash, cache, unreadable, sig)
    modified.extend(bad)
    if unverified:
        result["files_unverified"] = unverified
    if modified or missing:
        result["integrity"] = "modified"
    elif unreadable or unverified:
        result["integrity"] = "unchecked"
    else:
        result["integrity"] = "ok"
    return result


def _stat_or_report(full, rel, modified, missing, unreadable):
    """stat, or None after filing the file under missing / modified / unreadable."""
    try:
        return os.stat(full)
    except (FileNotFoundError, NotADirectoryError):
        if os.path.islink(full):
            unreadable.append({"path": rel, "error": "broken symlink"})
            modified.append(rel)
        else:
            missing.append(rel)
    except OSError as exc:
        unreadable.append({"path": rel, "error": exc.strerror or str(exc)})
    return None


def _hash_all(dist, to_hash, cache, unreadable, sig):
    """(record paths whose content differs from RECORD, how many could not be hashed within the
    budget); hashes only files whose stat changed."""
    table = cache.table_for(dist.info_dir)
    seen = {}
    bad = []
    unverified = 0
    complete = True
    for rel, full, st, expected in to_hash:
        try:
            if CUTLASS_IR_RE.match(os.path.basename(rel)):
                digest, _ = cache.digest(full, st)  # shared with the cutedsl build check
            else:
                digest, _ = cache.digest(full, st, table)
                seen[full] = table[full]
        except HashBudgetSpent:
            unverified += 1  # cached files further on still count; only misses are skipped
            complete = False
            continue
        except OSError as exc:
            unreadable.append({"path": rel, "error": exc.strerror or str(exc)})
            complete = False
            continue
        if digest != expected:
            bad.append(rel)
    table.clear()
    table.update(seen)  # drop entries of files no longer in RECORD
    if complete:
        cache.store_verdict(dist.info_dir, sig, bad)
    return bad, unverified


def mark_shared_files(dists, packages):
    """For modified files another installed dist also lists in its RECORD: say which.

    Two wheels that ship the same path (a top-level build_backend.py, the 4.4/4.5 CuTe DSL builds)
    overwrite each other; the loser then reads as "modified" although nobody edited it, and
    reinstalling it would clobber the winner. Cheap: only runs when something is modified, and
    only searches the other RECORDs' raw bytes for those few paths.
    """
    wanted = {}  # (location, record path) -> package key
    for key, pkg in packages.items():
        for rel in pkg.get("files_modified") or ():
            wanted[(pkg["location"], rel)] = key
    if not wanted:
        return
    for other in dists.values():
        path = other.record_path()
        if path is None:
            continue
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        for (location, rel), key in wanted.items():
            if key == other.canonical or location != other.location:
                continue
            needle = rel.encode("utf-8", "surrogateescape") + b","
            at = raw.find(needle)
            while at > 0 and raw[at - 1 : at] not in (b"\n", b"\r"):  # a whole path, not a suffix
                at = raw.find(needle, at + 1)
            if at >= 0:
                packages[key].setdefault("files_shared", {}).setdefault(rel, []).append("%s %s" % (other.name, other.version))


# ---- CuTe DSL: which compiler build is really on disk --------------------------------------------------


def cutedsl_build(dists, records, cache):
    libs = sorted((d for d in dists.values() if d.canonical.startswith("nvidia-cutlass-dsl-libs-")), key=lambda d: d.canonical)
    umbrella = dists.get("nvidia-cutlass-dsl")
    if umbrella is None and not libs:
        return {
            "active_build": None,
            "installed_builds": [],
            "bundled_cuda": None,
            "sha256": None,
            "evidence": "nvidia-cutlass-dsl is not installed",
            "files": [],
        }
    builds = [d.canonical[len("nvidia-cutlass-dsl-"):] for d in libs]
    # abs path -> {record path, recorded digests by build}
    recorded = {}
    for dist in libs:
        rows = records.get(dist.canonical)
        if rows is None:
            rows = read_record(dist)
        for row in rows or []:
            if len(row) < 3 or not CUTLASS_IR_RE.match(os.path.basename(row[0])):
                continue
            full = os.path.normpath(os.path.join(dist.location, row[0]))
            info = recorded.setdefault(full, {"rel": row[0], "by": []})
            algo, _, digest = row[1].partition("=")
            info["by"].append((dist, row[2], digest if algo == "sha256" else None))
    # A flavoured compiler file nobody records still loads (the loader lists the folder).
    for folder in sorted({os.path.dirname(p) for p in recorded}):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            full = os.path.join(folder, name)
            if CUTLASS_IR_RE.match(name) and full not in recorded:
                recorded[full] = {"rel": full, "by": []}
    stats = []
    for full in sorted(recorded):
        try:
            stats.append((full, os.stat(full)))
        except OSError:
            pass  # reported per file below
    cache.prefetch(stats)
    files = []
    for full in sorted(recorded):
        info = recorded[full]
        entry = {"path": full, "size": None, "matches": [], "cuda_release": None, "flavor": None}
        flavor = CUTLASS_IR_RE.match(os.path.basename(full)).group(2)
        entry["flavor"] = int(flavor) if flavor else None
        try:
            st = os.stat(full)
        except OSError as exc:
            entry["error"] = exc.strerror or str(exc)
            files.append(entry)
            continue
        entry["size"] = st.st_size
        try:
            digest, release = cache.digest(full, st, force=True)  # the build check never waits
        except OSError as exc:
            entry["error"] = exc.strerror or str(exc)
            files.append(entry)
            continue
        entry["cuda_release"] = release
        entry["sha256"] = base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
        for dist, size, want in info["by"]:
            if want and want == digest and (not size or not size.isdigit() or int(size) == st.st_size):
                entry["matches"].append("%s %s" % (dist.canonical, dist.version))
        files.append(entry)
    active, evidence, chosen = _choose_build(files)
    return {
        "active_build": active,
        "installed_builds": builds,
        "bundled_cuda": chosen.get("cuda_release") if chosen else None,
        "sha256": chosen.get("sha256") if chosen else None,
        "evidence": evidence,
        "files": files,
    }


def _build_of(match):
    """'nvidia-cutlass-dsl-libs-cu13 4.5.0' -> 'libs-cu13'."""
    return match.split(" ")[0][len("nvidia-cutlass-dsl-"):]


def _choose_build(files):
    present = [f for f in files if f.get("size") is not None]
    if not present:
        if files:
            return "unknown", "no CuTe DSL compiler file is on disk (%s missing)" % os.path.basename(files[0]["path"]), None
        return "unknown", "no installed nvidia-cutlass-dsl-libs-* RECORD lists a _cutlass_ir*.so", None
    flavored = [f for f in present if f["flavor"] is not None]
    if not flavored:
        # 4.4/4.5 layout: every build writes the same file; the last install wins, whatever pip lists.
        chosen = present[0]
        name = os.path.basename(chosen["path"])
        if not chosen["matches"]:
            return "unknown", "%s (%d bytes) matches the RECORD of no installed build" % (name, chosen["size"]), chosen
        builds = sorted({_build_of(m) for m in chosen["matches"]})
        active = builds[0] if len(builds) == 1 else "unknown"
        return active, "%s matches the RECORD of %s" % (name, ", ".join(chosen["matches"])), chosen
    # >= 4.6 layout: one _cutlass_ir.cu<N>.*.so per toolkit flavour, chosen at import by the driver.
    by_flavor = {}
    for f in flavored:
        by_flavor[f["flavor"]] = f
    described = []
    for flavor in sorted(by_flavor):
        f = by_flavor[flavor]
        described.append("cu%d %s" % (flavor, "intact (%s)" % f["matches"][0] if f["matches"] else "matches no RECORD"))
    driver = _driver_cuda_version() if len(by_flavor) > 1 else None
    if len(by_flavor) == 1:
        flavor = next(iter(by_flavor))
        why = "only cu%d is on disk" % flavor
    elif driver is not None:
        fit = [v for v in by_flavor if driver // 1000 >= v]
        if not fit:
            return "unknown", "%s; the CUDA driver (%d) supports none of them, import fails" % ("; ".join(described), driver), None
        flavor = max(fit)
        why = "the driver reports CUDA %d.%d, so the loader picks cu%d" % (driver // 1000, (driver % 1000) // 10, flavor)
    else:
        flavor = max(by_flavor)
        why = "no CUDA driver here, so the loader picks the newest (cu%d); a driver older than CUDA %d would pick an older one" % (
            flavor,
            flavor,
        )
    chosen = by_flavor[flavor]
    evidence = "flavoured layout (a build per CUDA major, chosen at import by the driver): %s; %s" % ("; ".join(described), why)
    if not chosen["matches"]:
        return "unknown", evidence, chosen
    builds = sorted({_build_of(m) for m in chosen["matches"]})
    return (builds[0] if len(builds) == 1 else "unknown"), evidence, chosen


def _driver_cuda_version():
    """cuDriverGetVersion, as the CuTe DSL loader asks it (no cuInit, no context); None without a driver."""
    try:
        import ctypes

        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            return version.value
    except (OSError, AttributeError):
        return None
    return None


# ---- environment, ptxas, pip config --------------------------------------------------------------------


def relevant_env():
    found = {}
    for name, value in os.environ.items():
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES):
            upper = name.upper()
            found[name] = "<redacted>" if any(word in upper for word in SECRET_WORDS) else value
    return dict(sorted(found.items()))


def ptxas_candidates(dists, records):
    found = []
    for dist in sorted(dists.values(), key=lambda d: d.canonical):
        if dist.canonical.startswith("nvidia-cuda-nvcc"):
            source = "pip"
        elif "triton" in dist.canonical:
            source = "triton"
        else:
            continue
        rows = records.get(dist.canonical)
        if rows is None:
            rows = read_record(dist, only="ptxas") or []
        for row in rows:
            rel = row[0]
            base = os.path.basename(rel)
            if base not in ("ptxas", "ptxas-blackwell") or "/bin/" not in rel:
                continue
            if source == "triton" and "backends/nvidia/bin/" not in rel:
                continue
            full = os.path.normpath(os.path.join(dist.location, rel))
            if not os.path.isfile(full):
                continue
            found.append(
                {
                    "path": full,
                    "source": source,
                    "package": dist.name,
                    "version_of_package": dist.version,
                    "binary": base,
                    "executable": os.access(full, os.X_OK),
                }
            )
    return found


def pip_config_files():
    """The config files pip would read for this interpreter, in pip's order, that exist."""
    env_file = os.environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []  # pip reads no config files at all then
    home = os.path.expanduser("~")
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    candidates = []
    if env_file:
        candidates.append(("env", env_file))
    for folder in xdg_dirs.split(os.pathsep):
        if folder:
            candidates.append(("global", os.path.join(folder, "pip", "pip.conf")))
    candidates.append(("global", "/etc/pip.conf"))
    if not (env_file and os.path.exists(env_file)):
        xdg_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        candidates.append(("user", os.path.join(home, ".pip", "pip.conf")))
        candidates.append(("user", os.path.join(xdg_home, "pip", "pip.conf")))
    candidates.append(("site", os.path.join(sys.prefix, "pip.conf")))
    found = []
    seen = set()
    for kind, path in candidates:
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read(MAX_CONFIG_TEXT)
        except OSError as exc:
            error("cannot read pip config %s: %s" % (path, exc.strerror or exc))
            continue
        found.append({"path": path, "kind": kind, "text": text})
    return found


# ---- main ------------------------------------------------------------------------------------------------


def parse_args(argv):
    cache_path, use_cache, extra, budget = None, True, set(), None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--cache" and i + 1 < len(argv):
            cache_path = argv[i + 1]
            i += 1
        elif arg.startswith("--cache="):
            cache_path = arg.split("=", 1)[1]
        elif arg == "--hash-budget" and i + 1 < len(argv):
            budget = float(argv[i + 1])
            i += 1
        elif arg == "--no-cache":
            use_cache = False
        elif arg == "--track" and i + 1 < len(argv):
            extra.add(canonical(argv[i + 1]))
            i += 1
        elif arg.startswith("--track="):
            extra.add(canonical(arg.split("=", 1)[1]))
        else:
            raise SystemExit("target_env.py: unknown argument %r" % arg)
        i += 1
    return cache_path, use_cache, extra, budget


def main(argv):
    started = time.perf_counter()
    cache_path, use_cache, extra, budget = parse_args(argv)
    cache = HashCache(cache_path, use_cache, budget)
    out = {"target": describe_target(), "host": describe_host()}
    dists = find_distributions()
    tracked = [key for key in sorted(dists) if is_tracked(key, extra)]
    records = dict((key, read_record(dists[key])) for key in tracked)
    # First, so that a hash budget never leaves the build unknown (its hashes are then reused).
    try:
        out["cutedsl"] = cutedsl_build(dists, records, cache)
    except Exception as exc:
        error("cutedsl build check failed: %s: %s" % (type(exc).__name__, exc))
        out["cutedsl"] = None
    packages = {}
    for key in sorted(dists):
        dist = dists[key]
        pkg = {"name": dist.name, "version": dist.version, "location": dist.location}
        if key in records:
            try:
                pkg.update(check_integrity(dist, records[key], cache))
            except Exception as exc:  # one odd package must not hide the others
                error("%s: integrity check failed: %s: %s" % (dist.name, type(exc).__name__, exc))
                pkg["integrity"] = "unchecked"
            origin = direct_url(dist)
            if origin is not None:
                pkg["direct_url"] = origin
        if key == "torch":
            pkg.update(torch_build(dist))
        packages[key] = pkg
    if cache.budget_spent:
        waiting = sorted(k for k, p in packages.items() if p.get("files_unverified"))
        error(
            "hashing stopped at its %gs budget; not yet verified: %s (the next run goes on from the hash cache)"
            % (budget, ", ".join(waiting))
        )
    try:
        mark_shared_files(dists, packages)
    except Exception as exc:
        error("shared-file check failed: %s: %s" % (type(exc).__name__, exc))
    out["packages"] = packages
    out["env"] = relevant_env()
    out["ptxas_candidates"] = ptxas_candidates(dists, records)
    out["pip_config_files"] = pip_config_files()
    out["path_env"] = os.environ.get("PATH", "")
    saved = cache.save()
    out["cache"] = {
        "path": cache_path,
        "loaded": cache.loaded,
        "hashed_files": cache.hashed,
        "hashed_bytes": cache.hashed_bytes,
        "saved": saved,
        "note": cache.note,
    }
    out["seconds"] = round(time.perf_counter() - started, 3)
    out["errors"] = ERRORS
    sys.stdout.write(json.dumps(out, separators=(",", ":")))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
