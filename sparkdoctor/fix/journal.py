"""The journal: everything needed to undo one apply, written and marked complete BEFORE the first change.

state_dir()/journals/<id>/
    journal.json   versioned (JOURNAL_VERSION): target, installer, the plan, the package set before
                   (name, version, source), every edited file and every file of every touched dist
                   (path, sha256, where its copy is), the wheels saved for an offline reinstall
    copies/        byte copies of those files, brought out of the target through its file transport
                   (copies/target, copies/host: edited files; copies/dists: the touched dists' files)
    wheels/        the wheels of every dist the apply removes or replaces (pip download, before);
                   journal.json records each one's size and sha256 (verified before a rollback)
    outside.json   the size and mtime of every RECORD-listed file of every dist the plan does not
                   touch (its sha256 is in journal.json): what "only what the plan names" is judged by
    COMPLETE       written last: the sha256 of journal.json. Without it the journal is half-written:
                   reported, never trusted (and nothing was changed: changes start after it)
    applying, applied, rolling-back, rolled-back   state markers, each written atomically
                   (applying says which step runs; rolled-back lists each reverse)

A lock per target (fcntl, state_dir()/locks/) keeps two fixes off one target at once.
"""

from __future__ import annotations

import calendar
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor.errors import UsageError
from sparkdoctor.fix.interface import (
    FixError,
    JournalError,
    NoSuchJournal,
    UnchangedError,
)
from sparkdoctor.fix.journal_schema import validate
from sparkdoctor.inputs import read_bytes, read_text
from sparkdoctor.locations import state_dir
from sparkdoctor.targets.fileops import fsync_dir, sha256_of
from sparkdoctor.targets.files import FileError, FileTransport, LocalFiles
from sparkdoctor.unsettled import key_digest

JOURNAL_VERSION = 2
MAX_JOURNAL = 256 * 1024 * 1024  # journal.json and its outside-files record (one row a file of the target)
MAX_MARKER = 64 * 1024  # a state marker or COMPLETE: one small JSON object or a hash
COMPLETE, APPLYING, APPLIED, ROLLING_BACK, ROLLED_BACK = "COMPLETE", "applying", "applied", "rolling-back", "rolled-back"


def journals_dir() -> Path:
    return state_dir() / "journals"


def write_bytes(path: Path, data: bytes) -> None:
    """Replace path with data atomically (temp + fsync + rename); the mode is kept."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_HELD: dict[str, int] = {}
"""The target keys this process holds the lock of, and how deep: `fix --yes` takes its target's lock before it checks
and plans, and the apply takes it again."""


@contextmanager
def target_lock(target_key: str, label: str) -> Iterator[None]:
    """One fix or rollback per target (inventory.target_key) at a time; a second one is refused at once, not waited
    for: its plan was made from what the environment held before the first one changed it (pip itself takes no lock at
    all; apt refuses as well). The lock goes with the process that holds it, so it is never left behind. Taken again
    by the process that holds it, it is held until the outer hold ends."""
    if _HELD.get(target_key):
        _HELD[target_key] += 1
        try:
            yield
        finally:
            _HELD[target_key] -= 1
        return
    folder = state_dir() / "locks"
    path = folder / f"{key_digest(target_key)}.lock"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # an empty file: nothing to flush on a full disk
    except OSError as exc:
        raise UnchangedError(f"cannot take the lock {path}: {exc.strerror or exc}; nothing was changed") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            from sparkdoctor.files import lock_holder

            raise UnchangedError(f"another sparkdoctor fix or rollback is running on {label}: {lock_holder(fd)}; wait for it "
                                 "to end, then run this again (a plan is made from what the environment holds)") from None
        _HELD[target_key] = 1
        try:
            yield
        finally:
            del _HELD[target_key]
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@dataclass
class Journal:
    path: Path
    data: dict[str, Any]
    damaged: bool = False  # COMPLETE is there but journal.json is not what it says (history only)
    freed: int = 0  # bytes removed by prune
    pruned_status: str = ""  # its status when prune removed it (once gone, status() would read "half-written")

    @property
    def id(self) -> str:
        return self.path.name

    def has(self, marker: str) -> bool:
        return (self.path / marker).exists()

    def mark(self, marker: str, detail: Mapping[str, object] | None = None) -> None:
        body = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **(detail or {})}
        write_bytes(self.path / marker, (json.dumps(body, indent=1) + "\n").encode())

    def marker(self, marker: str) -> dict[str, object] | None:
        try:  # a regular file only, never waited on (a FIFO in its place hung fix), a small one
            found: dict[str, object] = json.loads(read_text(self.path / marker, MAX_MARKER))
            return found
        except (OSError, ValueError, RecursionError):
            return None

    def status(self) -> str:
        if not self.has(COMPLETE):
            # no COMPLETE but a state marker: the apply started, then the marker was lost (deleted,
            # a damaged disk). It is not trusted, and it must not say that nothing was changed.
            return "damaged" if any(self.has(m) for m in (APPLYING, APPLIED, ROLLING_BACK, ROLLED_BACK)) else "half-written"
        for m in (ROLLED_BACK, ROLLING_BACK, APPLIED, APPLYING):
            if self.has(m):
                return {APPLYING: "interrupted", APPLIED: "applied", ROLLING_BACK: "rollback interrupted", ROLLED_BACK: "rolled back"}[m]
        return "planned"

    def size(self) -> int:
        """Bytes on disk (the saved wheels are most of it)."""
        total = 0
        for root, _dirs, names in os.walk(self.path):
            for n in names:
                with suppress(OSError):
                    total += os.lstat(os.path.join(root, n)).st_size
        return total

    def settled(self) -> bool:
        """True when nothing is left to do from it: applied, rolled back, or never started."""
        return self.status() in ("applied", "rolled back", "planned", "half-written")

    def outside(self) -> dict[str, list[int] | None] | None:
        """path -> [size, mtime_ns] of the files outside the plan before the apply (None: not recorded)."""
        meta = self.data.get("outside")
        if not meta:
            return None
        try:
            body = read_bytes(self.path / meta["file"], MAX_JOURNAL)
        except OSError as exc:
            raise JournalError(f"{self.path}/{meta['file']}: cannot read: {exc.strerror or exc}") from None
        if sha256_bytes(body) != meta["sha256"]:
            raise JournalError(f"{self.path}/{meta['file']} does not match journal.json: the journal is damaged; not trusted")
        return json.loads(body)


def new_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def create(header: Mapping[str, object], files: list[tuple[str, str]], dist_files: dict[str, list[str]],
           wheels: Callable[[Path], dict[str, str | None]], boundary: Callable[[str], None],
           sides: dict[str, FileTransport] | None = None, outside: Mapping[str, object] | None = None) -> Journal:
    """Write a complete journal, or raise FixError and leave none (a half one is removed when it can be).

    `files` are (path, side) of the files the plan edits; `dist_files` the files of every touched
    dist (always in the target). `sides` maps "target" and "host" to their file transports: the
    copies come OUT of the target through its transport, the journal itself stays on this machine."""
    sides = sides or {"target": LocalFiles(), "host": LocalFiles()}
    root = journals_dir()
    path = root / new_id()
    try:
        (path / "copies").mkdir(parents=True)
        os.chmod(path, 0o700)  # its copies keep no file's mode: a 0600 file of the target is this user's alone here too
        (path / "wheels").mkdir()
        file_rows = []
        for side in sorted({side for _p, side in files}):
            names = [p for p, s in files if s == side]
            rows = _copy_out(sides[side], names, path, f"copies/{side}", with_hash=True)
            file_rows += [{"path": n, "side": side, "existed": rows[n] is not None, **(rows[n] or {})} for n in names]
        boundary("journal-files")
        unique = list(dict.fromkeys(p for paths in dist_files.values() for p in paths))
        copied = _copy_out(sides["target"], unique, path, "copies/dists", with_hash=False)
        dist_rows = {dist: [{"path": p, "copy": None, **(copied[p] or {})} for p in paths] for dist, paths in dist_files.items()}
        boundary("journal-dists")
        saved = wheels(path / "wheels")
        wheel_files = {f: {"size": (path / "wheels" / f).stat().st_size, "sha256": sha256_of(path / "wheels" / f)} for f in saved.values() if f}
        boundary("journal-wheels")
        outside_meta: dict[str, str] | None = None
        if outside is not None:
            obody = json.dumps(outside, sort_keys=True).encode()
            write_bytes(path / "outside.json", obody)
            outside_meta = {"file": "outside.json", "sha256": sha256_bytes(obody)}
        data = {"journal_version": JOURNAL_VERSION, "id": path.name, **header, "files": file_rows, "dist_files": dist_rows,
                "wheels": saved, "wheel_files": wheel_files, "outside": outside_meta}
        body = (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()
        write_bytes(path / "journal.json", body)
        boundary("journal-written")
        write_bytes(path / COMPLETE, (sha256_bytes(body) + "\n").encode())
    except BaseException as exc:  # Ctrl-C or SIGTERM too: nothing was changed, so no half journal is kept
        shutil.rmtree(path, ignore_errors=True)
        if not isinstance(exc, (OSError, FileError)):
            raise
        why = str(exc) if isinstance(exc, FileError) else (exc.strerror or str(exc))
        raise UnchangedError(f"the journal could not be written in {root}: {why}; nothing was changed") from None
    return Journal(path, data)


def _copy_out(files: FileTransport, names: list[str], journal: Path, folder: str, with_hash: bool) -> dict[str, dict[str, Any] | None]:
    """path -> {copy, mode[, sha256]} for each regular file copied into journal/folder; None for the others."""
    dest = journal / folder
    dest.mkdir(parents=True, exist_ok=True)
    got = files.export(names, dest)
    out: dict[str, dict[str, Any] | None] = {}
    for name in names:
        row = got.get(name)
        if row is None:
            out[name] = None
            continue
        entry: dict[str, object] = {"copy": f"{folder}/{row['name']}", "mode": row["mode"] & 0o7777}
        if with_hash:
            entry["sha256"] = sha256_of(dest / row["name"])
        out[name] = entry
    return out


def sha256_file(path: Path) -> str | None:
    """A file's sha256; None when it cannot be read."""
    try:
        return sha256_of(path)
    except OSError:
        return None


def load(ident: str | None) -> Journal:
    """A journal by id or path (default: the newest). A half-written one is returned, never trusted:
    its data is empty and status() says so."""
    root = journals_dir()
    if ident:
        path = Path(ident) if os.sep in ident else root / ident
    else:  # the last apply: the newest journal that changed the target (a newer planned or half-written one did not)
        found = history()
        if not found:
            raise NoSuchJournal(f"no fix journals in {root}: nothing to roll back")
        changed = [j for j in found if j.damaged or j.status() not in ("planned", "half-written")]
        path = (changed or found)[0].path
    if not path.is_dir() or not is_journal(path):
        raise NoSuchJournal(f"{path}: no such fix journal (see sparkdoctor fix --history)")
    journal = Journal(path, {})
    if not journal.has(COMPLETE):
        return journal
    try:  # regular files only, never waited on, bounded (sparkdoctor.inputs)
        body = read_bytes(path / "journal.json", MAX_JOURNAL)
        want = read_bytes(path / COMPLETE, MAX_MARKER).decode("utf-8", "replace").strip()  # not UTF-8: matches no hash
    except OSError as exc:  # damaged: exit 4, as a journal that does not match its marker
        raise JournalError(f"{path}: cannot read the journal: {exc.strerror or exc}; not trusted") from None
    if sha256_bytes(body) != want:
        raise JournalError(f"{path}/journal.json does not match its COMPLETE marker: the journal is damaged; not trusted")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise JournalError(f"{path}/journal.json is not JSON ({str(exc)[:80]}): the journal is damaged; nothing was done from it") from None
    journal.data = validate(data, f"{path}/journal.json")
    return journal


def is_journal(path: Path) -> bool:
    """A folder `create` began: it makes copies/ and wheels/ first, writes journal.json, then COMPLETE; a state
    marker may outlive a lost COMPLETE. A folder with none of that (a mistyped path, /tmp) holds no journal at all,
    so it is not reported as a half-written one whose apply "never started" (exit 0)."""
    if any(os.path.lexists(path / name) for name in ("journal.json", COMPLETE, APPLYING, APPLIED, ROLLING_BACK, ROLLED_BACK)):
        return True
    return (path / "copies").is_dir() and (path / "wheels").is_dir()


def history() -> list[Journal]:
    """Every journal, newest first (ids start with the UTC time)."""
    root = journals_dir()
    try:
        if not root.is_dir():
            return []
        folders = sorted((q for q in root.iterdir() if q.is_dir()), key=lambda q: q.name, reverse=True)
    except OSError as exc:  # another user's state folder: whether a fix is unfinished is unknown, never "none"
        raise UsageError(f"{root}: cannot read the fix journals ({exc.strerror or type(exc).__name__}); "
                         "set SPARKDOCTOR_STATE_DIR to a folder of yours") from None
    out = []
    for p in folders:
        j = Journal(p, {})
        if j.has(COMPLETE):
            try:
                j = load(str(p))
            except FixError:
                j.damaged = True
        out.append(j)
    return out


def prune(keep: int | None, older_than_s: float | None,
          lock_for: Callable[[Mapping[str, object]], tuple[str, str]]) -> tuple[list[Journal], list[Journal]]:
    """Remove settled journals beyond the newest `keep` and/or older than `older_than_s` seconds;
    (removed, kept because unsettled). A journal of an apply or rollback that did not finish, or a
    damaged one after its apply started, is never removed: it is what settles the target. Nor is one whose target's
    lock (`lock_for(its target record)`) another fix or rollback holds: a journal an apply has just written reads as
    "planned" until the apply marks it, and an applied one as "applied" until a rollback running marks it."""
    now = time.time()
    removed, spared = [], []
    for i, j in enumerate(history()):
        old = older_than_s is not None and now - _created(j) > older_than_s
        beyond = keep is not None and i >= keep
        if not ((beyond and older_than_s is None) or (old and keep is None) or (beyond and old)):
            continue
        if j.damaged or not j.settled():
            spared.append(j)
            continue
        target = j.data.get("target")
        try:
            with target_lock(*lock_for(target)) if isinstance(target, dict) else nullcontext():
                if not j.settled():  # marked while the lock was taken
                    spared.append(j)
                    continue
                _remove(j)
        except UnchangedError:  # a fix or rollback runs on its target now
            spared.append(j)
            continue
        removed.append(j)
    return removed, spared


def _remove(j: Journal) -> None:
    j.pruned_status = j.status()
    if j.path.is_symlink():  # a journal kept elsewhere: only its link goes, nothing is removed through it
        j.path.unlink()
    else:
        j.freed = j.size()
        shutil.rmtree(j.path)


def _created(j: Journal) -> float:
    """When the journal was made: its id starts with the UTC time."""
    try:
        return float(calendar.timegm(time.strptime(j.id[:15], "%Y%m%d-%H%M%S")))
    except ValueError:
        return j.path.stat().st_mtime


def unfinished_for(target_key: str, key_of: Callable[[Mapping[str, object]], str]) -> Journal | None:
    """The newest journal of this target whose apply or rollback stopped half-way (killed, power loss)."""
    for j in history():
        if j.data and key_of(j.data.get("target", {})) == target_key and j.status() in ("interrupted", "rollback interrupted"):
            return j
    return None

