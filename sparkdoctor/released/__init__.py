"""The released-file reader: single files of released wheels, read from the registry without
downloading the wheels. Used by `matrix verify --bounds`, `matrix track` and what-if.

  index      the registry's PEP 691 JSON simple index: files, sizes, sha256
  sdist      a release's source distribution, downloaded whole once (a tar cannot be read by ranges)
  wheel      pick the wheel for a platform; read members over range requests; cache by (sha256, member)
  rangefile  the seekable file object zipfile reads through
  http       the HTTP client (stdlib http.client, kept-alive; measured in docs/evidence/remote-wheels.md)
  strings    printable strings of a compiled library

`Reader` is the interface: `reader.versions("vllm")`, `reader.release("vllm", "0.33.0").text("vllm/envs.py")`.
Every failure is a RemoteError with one line naming the URL or file.
"""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.released.http import Client, RemoteError
from sparkdoctor.released.index import Index
from sparkdoctor.released.sdist import RemoteSdist
from sparkdoctor.released.strings import printable_runs
from sparkdoctor.released.wheel import (
    DEFAULT_PLATFORM,
    DEFAULT_PYTHON,
    PLATFORMS,
    RemoteWheel,
    cache_root,
    pick_wheel,
)

__all__ = [
    "PLATFORMS",
    "Client",
    "Index",
    "Reader",
    "RemoteError",
    "RemoteSdist",
    "RemoteWheel",
    "cache_root",
    "pick_wheel",
    "printable_runs",
]


class Reader:
    """Released wheels of any project on one index, for one platform and Python."""

    def __init__(self, platform: str = DEFAULT_PLATFORM, python: str = DEFAULT_PYTHON, index: Index | None = None,
                 root: Path | None = None):
        self.platform, self.python = platform, python
        self.index = index or Index()
        self.root = root
        self._open: dict[tuple[str, str], RemoteWheel] = {}
        self.picks: dict[tuple[str, str], str] = {}  # (project, version) -> which wheel was read and why
        self._sdists: dict[tuple[str, str], RemoteSdist] = {}
        self.sdist_picks: dict[tuple[str, str], str] = {}

    @property
    def client(self) -> Client:
        return self.index.client

    def versions(self, project: str, prereleases: bool = False, dist: str = "wheel", yanked: bool = False) -> list[str]:
        return self.index.versions(project, prereleases, dist, yanked)

    def release(self, project: str, version: str) -> RemoteWheel:
        key = (project, version)
        if key not in self._open:
            pick = pick_wheel(self.index.wheels(project, version), self.platform, self.python)
            if pick is None:
                raise RemoteError(f"{project} {version}: no wheel of this release on {self.index.url}")
            self._open[key] = RemoteWheel(pick.file, self.client, self.root)
            self.picks[key] = pick.why
        return self._open[key]

    def sdist(self, project: str, version: str) -> RemoteSdist:
        """The release's source distribution (.tar.gz), downloaded whole once (see sparkdoctor.released.sdist)."""
        key = (project, version)
        if key not in self._sdists:
            found = [f for f in self.index.sdists(project, version) if f.filename.endswith(".tar.gz")]
            if not found:
                raise RemoteError(f"{project} {version}: no .tar.gz sdist of this release on {self.index.url}")
            self._sdists[key] = RemoteSdist(found[0], self.client, self.root)
            self.sdist_picks[key] = f"{found[0].filename} (the sdist)"
        return self._sdists[key]

    def open(self, project: str, version: str, dist: str = "wheel") -> RemoteWheel | RemoteSdist:
        return self.sdist(project, version) if dist == "sdist" else self.release(project, version)

    def picked(self, project: str, version: str, dist: str = "wheel") -> str:
        """Which file of the release was read, and why."""
        return (self.sdist_picks if dist == "sdist" else self.picks)[(project, version)]

    def close(self) -> None:
        for wheel in self._open.values():
            wheel.close()
        for sdist in self._sdists.values():
            sdist.close()
        self._open.clear()
        self._sdists.clear()
        self.client.close()
