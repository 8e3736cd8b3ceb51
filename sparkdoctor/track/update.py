"""`sparkdoctor matrix update SOURCE`: a newer matrix without a new sparkdoctor release.

SOURCE is a git repository (URL or path; --commit pins the full commit id) or a tarball (.tar.gz,
.tgz or .tar; a path or an https URL; --sha256 pins it). Only `matrix/*.toml` (at the top, or under
the tarball's one top folder) is taken; nothing from the source is run: git only clones (hooks are
never run by a clone, the ext:: transport is refused), a tarball with a link, a device or a path out of
its folder is refused whole. The new files are validated by the same loader as every command (with
the bundled fixes and probes and the user's local overrides) before anything is replaced.

Layout under the user data dir (sparkdoctor.locations.data_home):
  matrix/versions/<pin>/   one installed matrix per pin (+ SOURCE.json: where it came from)
  matrix/current           symlink to the one in use (the loader prefers it to the bundled matrix)
  matrix/previous          symlink to the one before the last update or rollback (absent: bundled)
  matrix/local/            the user's own overrides: never touched here
Symlinks are replaced with os.replace, so a reader sees the old matrix or the new one, never half.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from sparkdoctor import proc
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_USAGE

GIT_TIMEOUT = 300.0
MAX_TARBALL = 64 * 1024 * 1024
MAX_FILE = 4 * 1024 * 1024
_TARBALL = (".tar.gz", ".tgz", ".tar")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class UpdateError(SparkdoctorError):
    """An update refused or failed; one line; nothing was changed (exit 2)."""

    exit_code = EXIT_USAGE
    code = "update-refused"


def _root() -> Path:
    from sparkdoctor.locations import data_home

    return data_home() / "matrix"


# ---- fetching ------------------------------------------------------------------------------------


def _matrix_name(path: str) -> str | None:
    """The file name when `path` is matrix/NAME.toml or TOP/matrix/NAME.toml, else None."""
    parts = PurePosixPath(path).parts
    if len(parts) >= 2 and parts[-2] == "matrix" and parts[-1].endswith(".toml") and len(parts) <= 3:
        return parts[-1]
    return None


def _from_tarball(data: bytes, label: str) -> dict[str, bytes]:
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
        members = tar.getmembers()
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise UpdateError(f"{label}: not a readable tarball ({exc}); nothing changed") from None
    files: dict[str, bytes] = {}
    with tar:
        for m in members:
            parts = PurePosixPath(m.name).parts
            if m.name.startswith("/") or ".." in parts:
                raise UpdateError(f"{label}: member {m.name!r} points outside the archive; refusing the whole tarball")
            if not (m.isfile() or m.isdir()):
                raise UpdateError(f"{label}: member {m.name!r} is a link or device; refusing the whole tarball")
            name = _matrix_name(m.name) if m.isfile() else None
            if name is None:
                continue
            if m.size > MAX_FILE:
                raise UpdateError(f"{label}: {m.name} is {m.size} bytes, over {MAX_FILE}")
            try:
                fh = tar.extractfile(m)
                files[name] = fh.read() if fh else b""
            except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
                raise UpdateError(f"{label}: {m.name} cannot be read ({exc}); nothing changed") from None
    return files


def _tarball(source: str, sha256: str | None) -> tuple[dict[str, bytes], str]:
    if not sha256 or not _SHA256.fullmatch(sha256.lower()):
        raise UpdateError(f"{source}: a tarball must be pinned: give --sha256 with its 64 hex digits")
    if re.match(r"https?://", source):
        from sparkdoctor.released.http import Client, RemoteError

        buf = io.BytesIO()
        try:
            Client().download(source, buf, MAX_TARBALL)
        except RemoteError as exc:
            raise UpdateError(str(exc)) from None
        data = buf.getvalue()
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise UpdateError(f"{source}: cannot read: {exc.strerror or exc}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != sha256.lower():
        raise UpdateError(f"{source}: sha256 is {got}, not the pinned {sha256.lower()}; nothing changed")
    return _from_tarball(data, source), got


def _git(args: list[str], label: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh", "GIT_CONFIG_NOSYSTEM": "1"}
    result = proc.run(["git", "-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never", *args], timeout=GIT_TIMEOUT, env=env)
    if not result.ok:
        last = next((x.strip() for x in reversed((result.stderr or result.stdout or "").splitlines()) if x.strip()), result.describe_failure())
        raise UpdateError(f"{label}: git {args[0]} failed: {last}")
    return result.stdout


def _from_git(source: str, commit: str | None) -> tuple[dict[str, bytes], str]:
    if not commit or not _COMMIT.fullmatch(commit.lower()):
        raise UpdateError(f"{source}: a git source must be pinned: give --commit with the full commit id (40 hex digits)")
    commit = commit.lower()
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-matrix-git-") as tmp:
        repo = str(Path(tmp) / "repo")
        _git(["clone", "--quiet", "--bare", "--no-hardlinks", "--", source, repo], source)  # a source is never an option
        found = proc.run(["git", "-C", repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], timeout=GIT_TIMEOUT)
        if not found.ok or found.stdout.strip() != commit:
            raise UpdateError(f"{source}: commit {commit} is not in the repository")
        listing = _git(["-C", repo, "ls-tree", "-r", "-z", commit, "--", "matrix/"], source)
        files: dict[str, bytes] = {}
        for row in filter(None, listing.split("\0")):
            meta, path = row.split("\t", 1)
            mode, kind, blob = meta.split()
            name = _matrix_name(path)
            if name is None:
                continue
            if kind != "blob" or mode not in ("100644", "100755"):
                raise UpdateError(f"{source}: {path} at {commit[:12]} is a link or submodule (mode {mode}); refusing it")
            result = proc.run(["git", "-C", repo, "cat-file", "blob", blob], timeout=GIT_TIMEOUT)
            if not result.ok:
                raise UpdateError(f"{source}: cannot read {path}: {result.describe_failure()}")
            files[name] = result.stdout.encode("utf-8")
    return files, commit


# ---- installing ----------------------------------------------------------------------------------


def _active():
    from sparkdoctor.matrix import MatrixError, load

    try:
        return load()
    except MatrixError:
        return None


def entry_diff(old: Any, new: Any) -> list[str]:
    """Entries and stacks added, removed and changed (the fields that changed), by id."""

    def rows(m: Any) -> dict[str, dict]:
        if m is None:
            return {}
        out = {}
        for item in [*m.entries, *m.stacks]:
            d = {k: v for k, v in vars(item).items() if k != "file"}
            out[item.id] = d
        return out

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


def update_matrix(source: str, sha256: str | None = None, commit: str | None = None) -> dict[str, Any]:
    if source.lower().endswith(_TARBALL):
        if commit:
            raise UpdateError(f"{source}: a tarball is pinned with --sha256, not --commit")
        files, pin = _tarball(source, sha256)
    else:
        if sha256:
            raise UpdateError(f"{source}: a git source is pinned with --commit, not --sha256")
        files, pin = _from_git(source, commit)
    if not files:
        raise UpdateError(f"{source}: no matrix/*.toml files in it; nothing changed")
    from sparkdoctor.locations import local_overrides
    from sparkdoctor.matrix import MatrixError, load
    from sparkdoctor.matrix.loader import overlay

    root = _root()
    (root / "versions").mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        try:
            new = load(staging)
            local = local_overrides()
            if local.is_dir() and any(local.glob("*.toml")):
                overlay(new, load(local))
        except MatrixError as exc:
            raise UpdateError(f"the new matrix does not validate, nothing changed: {exc}") from None
        old = _active()
        (staging / "SOURCE.json").write_text(json.dumps({
            "source": source, "pin": {"sha256" if sha256 else "commit": pin}, "files": sorted(files),
            "installed_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()}, indent=2) + "\n", encoding="utf-8")
        dest = root / "versions" / pin
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    current = root / "current"
    before = current.resolve() if current.is_symlink() else None
    _swap(root / "previous", before)
    _swap(current, dest)
    diff = entry_diff(old, load())
    return {"action": "update", "installed": str(dest), "pin": pin, "previous": str(before) if before else "bundled",
            "entries": len(new.entries), "stacks": len(new.stacks), "diff": diff,
            "message": f"installed the matrix from {source} ({pin[:12]}): {len(new.entries)} entries, {len(new.stacks)} stacks; "
                       f"{len(diff)} changed against the one in use before (`sparkdoctor matrix update --rollback` restores it)"}


def rollback_matrix() -> dict[str, Any]:
    root = _root()
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
