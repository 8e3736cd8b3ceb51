"""`sparkdoctor matrix update SOURCE`: a newer matrix without a new sparkdoctor release.

SOURCE is a git repository (URL or path; --commit pins the full commit id) or a tarball (.tar.gz,
.tgz or .tar; a path or an https URL; --sha256 pins it). Only `matrix/*.toml` (at the top, or under
the tarball's one top folder) is taken; nothing from the source is run: git only clones (hooks are
never run by a clone, the ext:: transport is refused), a tarball with a link, a device or a path out of
its folder is refused whole. The new files are validated by the same loader as every command (with
the bundled fixes and probes and the user's local overrides) before anything is replaced.

Layout under the user data dir (sparkdoctor.locations.data_home):
  matrix/versions/<pin>.<n>/ one installed matrix (+ SOURCE.json: where it came from and its file list);
                           each install goes into a fresh folder, so a folder in use is never changed
  matrix/current           symlink to the one in use (the loader prefers it to the bundled matrix)
  matrix/previous          symlink to the one before the last update or rollback (absent: bundled)
  matrix/local/            the user's own overrides: never touched here
Symlinks are replaced with os.replace, so a reader sees the old matrix or the new one, never half. An
update holds matrix/.lock (one update at a time), and removes the `.staging-*` folders a killed one left.
Fetching and its bounds are sparkdoctor.track.sources.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor.files import file_lock
from sparkdoctor.inputs import read_text
from sparkdoctor.locations import data_home, local_overrides
from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.matrix.loader import overlay
from sparkdoctor.track.sources import TARBALL, UpdateError, from_git, tarball

__all__ = ["UpdateError", "entry_diff", "rollback_matrix", "update_matrix"]


def _root() -> Path:
    return data_home() / "matrix"


# ---- installing ----------------------------------------------------------------------------------


def _active():
    try:
        return load()
    except MatrixError:
        return None


def entry_diff(old: object, new: object) -> list[str]:
    """Entries and stacks added, removed and changed (the fields that changed), by id."""

    def rows(m: Any) -> dict[str, dict]:
        if m is None:
            return {}
        return {item.id: {k: v for k, v in vars(item).items() if k != "file"} for item in [*m.entries, *m.stacks]}

    a, b = rows(old), rows(new)
    lines = [f"+ {i} (added)" for i in sorted(set(b) - set(a))]
    lines += [f"- {i} (removed)" for i in sorted(set(a) - set(b))]
    for i in sorted(set(a) & set(b)):
        changed = sorted(k for k in set(a[i]) | set(b[i]) if a[i].get(k) != b[i].get(k))
        if changed:
            lines.append(f"~ {i}: {', '.join(changed)}")
    return lines


def _swap(link: Path, target: Path | None) -> None:
    """Point `link` at `target` (None: remove it) atomically."""
    if target is None:
        link.unlink(missing_ok=True)
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)


def _pin_of(folder: Path | None) -> str | None:
    """The pin an installed folder holds (its SOURCE.json), None for none or the bundled matrix."""
    try:
        doc = json.loads(read_text(folder / "SOURCE.json", 1024 * 1024)) if folder else None
    except (OSError, ValueError):
        return None
    pins = list((doc.get("pin") or {}).values()) if isinstance(doc, dict) and isinstance(doc.get("pin"), dict) else []
    return str(pins[0]) if pins else None


@dataclass
class Updated:
    """`matrix update`'s document: what was installed or restored, its JSON keys as update_matrix builds them."""

    document: dict[str, Any]


def update_matrix(source: str, sha256: str | None = None, commit: str | None = None) -> dict[str, Any]:
    root = _root()
    versions = root / "versions"
    try:  # before anything is fetched: a data folder that cannot hold a matrix is one line, not a traceback
        versions.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UpdateError(f"{versions}: cannot make the matrix folder: {exc.strerror or exc}; nothing changed") from None
    if source.lower().endswith(TARBALL):
        if commit:
            raise UpdateError(f"{source}: a tarball is pinned with --sha256, not --commit")
        files, pin = tarball(source, sha256)
    else:
        if sha256 and os.path.isfile(source):  # not a folder or URL: no git repository
            raise UpdateError(f"{source}: a file whose name ends in none of {', '.join(TARBALL)}, so not a matrix tarball; "
                              "--sha256 pins a tarball (a git repository is pinned with --commit)")
        if sha256:
            raise UpdateError(f"{source}: a git source is pinned with --commit, not --sha256")
        files, pin = from_git(source, commit)
    if not files:
        raise UpdateError(f"{source}: no matrix/*.toml files in it; nothing changed")
    with file_lock(root / ".lock", "matrix update", root):  # one update or rollback at a time
        for folder in (*root.glob(".staging-*"), *versions.glob(".staging-*")):  # killed updates' (no live one owns it)
            shutil.rmtree(folder, ignore_errors=True)
        try:
            return _install(root, versions, source, files, pin, "sha256" if sha256 else "commit")
        except OSError as exc:  # a full or read-only disk: the staging folder went, the matrix in use is untouched
            raise UpdateError(f"{exc.filename or root}: cannot install the matrix: {exc.strerror or exc}") from None


def _install(root: Path, versions: Path, source: str, files: dict[str, bytes], pin: str, how: str) -> dict[str, object]:
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=versions))
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        (staging / "SOURCE.json").write_text(json.dumps({
            "source": source, "pin": {how: pin}, "files": sorted(files),
            "installed_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()}, indent=2) + "\n", encoding="utf-8")
        try:
            new = load(staging)
            local = local_overrides()
            if local.is_dir() and any(local.glob("*.toml")):
                overlay(new, load(local))
        except MatrixError as exc:
            raise UpdateError(f"the new matrix does not validate, nothing changed: {exc}") from None
        old = _active()
        dest = Path(tempfile.mkdtemp(prefix=f"{pin}.", dir=versions))  # a fresh folder: the one in use is never touched
        os.replace(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    current, previous = root / "current", root / "previous"
    before = current.resolve() if current.is_symlink() else None
    same = _pin_of(before) == pin
    if not same:  # reinstalling the pin in use keeps the way back as it was
        _swap(previous, before)
    _swap(current, dest)
    kept = {p.resolve() for p in (current, previous) if p.is_symlink()}
    for folder in versions.glob(f"{pin}*"):  # older installs of this pin that no link names
        if folder.resolve() not in kept and folder.name.split(".")[0] == pin:
            shutil.rmtree(folder, ignore_errors=True)
    back = previous.resolve() if previous.is_symlink() else None
    diff = entry_diff(old, load())
    return {"action": "update", "installed": str(dest), "pin": pin, "previous": str(back) if back else "bundled",
            "entries": len(new.entries), "stacks": len(new.stacks), "diff": diff,
            "message": f"installed the matrix from {source} ({pin[:12]}): {len(new.entries)} entries, {len(new.stacks)} stacks; "
                       f"{len(diff)} changed against the one in use before (`sparkdoctor matrix update --rollback` restores "
                       f"{'the one before it' if same else 'it'})"}


def rollback_matrix() -> dict[str, object]:
    root = _root()
    try:
        if not root.is_dir():
            raise UpdateError(f"{root}: no installed matrix to roll back (the bundled one is in use)")
        with file_lock(root / ".lock", "matrix update", root):
            return _rollback(root)
    except OSError as exc:  # another user's data folder: one line, nothing changed
        raise UpdateError(f"{exc.filename or root}: cannot roll back the matrix: {exc.strerror or exc}") from None


def _rollback(root: Path) -> dict[str, object]:
    current, previous = root / "current", root / "previous"
    if not current.is_symlink() and not previous.is_symlink():
        raise UpdateError(f"{root}: no installed matrix to roll back (the bundled one is in use)")
    old = _active()
    now = current.resolve() if current.is_symlink() else None
    back = previous.resolve() if previous.is_symlink() else None
    if back is not None and not back.is_dir():
        raise UpdateError(f"{previous}: the previous matrix is gone ({back}); nothing changed")
    _swap(current, back)
    _swap(previous, now)
    diff = entry_diff(old, _active())
    shown = str(back) if back else "the bundled matrix"
    again = now.name[:12] if now else "the bundled matrix"
    return {"action": "rollback", "installed": str(back) if back else "bundled", "previous": str(now) if now else "bundled", "diff": diff,
            "message": f"restored {shown}; {len(diff)} entries changed (rolling back again restores {again})"}
