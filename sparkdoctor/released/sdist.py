"""One released source distribution, read member by member: what a wheel does not carry (a build's
CMakeLists.txt, its cmake/ helpers) is only in the sdist. An sdist is a gzipped tar, which cannot be
read at an offset: checks that name their members exactly stream it from its start until they are all
met (`find`); otherwise the file is downloaded whole once (sha256 checked against the index), kept under
the user cache dir beside the wheels, and every member read is cached by (the file's sha256, member
name). Member names are given without the archive's top folder (`vllm-0.18.1/CMakeLists.txt` is
`CMakeLists.txt`), as a wheel's are relative to site-packages.
"""

from __future__ import annotations

import json
import tarfile
import zlib
from pathlib import Path

from sparkdoctor.files import write_cache_entry
from sparkdoctor.released.http import Client, RemoteError
from sparkdoctor.released.index import IndexFile
from sparkdoctor.released.stream import ChunkFile, byte_ranges
from sparkdoctor.released.wheel import CachedRelease, member_path

SDIST_LIMIT = 256 * 1024 * 1024  # an sdist is downloaded whole: at most this much
MEMBER_LIMIT = 64 * 1024 * 1024  # one member read into memory: at most this much (a source file is far smaller)


class RemoteSdist(CachedRelease):
    """The members of one released sdist (.tar.gz), with the interface of RemoteWheel that file checks read."""

    def __init__(self, file: IndexFile, client: Client, root: Path | None = None, limit: int = SDIST_LIMIT):
        super().__init__(file, client, root)
        self.limit = limit
        self._tar: tarfile.TarFile | None = None
        self._members: dict[str, tarfile.TarInfo] | None = None
        self.how = "cache"  # cache | download

    def _open(self) -> dict[str, tarfile.TarInfo]:
        if self._members is not None:
            return self._members
        local = self.dir / "sdist.tar.gz"
        if not local.is_file():
            self._download(local)
            self.how = "download"
        try:
            self._tar = tarfile.open(local, "r:gz")
            infos = [m for m in self._tar.getmembers() if m.isfile()]
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise RemoteError(f"{self.file.filename}: not a readable sdist: {exc}") from None
        self._members = {_relative(m.name): m for m in infos if _relative(m.name)}
        if self._names is None:
            self._names = list(self._members)
            write_cache_entry(self.dir / "names.json", json.dumps(self._names).encode())
        return self._members

    def _download(self, dest: Path) -> None:
        if not self.file.filename.endswith(".tar.gz"):
            raise RemoteError(f"{self.file.filename}: only .tar.gz sdists are read")
        if (self.file.size or 0) > self.limit:
            raise RemoteError(f"{self.file.filename}: {self.file.size} bytes, over the {self.limit}-byte limit for an sdist")
        self._fetch(dest, self.limit)

    def read(self, name: str) -> bytes:
        cached = self._cached(name)
        if cached is not None:
            return cached
        members = self._open()
        if name not in members:
            raise RemoteError(f"{self.file.filename}: no member {name}")
        data = self._extract(name, members[name])
        write_cache_entry(member_path(self.dir, name), data)
        return data

    def _extract(self, name: str, info: tarfile.TarInfo) -> bytes:
        if info.size > MEMBER_LIMIT:
            raise RemoteError(f"{self.file.filename}: member {name} is {info.size} bytes, over the {MEMBER_LIMIT}-byte limit")
        assert self._tar is not None
        try:
            handle = self._tar.extractfile(info)
            return handle.read() if handle is not None else b""
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise RemoteError(f"{self.file.filename}: cannot read {name}: {exc}") from None

    def find(self, wanted: list[str]) -> None:
        """Cache the members named exactly by `wanted` by streaming the archive from its start over range
        requests, stopping once all of them were met (a vLLM CMakeLists.txt is in the first few percent of
        its 20 MB sdist). The listing is then what was met, which holds every wanted member; a wanted name
        the archive lacks streams it to the end, and that listing is complete (and kept). Members read this
        way are not checked against the index's sha256 (the file is not read whole); a full download is."""
        if self._names is None:
            self._names = self._listed()
        known = set(self._names) if self._names is not None else None
        todo = {n for n in wanted if not member_path(self.dir, n).is_file() and (known is None or n in known)}
        if not todo:
            if self._names is None:
                self._names = sorted(set(wanted))  # every one is cached, so in the archive
            return
        if (self.dir / "sdist.tar.gz").is_file() or not self.file.filename.endswith(".tar.gz") or not self.file.size:
            self._open()
            return
        seen: list[str] = []
        try:
            with tarfile.open(fileobj=ChunkFile(byte_ranges(self.client, self.file.url, 0, self.file.size)), mode="r|gz") as tar:
                for info in tar:
                    name = _relative(info.name)
                    if not info.isfile() or not name:
                        continue
                    seen.append(name)
                    if name in todo:
                        self._tar = tar
                        write_cache_entry(member_path(self.dir, name), self._extract(name, info))
                        self._tar = None
                        todo.discard(name)
                        if not todo:
                            self._names = seen
                            return
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            self._tar = None
            raise RemoteError(f"{self.file.filename}: not a readable sdist: {exc}") from None
        self._names = seen
        write_cache_entry(self.dir / "names.json", json.dumps(seen).encode())

    def prefetch(self, names: list[str]) -> None:
        """Cache many members in one pass through the archive, in its order: a gzipped tar read out of
        order is decompressed again from the start for every backward step."""
        todo = {n for n in names if not member_path(self.dir, n).is_file()}
        if not todo:
            return
        members = self._open()
        for name, info in sorted(((n, members[n]) for n in todo if n in members), key=lambda item: item[1].offset_data):
            write_cache_entry(member_path(self.dir, name), self._extract(name, info))

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()
            self._tar = None
        self._members = None


def _relative(name: str) -> str:
    """A member's path without the archive's top folder ('' for the folder itself)."""
    parts = name.lstrip("./").split("/", 1)
    return parts[1] if len(parts) == 2 else ""
