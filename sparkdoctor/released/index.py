"""The registry's simple index in its JSON form (PEP 691): the files of a project, each with its URL,
size and sha256. The per-release JSON API is not used (it is not reachable everywhere the simple
index is). The index URL is https://pypi.org/simple/ or $SPARKDOCTOR_INDEX_URL.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
from dataclasses import dataclass
from urllib.parse import urljoin

from packaging.utils import (
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from sparkdoctor.inputs import NumberTooLong, json_answer
from sparkdoctor.released.http import Client, RemoteError, split_url

DEFAULT_INDEX = "https://pypi.org/simple/"
ACCEPT = "application/vnd.pypi.simple.v1+json"
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")  # the index's word names cache folders: a path (`../..`) must never pass


def index_url() -> str:
    url = os.environ.get("SPARKDOCTOR_INDEX_URL") or DEFAULT_INDEX
    return url if url.endswith("/") else url + "/"


@dataclass(frozen=True)
class IndexFile:
    """One released file as the index lists it."""

    filename: str
    url: str
    size: int | None
    sha256: str | None
    yanked: bool
    version: str | None  # parsed from a wheel's name; None for an sdist or an unparsable name
    tags: frozenset = frozenset()  # the wheel's packaging.tags.Tag set
    sdist_version: str | None = None  # parsed from an sdist's name (.tar.gz, .zip)
    uploaded: str | None = None  # PEP 700 upload-time (ISO 8601, UTC), when the index gives it


def _file(raw: dict, base: str) -> IndexFile | None:
    """One entry of a project page; None for one whose URL cannot be joined to the page's (`//[::1`): passed over."""
    name = str(raw.get("filename", ""))
    try:
        url = urljoin(base, str(raw.get("url", "")))
    except ValueError:
        return None
    version: str | None = None
    tags: frozenset = frozenset()
    if name.endswith(".whl"):
        with contextlib.suppress(ValueError):  # InvalidWheelFilename, InvalidVersion, int()'s refusal of 5,000 digits
            _, parsed, _, tags = parse_wheel_filename(name)
            version = str(parsed)
    sdist_version: str | None = None
    if name.endswith((".tar.gz", ".zip")):
        with contextlib.suppress(ValueError):  # as for a wheel: a name that is no release is passed over
            sdist_version = str(parse_sdist_filename(name)[1])
    size = raw.get("size")
    sha = (raw.get("hashes") or {}).get("sha256")
    uploaded = raw.get("upload-time")
    if not (isinstance(uploaded, str) and _is_time(uploaded)):  # free text would be compared as a date
        uploaded = None
    return IndexFile(name, url, size if isinstance(size, int) else None,
                     sha.lower() if isinstance(sha, str) and _SHA256.fullmatch(sha) else None, bool(raw.get("yanked")), version, frozenset(tags), sdist_version,
                     uploaded)


def _is_time(text: str) -> bool:
    """An ISO 8601 date-time as PEP 700 gives it (2026-01-02T03:04:05.123456Z); anything else is no upload time."""
    if len(text) > 64 or not re.match(r"\d{4}-\d{2}-\d{2}T", text):
        return False
    try:
        dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


class Index:
    """One index, read once per project per process (new releases appear between runs, not within one)."""

    def __init__(self, client: Client | None = None, url: str | None = None):
        self.client = client or Client()
        self.url = url or index_url()
        self._projects: dict[str, list[IndexFile]] = {}

    def files(self, project: str) -> list[IndexFile]:
        name = canonicalize_name(project)
        if name not in self._projects:
            split_url(self.url)  # $SPARKDOCTOR_INDEX_URL=http://[::1: a RemoteError, not urljoin's ValueError
            page = urljoin(self.url, f"{name}/")
            resp = self.client.get(page, {"Accept": ACCEPT})
            if resp.status == 404:
                raise RemoteError(f"{page}: no project {name!r} on the index")
            if resp.status != 200:
                raise RemoteError(f"{page}: HTTP {resp.status}")
            kind = resp.headers.get("content-type", "")
            if "json" not in kind:
                raise RemoteError(f"{page}: the index answered {kind or 'no content type'}, not the PEP 691 JSON form")
            try:
                raw_files = json_answer(resp.body)["files"]  # type: ignore[index]
                if not isinstance(raw_files, list):
                    raise TypeError
                self._projects[name] = [f for f in (_file(raw, resp.url) for raw in raw_files if isinstance(raw, dict)) if f is not None]
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                why = f"its answer {exc}" if isinstance(exc, NumberTooLong) else "not a PEP 691 project page (no 'files' list of file objects)"
                raise RemoteError(f"{page}: {why}") from None
        return self._projects[name]

    def versions(self, project: str, prereleases: bool = False, dist: str = "wheel", yanked: bool = False) -> list[str]:
        """The released versions that have a wheel (dist "sdist": an sdist), oldest first (yanked left out unless
        `yanked`: pip installs a yanked release pinned with ==, PEP 592). A release is its public version: the local
        builds an index may list beside it (2.15.0+cu126, 2.15.0+cu130, PEP 440) are variants of it (`builds`)."""
        found: set[Version] = set()
        for f in self.files(project):
            version = f.sdist_version if dist == "sdist" else f.version
            if version is None or (f.yanked and not yanked):
                continue
            v = Version(Version(version).public)
            if prereleases or not (v.is_prerelease or v.is_devrelease):
                found.add(v)
        return [str(v) for v in sorted(found)]

    def builds(self, project: str) -> dict[str, list[str]]:
        """The local builds of each release that has any (2.15.0 -> [2.15.0+cu126, 2.15.0+cu130]), oldest first."""
        out: dict[str, set[Version]] = {}
        for f in self.files(project):
            if (version := f.version or f.sdist_version) is not None and (v := Version(version)).local is not None:
                out.setdefault(v.public, set()).add(v)
        return {public: [str(v) for v in sorted(vs, key=build_order)] for public, vs in out.items()}

    def upload_times(self, project: str) -> dict[str, str]:
        """Each released (public) version's first upload of any build (PEP 700 upload-time, ISO 8601), yanked ones
        too; versions without one left out."""
        out: dict[str, str] = {}
        for f in self.files(project):
            version = f.version or f.sdist_version
            if version is None or f.uploaded is None:
                continue
            key = Version(version).public
            out[key] = min(out.get(key, f.uploaded), f.uploaded)
        return out

    def wheels(self, project: str, version: str) -> list[IndexFile]:
        """One release's wheels: a public version's every build (2.15.0 and 2.15.0+cu130), a local version's own."""
        return _unyanked([f for f in self.files(project) if f.version is not None and _same_release(f.version, version)])

    def sdists(self, project: str, version: str) -> list[IndexFile]:
        return _unyanked([f for f in self.files(project) if f.sdist_version is not None and _same_release(f.sdist_version, version)])

    def yanked(self, project: str) -> set[str]:
        """The (public) versions whose every file, of every build, is yanked (PEP 592)."""
        by: dict[str, bool] = {}
        for f in self.files(project):
            if (version := f.version or f.sdist_version) is not None:
                key = Version(version).public
                by[key] = by.get(key, True) and f.yanked
        return {v for v, all_yanked in by.items() if all_yanked}


def _same_release(listed: str, want: str) -> bool:
    """A file's version is the release asked for: its public version for a public one, exactly for a local one."""
    asked = Version(want)
    have = Version(listed)
    return have == asked if asked.local is not None else Version(have.public) == asked


def build_order(v: Version) -> tuple[bool, list[tuple[int, int, str]]]:
    """A release's builds in a stable order, the plain one first and the local labels by their numbers (cu99 before
    cu130, which PEP 440 orders as text)."""
    parts = re.findall(r"\d+|[^\d.]+", v.local or "")
    return (v.local is not None, [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts])


def _unyanked(files: list[IndexFile]) -> list[IndexFile]:
    """One release's files as pip picks them for an exact pin: the yanked ones only when every file is (PEP 592)."""
    kept = [f for f in files if not f.yanked]
    return kept or files
