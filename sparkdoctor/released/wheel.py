"""One released wheel, read member by member: picked from the index for a platform, opened over range
requests (sparkdoctor.released.rangefile), every member read cached by (the file's sha256, member name)
under the user cache dir. Released files never change, so a cached member is never fetched again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from packaging import tags as ptags
from packaging.version import Version

from sparkdoctor.files import write_cache_entry
from sparkdoctor.inputs import read_bytes
from sparkdoctor.locations import cache_dir
from sparkdoctor.released.cubins import Decided, Listing, list_archs
from sparkdoctor.released.elf import ElfError, Section, sections
from sparkdoctor.released.http import Client, RangeUnsupported, RemoteError, TooLarge
from sparkdoctor.released.index import IndexFile, build_order
from sparkdoctor.released.rangefile import RangeFile
from sparkdoctor.released.stream import data_start, member_chunks
from sparkdoctor.released.strings import (
    HOST_LIMIT,
    MemberText,
    is_library,
    printable_runs,
)

PLATFORMS = {"linux-aarch64": "aarch64", "linux-x86_64": "x86_64"}
DEFAULT_PLATFORM = "linux-aarch64"  # a DGX Spark
DEFAULT_PYTHON = "3.12"  # Ubuntu 24.04's, the Spark's OS
STREAM_CHUNK = 1 << 20
STREAM_STEP = 8 << 20  # one range request of a stored library's fatbin
FULL_DOWNLOAD_LIMIT = 256 * 1024 * 1024  # a server that ignores Range: download at most this much, else refuse
MEMBER_LIMIT = 256 * 1024 * 1024  # one member read whole (a ptxas is ~50 MB; a library is streamed, not read whole)
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def cache_root() -> Path:
    return cache_dir() / "released"


def wanted_tags(platform: str = DEFAULT_PLATFORM, python: str = DEFAULT_PYTHON) -> list[ptags.Tag]:
    """The wheel tags a CPython `python` on `platform` installs, best first (pip's order)."""
    arch = PLATFORMS.get(platform)
    if arch is None:
        raise RemoteError(f"platform {platform!r}: choose one of {', '.join(PLATFORMS)}")
    try:
        major, minor = (int(x) for x in python.split(".")[:2])
    except ValueError:
        raise RemoteError(f"python {python!r}: give a version such as 3.12") from None
    plats = []
    for glibc in range(40, 16, -1):
        plats.append(f"manylinux_2_{glibc}_{arch}")
        if glibc in _LEGACY:
            plats.append(f"{_LEGACY[glibc]}_{arch}")
    plats.append(f"linux_{arch}")
    return [*ptags.cpython_tags((major, minor), platforms=plats), *ptags.compatible_tags((major, minor), f"cp{major}{minor}", plats)]


@dataclass(frozen=True)
class Pick:
    file: IndexFile
    why: str  # which wheel and why, in words (the fallback says it plainly)


def pick_wheel(wheels: list[IndexFile], platform: str = DEFAULT_PLATFORM, python: str = DEFAULT_PYTHON) -> Pick | None:
    """The wheel of one release that `python` on `platform` would install; failing that, the first
    wheel of the release (its Python files are the same on every platform), saying so. Where the index lists
    local builds of the release (2.15.0+cu126, 2.15.0+cu130), the plain build is read, else the newest, named."""
    if not wheels:
        return None
    rank = {t: i for i, t in enumerate(wanted_tags(platform, python))}
    builds = sorted({Version(w.version) for w in wheels if w.version is not None}, key=build_order)
    prefer = {v: -1 if v.local is None else len(builds) - i for i, v in enumerate(builds)}  # plain, then newest build
    scored = sorted(((min((rank[t] for t in w.tags if t in rank), default=None), w.filename, w) for w in wheels),
                    key=lambda x: (x[0] is None, x[0] or 0, prefer.get(Version(x[2].version), 0) if x[2].version else 0, x[1]))
    best, _, chosen = scored[0]
    which = _build_named(chosen, builds)
    if best is not None:
        return Pick(chosen, f"{chosen.filename} ({which}the wheel CPython {python} on {platform} installs)")
    return Pick(chosen, f"{chosen.filename} ({which}no wheel for CPython {python} on {platform}; read this one instead)")


def _build_named(chosen: IndexFile, builds: list[Version]) -> str:
    """Which build of the release was read, where it has more than one or a local one ("" otherwise)."""
    if chosen.version is None or not any(v.local for v in builds):
        return ""
    v = Version(chosen.version)
    label = f"build +{v.local} of {v.public}" if v.local else f"the plain build of {v.public}"
    return f"{label}, of {len(builds)}: {', '.join(f'+{b.local}' if b.local else b.public for b in builds)}; " if len(builds) > 1 else f"{label}; "


class CachedRelease(MemberText):
    """A released file (a wheel, an sdist) whose listing and members are cached under its own folder, named by
    its sha256: released files never change."""

    def __init__(self, file: IndexFile, client: Client, root: Path | None):
        self.file, self.client = file, client
        key = file.sha256 or hashlib.sha256(file.url.encode()).hexdigest()
        self.dir = (root or cache_root()) / key[:2] / key
        self._names: list[str] | None = None

    def _open(self) -> object:
        """Open the file (listing its members into self._names); what the subclass reads members with."""
        raise NotImplementedError

    def _listed(self) -> list[str] | None:
        """The member list kept from an earlier read; None (read the file again) for anything else: an empty or
        damaged file, or JSON of another shape (an empty list would make every member look absent)."""
        try:
            names = json.loads((self.dir / "names.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
            return None
        return names

    @property
    def names(self) -> list[str]:
        """Every file member (folders left out), from the cache when this file was listed before."""
        if self._names is None:
            self._names = self._listed()
            if self._names is None:
                self._open()
        assert self._names is not None
        return self._names

    def _cached(self, name: str, limit: int = MEMBER_LIMIT) -> bytes | None:
        try:
            return read_bytes(member_path(self.dir, name), limit)
        except OSError:  # not kept, or over `limit` (TooBig)
            return None

    def _fetch(self, dest: Path, limit: int) -> None:
        """The whole file downloaded to `dest` (at most `limit` bytes), its sha256 checked against the index's."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{dest.name.partition('.')[0]}-")
        try:
            with os.fdopen(fd, "wb") as out:
                self.client.download(self.file.url, out, limit)
            _check_digest(Path(tmp), self.file)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class RemoteWheel(CachedRelease):
    """The members of one released wheel, read on demand; `requests` and `bytes_read` say what it cost."""

    def __init__(self, file: IndexFile, client: Client, root: Path | None = None, full_limit: int = FULL_DOWNLOAD_LIMIT):
        super().__init__(file, client, root)
        self.full_limit = full_limit
        self._zip: zipfile.ZipFile | None = None
        self._range: RangeFile | None = None
        self.how = "cache"  # cache | range | download: how members were reached
        self._start = (client.requests, client.bytes_read)
        self._layouts: dict[str, tuple[Callable[[int, int], bytes], list[Section]] | None] = {}

    @property
    def requests(self) -> int:
        return self.client.requests - self._start[0]

    @property
    def bytes_read(self) -> int:
        return self.client.bytes_read - self._start[1]

    # -- opening -------------------------------------------------------------------------------
    def _open(self) -> zipfile.ZipFile:
        if self._zip is not None:
            return self._zip
        local = self.dir / "wheel.whl"
        try:
            if local.is_file():
                self._zip, self.how = zipfile.ZipFile(local), "download"
                return self._zip
            if self.file.size is None:
                raise RemoteError(f"{self.file.filename}: the index gives no size; cannot read it by ranges")
            try:
                self._range = RangeFile(self.client, self.file.url, self.file.size)
                self._zip, self.how = zipfile.ZipFile(self._range), "range"
            except RangeUnsupported as exc:
                self._zip, self.how = zipfile.ZipFile(self._download(str(exc))), "download"
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise RemoteError(f"{self.file.filename}: not a readable wheel: {exc}") from None
        if self._names is None:  # the listing came with the central directory: keep it
            self._names = [n for n in self._zip.namelist() if not n.endswith("/")]
            write_cache_entry(self.dir / "names.json", json.dumps(self._names).encode())
        return self._zip

    def _download(self, why: str) -> Path:
        size = self.file.size or 0
        if size > self.full_limit:
            raise RemoteError(f"{why}; the wheel is {size} bytes, over the {self.full_limit}-byte limit for a full download")
        self._fetch(self.dir / "wheel.whl", self.full_limit)
        return self.dir / "wheel.whl"

    # -- members -------------------------------------------------------------------------------
    def read(self, name: str, limit: int = MEMBER_LIMIT) -> bytes:
        """A member whole, `limit` bytes at most (TooLarge): its size in the central directory is judged before a byte
        of it is fetched (a 2.7 MB wheel held 600 MiB of one deflated line), and inflating never passes that size."""
        cached = self._cached(name, limit)
        if cached is not None:
            return cached
        zf = self._open()
        try:
            info = zf.getinfo(name)
            if info.file_size > limit:
                raise TooLarge(f"{self.file.filename}: member {name} is {info.file_size} bytes, over the {limit}-byte limit",
                               size=info.file_size)
            if self._range is not None:  # the member's local header, name, extra field and data: one request
                self._range.prefetch(info.header_offset, info.header_offset + 30 + len(info.orig_filename.encode()) + 1024 + info.compress_size)
            with zf.open(info) as member:  # reads no more than the size it declares (then checks the CRC)
                data = member.read(limit + 1)
        except KeyError:
            raise RemoteError(f"{self.file.filename}: no member {name}") from None
        except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
            raise RemoteError(f"{self.file.filename}: cannot read {name}: {exc}") from None
        write_cache_entry(member_path(self.dir, name), data)
        return data

    def prefetch(self, names: list[str], gap: int = 1 << 20, most: int = 64 << 20) -> None:
        """Fetch the spans of many members in few requests (neighbours less than `gap` apart share one,
        up to `most` bytes a request): a check over `vllm/*.py` reads hundreds of members."""
        todo = [n for n in names if not member_path(self.dir, n).is_file()]
        if not todo:
            return
        zf = self._open()
        if self._range is None:
            return
        spans = []
        for n in todo:
            try:
                info = zf.getinfo(n)
            except KeyError:
                continue
            spans.append((info.header_offset, info.header_offset + 30 + len(info.orig_filename.encode()) + 1024 + info.compress_size))
        spans.sort()
        start, end = -1, -1
        for lo, hi in spans:
            if start >= 0 and lo - end <= gap and hi - start <= most:
                end = max(end, hi)
                continue
            if start >= 0:
                self._range.prefetch(start, end)
            start, end = lo, hi
        if start >= 0:
            self._range.prefetch(start, end)

    def chunks(self, name: str) -> Iterator[bytes]:
        """A member as a stream: from the cache or the downloaded wheel when there, else over range requests
        (sparkdoctor.released.stream), so a reader that stops early has read only what it used."""
        cached = member_path(self.dir, name)
        if cached.is_file():
            with open(cached, "rb") as fh:
                while chunk := fh.read(STREAM_CHUNK):
                    yield chunk
            return
        zf = self._open()
        try:
            info = zf.getinfo(name)
        except KeyError:
            raise RemoteError(f"{self.file.filename}: no member {name}") from None
        if self._range is None:  # the wheel is on disk
            with zf.open(info) as src:
                while chunk := src.read(STREAM_CHUNK):
                    yield chunk
            return
        yield from member_chunks(self.client, self.file.url, info, self.file.size or 0)

    def _stored(self, name: str) -> tuple[Callable[[int, int], bytes], list[Section]] | None:
        """For a library stored uncompressed in a remote wheel: a reader of its bytes at any offset and its
        section headers, read by range requests; None for a deflated (or cached, or downloaded) one."""
        if name not in self._layouts:
            self._layouts[name] = self._layout(name)
        return self._layouts[name]

    def _layout(self, name: str) -> tuple[Callable[[int, int], bytes], list[Section]] | None:
        if member_path(self.dir, name).is_file() or not is_library(name):
            return None
        zf = self._open()
        info = zf.getinfo(name) if name in zf.NameToInfo else None
        if self._range is None or info is None or info.compress_type != zipfile.ZIP_STORED:
            return None
        start = data_start(self.client, self.file.url, info, self.file.size or 0)

        def read_at(offset: int, n: int) -> bytes:
            n = max(0, min(n, info.file_size - offset))
            return self.client.get_range(self.file.url, start + offset, start + offset + n)[0] if n else b""

        try:
            return read_at, sections(read_at)
        except ElfError:
            return None

    def text(self, name: str) -> str:
        if not is_library(name):
            return super().text(name)
        cached = member_path(self.dir, name + "\0host-strings")  # a library's strings, kept (its bytes are not)
        with contextlib.suppress(OSError):
            return cached.read_text(encoding="utf-8")
        stored = self._stored(name)
        if stored is not None:  # only what comes before .nv_fatbin, by its section headers
            read_at, secs = stored
            fat = next((x for x in secs if x.name == ".nv_fatbin"), None)
            end = fat.offset if fat else self._open().getinfo(name).file_size
            if end > HOST_LIMIT:
                raise RemoteError(f"{self.file.filename}: {name}: more than {HOST_LIMIT:,} bytes before its device code")
            found = "\n".join(printable_runs(read_at(0, end)))
        else:
            found = super().text(name)
        write_cache_entry(cached, found.encode())
        return found

    def cubins(self, name: str, decided: Decided | None = None) -> Listing:
        """The cubin archs of a library member, read until `decided` (sparkdoctor.released.cubins); a listing
        is kept per (wheel, member) and reused when complete or when it already decides."""
        cached = member_path(self.dir, name + "\0cubins")
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            kept = json.loads(cached.read_text(encoding="utf-8"))
            listing = Listing(tuple(kept["archs"]), bool(kept["complete"]), int(kept["read"]), kept.get("size"))
            if listing.complete or (decided is not None and decided(set(listing.archs))):
                return listing
        stored = self._stored(name)
        fat = next((x for x in stored[1] if x.name == ".nv_fatbin"), None) if stored else None
        if stored is None:
            listing = list_archs(self.chunks(name), decided, name)
        elif fat is None:
            listing = Listing((), True, 0)
        else:  # only .nv_fatbin, by its section header
            read_at = stored[0]
            steps = (read_at(o, min(STREAM_STEP, fat.offset + fat.size - o)) for o in range(fat.offset, fat.offset + fat.size, STREAM_STEP))
            found = list_archs(steps, decided, name)
            listing = Listing(found.archs, found.complete, fat.offset + found.read)
        listing = replace(listing, size=self._open().getinfo(name).file_size)  # open by now: the member was read
        write_cache_entry(cached, json.dumps({"archs": listing.archs, "complete": listing.complete, "read": listing.read,
                                          "size": listing.size}).encode())
        return listing

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
            self._zip = None


def _check_digest(path: Path, file: IndexFile) -> None:
    if file.sha256 is None:
        return
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != file.sha256:
        raise RemoteError(f"{file.filename}: downloaded bytes do not match the index's sha256")


def member_path(folder: Path, name: str) -> Path:
    """Where a released file's member `name` is cached under the file's folder (wheels and sdists alike)."""
    return folder / "members" / hashlib.sha256(name.encode()).hexdigest()
