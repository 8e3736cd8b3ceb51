"""Only what the plan names is touched: every RECORD-listed file of every dist the plan does NOT
touch is stat'ed before the apply (size, mtime) and again after it and after a rollback.

A `__pycache__` file is derived data, not a file of the release: pip lists it in RECORD without a
hash, and its bytes depend on who compiled it (the path the interpreter was reached by is in it, and
marshal's output depends on the compiling process), so its size is no evidence of anything. One
whose source is unchanged is never a loss: if it is gone it is compiled again from that source; if
it was rewritten it is left as it is. Any other file that changed outside the plan is taken back from
that dist's released wheel (exact version, downloaded, the member checked against the wheel's RECORD
hash and the size recorded before). What cannot be put back is named, and the apply is undone.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import tempfile
import zipfile
from pathlib import Path

from sparkdoctor.fix import inventory as inv_mod
from sparkdoctor.fix.interface import FixError, Installer
from sparkdoctor.targets.files import FileError, transport_of
from sparkdoctor.targets.local import Target, TargetError, parse_json_probe

SCRIPT = Path(__file__).with_name("target_stat.py")
TIMEOUT = 300.0


def _run(target: Target, args: list[str]) -> dict:
    try:
        return parse_json_probe(target, SCRIPT, target.run_script(SCRIPT, args, TIMEOUT))
    except TargetError as exc:
        raise FixError(f"cannot read the files outside the plan: {exc}") from None


def snapshot(target: Target, skip: list[str]) -> dict[str, list[int] | None]:
    """path -> [size, mtime_ns] (None: listed but missing) of every dist's files but the skipped dists'."""
    data = _run(target, ["stat", *[a for n in skip for a in ("--skip", n)]]).get("stat")
    if not isinstance(data, dict):
        raise FixError("cannot read the files outside the plan: the target's answer has no 'stat'")
    return data


def moved(target: Target, before: dict[str, list[int] | None], skip: list[str]) -> list[str]:
    """The files that differ now from `before`, but byte code of a listed source (never a loss, compiled again when
    gone, offline)."""
    return [p for p in changed(before, snapshot(target, skip)) if not (_is_pyc(p) and _has_source(p, before))]


def _is_pyc(path: str) -> bool:
    return path.endswith(".pyc") and "/__pycache__/" in path


def changed(before: dict[str, list[int] | None], now: dict[str, list[int] | None]) -> list[str]:
    """Files there before that are gone or another size now; a non-.pyc file rewritten (mtime) too.
    A file that appeared (a .pyc written by an import) is not a loss and is left alone."""
    out = []
    for path, was in before.items():
        if was is None:
            continue
        got = now.get(path)
        if got is None or got[0] != was[0] or (not _is_pyc(path) and got[1] != was[1]):
            out.append(path)
    return sorted(out)


def _has_source(pyc: str, before: dict[str, list[int] | None]) -> bool:
    """A byte-code file whose source is listed (RECORD) and was there before: derived data, judged by its
    source. A .pyc without one (a sourceless dist) is the dist's own data."""
    try:
        src = importlib.util.source_from_cache(pyc)  # PEP 3147 names: pkg/__pycache__/mod.TAG[.opt-N].pyc -> pkg/mod.py
    except (ValueError, NotImplementedError):
        return False
    return before.get(src) is not None


def restore(target: Target, before: dict[str, list[int] | None], skip: list[str],
            installer: Installer | None = None) -> tuple[list[str], list[str]]:
    """Put back what changed outside the plan where that can be done; (compiled or restored, not restorable).
    Byte code of a listed source is never a loss while it is there (its source is judged on its own);
    one that is gone is compiled again, after any source was put back."""
    now = snapshot(target, skip)
    diff = changed(before, now)
    derived = {p for p in diff if _is_pyc(p) and _has_source(p, before)}
    gone = [p for p in sorted(derived) if now.get(p) is None]
    others = [p for p in diff if p not in derived]
    if not gone and not others:
        return [], []  # nothing changed, or only rewritten byte code: left as it is
    restored = _from_wheels(target, installer, others, before) if others and installer is not None else []
    if gone:
        done = _run(target, ["compile", *gone])
        restored += [p for p in done.get("compiled") or [] if isinstance(p, str)]
    now = snapshot(target, skip)
    # a .pyc compiled again is back when it is there; a file written again from its wheel when it has its size
    back = {p for p in restored if now.get(p) is not None and (p in derived or _size(now.get(p)) == _size(before.get(p)))}
    lost = [p for p in changed(before, now) if p not in back and not (p in derived and now.get(p) is not None)]
    return sorted(back), lost


def _from_wheels(target: Target, installer: Installer, paths: list[str], before: dict[str, list[int] | None]) -> list[str]:
    """Files of registry dists written again from the dist's own released wheel."""
    inv = inv_mod.read(target)
    owner: dict[str, tuple[inv_mod.Dist, str]] = {}
    for dist in inv.dists.values():
        if not dist.from_registry():
            continue
        for rel, full in zip(dist.files, dist.paths(), strict=False):
            if str(full) in paths and not rel.startswith(".."):
                owner[str(full)] = (dist, rel)
    if not owner:
        return []
    wanted = sorted({f"{d.key}=={d.version}" for d, _ in owner.values()})
    done: list[str] = []
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-outside-") as tmp:
        try:
            got = installer.download(wanted, tmp)
        except FixError:
            return []
        items: list[tuple[Path, str, int | None]] = []
        for path, (dist, rel) in sorted(owner.items()):
            wheel = got.get(dist.key)
            found = _member(Path(tmp) / wheel, rel) if wheel else None
            if found is None or len(found[0]) != _size(before.get(path)):
                continue
            src = Path(tmp) / f"member-{len(items)}"
            src.write_bytes(found[0])
            items.append((src, path, found[1]))
            done.append(path)
        try:
            transport_of(target).import_files(items)
        except FileError as exc:
            raise FixError(str(exc)) from None
    return done


def _size(row: list[int] | None) -> int | None:
    return row[0] if row else None


def _member(wheel: Path, rel: str) -> tuple[bytes, int] | None:
    """A wheel's file and its mode, if the wheel's RECORD hash says it is that file's released bytes."""
    try:
        with zipfile.ZipFile(wheel) as z:
            data = z.read(rel)
            mode = (z.getinfo(rel).external_attr >> 16) & 0o777 or 0o644
            record = next((n for n in z.namelist() if n.endswith(".dist-info/RECORD")), None)
            rows = z.read(record).decode("utf-8").splitlines() if record else []
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
        return None
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return (data, mode) if any(r.split(",")[:2] == [rel, f"sha256={digest}"] for r in rows) else None

