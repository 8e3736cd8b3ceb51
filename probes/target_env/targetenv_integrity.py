"""Does each tracked package still hold the bytes its RECORD lists? Sizes for every file, hashes for
the files a person edits (patches, "mods") plus the compiler binaries whose identity matters.
"""

import array
import hashlib
import operator
import os
import stat
from stat import S_IFMT, S_IFREG

from probe_io import MAX_RECORD, parse_record, read_regular, record_size
from targetenv_base import (
    CUTLASS_IR_RE,
    HASHABLE_SUFFIXES,
    MAX_EDITABLE_BYTES,
    SKIPPED_PREFIXES,
    HashBudgetSpent,
)
from targetenv_hashes import hash_file
from targetenv_records import Prepared

_REGULAR = frozenset((S_IFREG,))


def prepare(dist, rows):
    """What the integrity check needs from a RECORD: the rows it checks (RECORD itself and generated
    files carry no hash), their full paths, the sizes RECORD states and which rows are hashed when
    their size allows. Computed once per RECORD version (targetenv_records keeps it)."""
    checked = [
        r for r in rows if r[1] and not r[0].endswith(".pyc") and "__pycache__" not in r[0] and not r[0].startswith(SKIPPED_PREFIXES)
    ]
    prefix = dist.location + os.sep
    rels = [r[0] for r in checked]
    fulls = [rel if rel[:1] == "/" else prefix + rel for rel in rels]
    candidates = [
        i
        for i, r in enumerate(checked)
        if r[1][:7] == "sha256="
        and (r[0].endswith(HASHABLE_SUFFIXES) or ("_cutlass_ir" in r[0] and CUTLASS_IR_RE.match(os.path.basename(r[0]))))
    ]
    return Prepared.pack(fulls, rels, [r[1] for r in checked], [_stated_size(r[2]) for r in checked], candidates)


def _stated_size(field):
    """RECORD's size field as the int a file of that size has: None when empty (nothing to compare),
    -1 when no file's size is written that way ("012", "x"), so it never matches, as before."""
    if not field:
        return None
    if field.isdigit() and field.isascii() and (field == "0" or field[0] != "0") and len(field) <= 20:
        return int(field)
    return -1


_SIZE = operator.attrgetter("st_size")
_MODE = operator.attrgetter("st_mode")


def check_integrity(dist, prepared, cache):
    """Compare the files on disk with the dist's RECORD (`prepared`: its rows to check, None when it
    has no readable RECORD): sizes always, hashes for editable files."""
    result = {"integrity": "no-record", "files_modified": [], "files_missing": [], "files_unreadable": [], "files_checked": 0}
    if prepared is None:
        if dist.record_error:  # there, but unreadable: unknown, never "no RECORD"
            result["integrity"] = "unchecked"
            result["files_unreadable"].append({"path": os.path.basename(dist.info_dir) + "/RECORD", "error": dist.record_error})
        elif dist.is_dist_info:  # pip wrote one; without it pip cannot uninstall (an .egg-info has none by design)
            result["no_record"] = dist.info_dir
        return result
    modified, missing, unreadable = result["files_modified"], result["files_missing"], result["files_unreadable"]
    fulls, sizes = prepared.fulls(), prepared.sizes()
    result["files_checked"] = len(fulls)
    # The hot path of a warm run is one stat per file (tens of thousands): keep it in C-level loops
    # (map, list equality, a set of file types) and fall back to the careful per-file loop only when
    # some file cannot be stat'ed or differs.
    try:
        stats = list(map(os.stat, fulls))
    except OSError:
        stats = [_stat_or_report(full, rel, modified, missing, unreadable) for full, rel in zip(fulls, prepared.rels)]
    if None not in stats and list(map(_SIZE, stats)) == sizes and set(map(S_IFMT, map(_MODE, stats))) <= _REGULAR:
        wrong = []
    else:
        wrong = [
            i
            for i, size, st in zip(range(len(fulls)), sizes, stats)
            if st is not None and (st.st_mode & 0o170000 != 0o100000 or (size is not None and size != st.st_size))
        ]
    rels = prepared.rels if wrong else None
    for i in wrong:
        st = stats[i]
        if st.st_mode & 0o170000 != 0o100000:
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            unreadable.append({"path": rels[i], "error": "%s where RECORD lists a file" % kind})
        modified.append(rels[i])
    wrong = set(wrong)
    # Editable files far larger than anything a person edits (a data blob named .json, a sparse
    # file) are checked by size only, like binaries; the compiler library is hashed for its identity.
    selected = [
        i
        for i in prepared.candidates()
        if stats[i] is not None
        and i not in wrong
        and (stats[i].st_size <= MAX_EDITABLE_BYTES or not fulls[i].endswith(HASHABLE_SUFFIXES))
    ]
    # The signature: RECORD's identity plus (index, size, mtime_ns) of every file to hash.
    stamp = [len(fulls)]
    for i in selected:
        st = stats[i]
        stamp += (i, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    rst = dist.record_stat
    head = "%s\t%d\t%d\t%d\n" % (dist.info_dir, rst.st_size, rst.st_mtime_ns, rst.st_ctime_ns) if rst else dist.info_dir + "\n"
    sig = hashlib.sha256(head.encode("utf-8", "surrogateescape") + array.array("q", stamp).tobytes()).hexdigest()
    bad = cache.verdict(dist.info_dir, sig)
    unverified = 0
    if bad is None:
        rels, hashes = prepared.rels, prepared.hashes
        to_hash = [(rels[i], fulls[i], stats[i], hashes[i][7:]) for i in selected]
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


def resolve_shared_files(dists, packages):
    """For modified files another installed dist also lists in its RECORD: whose bytes are they?

    Two wheels that ship the same path (a top-level build_backend.py, the 4.4/4.5 CuTe DSL builds
    libs-base and libs-cu13 with different warp/mma.py) overwrite each other; the loser then differs
    from its own RECORD although nobody edited it. A file whose bytes match the RECORD of another
    dist that lists the same path is that dist's file: it leaves files_modified for
    files_overwritten {path: "name version"} (the owner of the bytes). Every such path, owned or not,
    is listed in files_shared {path: [other dists listing it]}. Cheap: only runs when something is
    modified, and only searches the other RECORDs' raw bytes for those few paths.
    """
    wanted = {}  # (location, record path) -> keys of the packages it reads as modified in
    for key, pkg in packages.items():
        for rel in pkg.get("files_modified") or ():
            wanted.setdefault((pkg["location"], rel), []).append(key)
    if not wanted:
        return
    owners = {}  # (key, rel) -> "name version" of the dist whose RECORD the bytes match
    for other in sorted(dists.values(), key=lambda d: d.canonical):
        path = other.record_path()
        if path is None:
            continue
        try:
            raw, _ = read_regular(path, MAX_RECORD)
        except OSError:
            continue  # already reported when that dist was checked, if it is tracked
        for (location, rel), keys in wanted.items():
            if location != other.location or keys == [other.canonical]:
                continue
            row = _record_row(raw, rel)
            if row is None:
                continue
            label = "%s %s" % (other.name, other.version)
            owned = _bytes_match(os.path.join(location, rel), row)
            for key in keys:
                if key == other.canonical:
                    continue
                packages[key].setdefault("files_shared", {}).setdefault(rel, []).append(label)
                if owned and (key, rel) not in owners:
                    owners[(key, rel)] = label
    for (key, rel), label in owners.items():
        pkg = packages[key]
        pkg["files_modified"].remove(rel)
        pkg.setdefault("files_overwritten", {})[rel] = label
        if pkg.get("integrity") == "modified" and not pkg["files_modified"] and not pkg.get("files_missing"):
            pkg["integrity"] = "unchecked" if pkg.get("files_unreadable") or pkg.get("files_unverified") else "ok"


def _record_row(raw, rel):
    """The RECORD row (parsed) for path `rel` in a RECORD's raw bytes; None if it lists no such path."""
    needle = rel.encode("utf-8", "surrogateescape") + b","
    at = raw.find(needle)
    while at > 0 and raw[at - 1 : at] not in (b"\n", b"\r"):  # a whole path, not a suffix
        at = raw.find(needle, at + 1)
    if at < 0:
        return None
    end = raw.find(b"\n", at)
    try:
        rows = parse_record(raw[at : end if end >= 0 else len(raw)].decode("utf-8", "replace"))
    except ValueError:
        return None
    return rows[0] if rows and len(rows[0]) >= 3 else None


def _bytes_match(full, row):
    """Whether the file at `full` holds exactly the bytes RECORD row `row` describes (size first)."""
    algo, _, want = row[1].partition("=")
    size = record_size(row[2])
    if algo != "sha256" or not want or size is None or size > MAX_EDITABLE_BYTES:
        return False
    try:
        st = os.stat(full)
        if st.st_size != size:
            return False
        return hash_file(full, False)[0] == want
    except OSError:
        return False
