"""Where `matrix update` gets a matrix from: a pinned tarball (a path or an http(s) URL) or a pinned git
commit. Only `matrix/*.toml` is taken, nothing from the source is run, and every read is bounded:

  * a local tarball is read through sparkdoctor.inputs (a regular file only, MAX_TARBALL at most: a FIFO is
    refused, never waited on); a remote one through the bounded HTTP client (released/http.py);
  * a tarball is read as a stream, one member at a time, and refused whole at MAX_MEMBERS members or
    MAX_EXPANDED bytes expanded (a gzip bomb is stopped while it expands, not after), at a link, a device
    or a path out of its folder, and when its matrix files sit under more than one top folder;
  * a git clone is killed once its folder passes MAX_CLONE bytes (a source's other files would fill the disk);
  * a git blob is sized before it is read, and one over MAX_FILE is refused (never cut short); its bytes are
    checked against the blob's id, so what is installed is what was committed.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import io
import lzma
import os
import re
import shutil
import tarfile
import threading
from pathlib import PurePosixPath

from sparkdoctor import proc
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_USAGE
from sparkdoctor.inputs import read_bytes
from sparkdoctor.locations import scratch
from sparkdoctor.released.http import Client, RemoteError

GIT_TIMEOUT = 300.0
GIT_SCRATCH = "sparkdoctor-matrix-git-"
MAX_TARBALL = 64 * 1024 * 1024  # the tarball as fetched (compressed)
MAX_EXPANDED = 256 * 1024 * 1024  # what it expands to, headers included
MAX_MEMBERS = 20_000
MAX_FILE = 4 * 1024 * 1024  # one matrix file
MAX_CLONE = 256 * 1024 * 1024  # a git source as cloned (a matrix repository is a few MB; this one's is 8 MB packed)
TARBALL = (".tar.gz", ".tgz", ".tar")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class UpdateError(SparkdoctorError):
    """An update refused or failed; one line; nothing was changed (exit 2)."""

    exit_code = EXIT_USAGE
    code = "update-refused"


def _matrix_file(path: str) -> tuple[str, str] | None:
    """(top folder or "", file name) when `path` is matrix/NAME.toml or TOP/matrix/NAME.toml, else None."""
    parts = PurePosixPath(path).parts
    if len(parts) >= 2 and parts[-2] == "matrix" and parts[-1].endswith(".toml") and len(parts) <= 3:
        return (parts[0] if len(parts) == 3 else "", parts[-1])
    return None


class _Expanded(io.RawIOBase):
    """The decompressed tarball, refused once it passes MAX_EXPANDED bytes (read by tarfile as a stream)."""

    def __init__(self, inner, label: str):
        self.inner, self.label, self.total = inner, label, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size if size is not None and size >= 0 else 1 << 20)
        self.total += len(data)
        if self.total > MAX_EXPANDED:
            raise UpdateError(f"{self.label}: expands past {MAX_EXPANDED // (1024 * 1024)} MiB; refusing the whole tarball")
        return data


def _decompressed(data: bytes, label: str) -> _Expanded:
    raw = io.BytesIO(data)
    inner: io.BufferedIOBase
    if data[:2] == b"\x1f\x8b":
        inner = gzip.GzipFile(fileobj=raw, mode="rb")
    elif data[:3] == b"BZh":
        inner = bz2.BZ2File(raw)
    elif data[:6] == b"\xfd7zXZ\x00":
        inner = lzma.LZMAFile(raw)
    else:
        inner = raw
    return _Expanded(inner, label)


def from_tarball(data: bytes, label: str) -> dict[str, bytes]:
    """The matrix files of a tarball's bytes, read member by member with every bound applied."""
    files: dict[str, bytes] = {}
    tops: set[str] = set()
    try:
        with tarfile.open(fileobj=_decompressed(data, label), mode="r|") as tar:
            for count, m in enumerate(tar, 1):
                if count > MAX_MEMBERS:
                    raise UpdateError(f"{label}: more than {MAX_MEMBERS:,} members; refusing the whole tarball")
                if m.offset_data + m.size > MAX_EXPANDED:
                    raise UpdateError(f"{label}: member {m.name!r} reaches past {MAX_EXPANDED // (1024 * 1024)} MiB expanded; refusing the whole tarball")
                parts = PurePosixPath(m.name).parts
                if m.name.startswith("/") or ".." in parts:
                    raise UpdateError(f"{label}: member {m.name!r} points outside the archive; refusing the whole tarball")
                if not (m.isfile() or m.isdir()):
                    raise UpdateError(f"{label}: member {m.name!r} is a link or device; refusing the whole tarball")
                found = _matrix_file(m.name) if m.isfile() else None
                if found is None:
                    continue
                top, name = found
                tops.add(top)
                if len(tops) > 1:
                    shown = ", ".join(f"{t}/matrix/" if t else "matrix/" for t in sorted(tops))
                    raise UpdateError(f"{label}: matrix files under more than one top folder ({shown}); refusing the ambiguous tarball")
                if m.size > MAX_FILE:
                    raise UpdateError(f"{label}: {m.name} is {m.size} bytes, over {MAX_FILE}")
                fh = tar.extractfile(m)
                files[name] = fh.read() if fh else b""
    except (tarfile.TarError, EOFError, OSError, ValueError, lzma.LZMAError) as exc:
        raise UpdateError(f"{label}: not a readable tarball ({exc}); nothing changed") from None
    return files


def tarball(source: str, sha256: str | None) -> tuple[dict[str, bytes], str]:
    if not sha256 or not _SHA256.fullmatch(sha256.lower()):
        raise UpdateError(f"{source}: a tarball must be pinned: give --sha256 with its 64 hex digits")
    if re.match(r"https?://", source):

        buf = io.BytesIO()
        try:
            Client().download(source, buf, MAX_TARBALL)
        except RemoteError as exc:
            raise UpdateError(str(exc)) from None
        data = buf.getvalue()
    else:

        try:  # a regular file of MAX_TARBALL at most: a FIFO or device is refused, never waited on
            data = read_bytes(source, MAX_TARBALL)
        except OSError as exc:
            raise UpdateError(f"{source}: cannot read: {exc.strerror or exc}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != sha256.lower():
        raise UpdateError(f"{source}: sha256 is {got}, not the pinned {sha256.lower()}; nothing changed")
    return from_tarball(data, source), got


def _git(args: list[str], label: str, watch: str | None = None) -> str:
    """git, bounded in time; with `watch`, also killed once that folder passes MAX_CLONE bytes."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh", "GIT_CONFIG_NOSYSTEM": "1"}
    running = proc.start(["git", "-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never", *args], env=env)
    done, over = threading.Event(), threading.Event()

    def watch_size() -> None:
        while watch is not None and not done.wait(0.2):
            if _disk_use(watch) > MAX_CLONE:
                over.set()
                running.kill()
                return

    watcher = threading.Thread(target=watch_size, daemon=True)
    watcher.start()
    try:
        result = running.result(GIT_TIMEOUT)
    finally:
        done.set()
        watcher.join()
    if over.is_set() or (watch is not None and _disk_use(watch) > MAX_CLONE):  # also one done between two looks
        raise UpdateError(f"{label}: the clone passed {MAX_CLONE // (1024 * 1024)} MiB; refusing the source (nothing changed)")
    if not result.ok:
        lines = [x.strip() for x in (result.stderr or result.stdout or "").splitlines() if x.strip()]
        # git's reason is its first "fatal:"/"error:" line; what follows is advice ("Please make sure ...")
        last = next((x for x in lines if x.startswith(("fatal:", "error:"))), lines[-1] if lines else result.describe_failure())
        raise UpdateError(f"{label}: git {args[0]} failed: {last}")
    return result.stdout


def from_git(source: str, commit: str | None) -> tuple[dict[str, bytes], str]:
    if not commit or not _COMMIT.fullmatch(commit.lower()):
        raise UpdateError(f"{source}: a git source must be pinned: give --commit with the full commit id (40 hex digits)")
    commit = commit.lower()
    tmp = scratch(GIT_SCRATCH)  # named by pid: one left by a SIGKILLed update goes at the next
    try:
        repo = str(tmp / "repo")
        _git(["clone", "--quiet", "--bare", "--no-hardlinks", "--", source, repo], source, watch=repo)  # never an option
        found = proc.run(["git", "-C", repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"], timeout=GIT_TIMEOUT)
        if not found.ok or found.stdout.strip() != commit:
            raise UpdateError(f"{source}: commit {commit} is not in the repository")
        listing = _git(["-C", repo, "ls-tree", "-r", "-z", commit, "--", "matrix/"], source)
        files: dict[str, bytes] = {}
        for row in filter(None, listing.split("\0")):
            meta, path = row.split("\t", 1)
            mode, kind, blob = meta.split()
            if _matrix_file(path) is None:
                continue
            if kind != "blob" or mode not in ("100644", "100755"):
                raise UpdateError(f"{source}: {path} at {commit[:12]} is a link or submodule (mode {mode}); refusing it")
            files[PurePosixPath(path).name] = _blob(repo, blob, path, source)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return files, commit


def _blob(repo: str, blob: str, path: str, source: str) -> bytes:
    """One blob's bytes, whole: sized first, so one over MAX_FILE is refused rather than read cut short."""
    size = _git(["-C", repo, "cat-file", "-s", blob], source).strip()
    if not size.isdigit() or int(size) > MAX_FILE:
        raise UpdateError(f"{source}: {path} is {size} bytes, over {MAX_FILE}; refusing it")
    result = proc.run(["git", "-C", repo, "cat-file", "blob", blob], timeout=GIT_TIMEOUT, max_output=(MAX_FILE + 1, 1024))
    if not result.ok:
        raise UpdateError(f"{source}: cannot read {path}: {result.describe_failure()}")
    data = result.stdout.encode("utf-8")  # read as UTF-8 text with \n line ends: checked against the blob's id
    if hashlib.new("sha256" if len(blob) == 64 else "sha1", b"blob %d\0" % len(data) + data).hexdigest() != blob:
        raise UpdateError(f"{source}: {path} is not UTF-8 text with \\n line ends as committed; refusing it")
    return data


def _disk_use(folder: str) -> int:
    """Bytes a folder's files hold on disk (what a clone has written so far)."""
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):  # git renames and removes its temporary files as it goes
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total
