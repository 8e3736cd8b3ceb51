"""Released wheels, downloaded once and read in place: the material of the file checks.

`pip download --no-deps NAME==VERSION` into <cache>/wheels (or $SPARKDOCTOR_WHEELS), reused by every
later run; a wheel is a zip, so its members are read straight from it (nothing is unpacked to disk).
The released versions of a package come from the registry through `pip index versions`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import zipfile
from functools import lru_cache
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from sparkdoctor import proc
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_VERIFY_ERROR
from sparkdoctor.files import file_lock
from sparkdoctor.locations import cache_dir
from sparkdoctor.released.cubins import CubinError, list_archs, zip_chunks
from sparkdoctor.released.elf import ElfError
from sparkdoctor.released.strings import is_library, library_text
from sparkdoctor.released.wheel import MEMBER_LIMIT
from sparkdoctor.verify.venvs import INDEX_MEMORY, bounded_pip, pip_error, run_pip

DOWNLOAD_TIMEOUT = 900.0
INDEX_TIMEOUT = 120.0


class WheelError(SparkdoctorError, RuntimeError):
    """A wheel that could not be fetched or read; one line, pip's own error where it has one."""

    exit_code = EXIT_VERIFY_ERROR
    code = "verify-wheel"


def _cached(root: Path, name: str, version: str) -> Path | None:
    want = Version(version)
    for path in sorted(root.glob("*.whl")):
        try:
            wname, wversion, _, _ = parse_wheel_filename(path.name)
        except (ValueError, InvalidVersion):
            continue
        if wname == name and wversion == want:
            return path
    return None


def _exactly(name: str, version: str) -> str:
    """The requirement for exactly this release: `===` for a public version, so an index that also serves a local
    build of it (torch 2.13.0+cpu beside 2.13.0) is not handed the local one (== admits local versions)."""
    return f"{name}=={version}" if "+" in version else f"{name}==={version}"


def wheel(package: str, version: str, root: Path | None = None) -> Path:
    """The wheel of `package==version`, from the cache or downloaded into it."""
    root = root or Path(os.environ.get("SPARKDOCTOR_WHEELS") or cache_dir() / "wheels")
    name = canonicalize_name(package)
    with contextlib.ExitStack() as held:
        try:  # two runs must not download one wheel at once; one that holds it is waited for as every writer waits
            root.mkdir(parents=True, exist_ok=True)
            # the holder's own limit: a download beside one in progress waits for it (only a stopped one fails)
            held.enter_context(file_lock(root / f".{name}-{version}.lock", "matrix verify", root, DOWNLOAD_TIMEOUT))
        except OSError as exc:  # a version too long for a file name (the wheel's own name could not hold it either)
            shown = version if len(version) <= 40 else f"{version[:40]}... ({len(version)} characters)"
            why = exc.strerror or str(exc).rsplit(": ", 1)[-1]
            raise WheelError(f"pip download {name}=={shown} failed: cannot lock it in {root}: {why}") from None
        found = _cached(root, name, version)
        if found:
            return found
        argv = [*bounded_pip(sys.executable), "--disable-pip-version-check", "--no-input", "-q", "download",
                "--no-deps", "--only-binary=:all:", "-d", str(root), "--", _exactly(name, version)]
        result = run_pip(argv, DOWNLOAD_TIMEOUT, root)
        found = _cached(root, name, version)
        if found is None:
            why = pip_error(result) if not result.ok else "pip downloaded no wheel"
            raise WheelError(f"pip download {name}=={version} failed: {why}")
        return found


@lru_cache(maxsize=32)
def released_versions(package: str, pre: bool = False) -> tuple[str, ...]:
    """Every released version of `package` on the registry, oldest first (pre-releases and dev releases only with `pre`)."""
    argv = [*bounded_pip(sys.executable, INDEX_MEMORY), "--disable-pip-version-check", "--no-input", "index", "versions",
            *(["--pre"] if pre else []), "--", canonicalize_name(package)]
    result = proc.run(argv, timeout=INDEX_TIMEOUT)
    line = next((x for x in (result.stdout or "").splitlines() if x.startswith("Available versions:")), None)
    if line is None:
        raise WheelError(f"pip index versions {package} failed: {pip_error(result) if not result.ok else 'no version list'}")
    versions = []
    for text in line.split(":", 1)[1].split(","):
        try:
            v = Version(text.strip())
        except InvalidVersion:
            continue
        if pre or not (v.is_prerelease or v.is_devrelease):
            versions.append(v)
    return tuple(str(v) for v in sorted(versions))


class WheelFiles:
    """One wheel's members, read from the zip on demand and kept for the checks of this run."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self._zip = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise WheelError(f"{path.name}: not a readable wheel: {exc}") from None
        self.names = [n for n in self._zip.namelist() if not n.endswith("/")]
        self._text: dict[str, str] = {}
        self.cubin_listings: dict[str, tuple[str, ...]] = {}  # member -> the cubin archs its fatbin lists

    def cubins(self, name: str) -> tuple[str, ...]:
        """The cubin archs of one member (a shared object), read from its fatbin once per run."""
        if name not in self.cubin_listings:
            try:
                self.cubin_listings[name] = list_archs(zip_chunks(self._zip, name), name=name).archs
            except CubinError as exc:
                raise WheelError(f"{self.path.name}: {exc}") from None
            except (OSError, zipfile.BadZipFile, KeyError, EOFError) as exc:
                raise WheelError(f"{self.path.name}: cannot read {name}: {exc}") from None
        return self.cubin_listings[name]

    def text(self, name: str) -> str:
        """A member as text; a compiled library as the strings of its host part, as `--bounds` reads it remotely."""
        if name not in self._text:
            try:
                library = library_text(iter(zip_chunks(self._zip, name))) if is_library(name) else None
                self._text[name] = library if library is not None else self._member(name).decode("utf-8", errors="replace")
            except ElfError as exc:
                raise WheelError(f"{self.path.name}: {name}: {exc}") from None
            except (OSError, zipfile.BadZipFile, KeyError) as exc:
                raise WheelError(f"{self.path.name}: cannot read {name}: {exc}") from None
        return self._text[name]

    def _member(self, name: str) -> bytes:
        """A member whole, judged by the size the central directory gives before it is inflated (a 7 MB wheel held
        1.5 GB of one deflated member, read whole into 3 GB of memory); inflating never passes that size."""
        info = self._zip.getinfo(name)
        if info.file_size > MEMBER_LIMIT:
            raise WheelError(f"{self.path.name}: member {name} is {info.file_size:,} bytes, over the {MEMBER_LIMIT:,}-byte limit")
        with self._zip.open(info) as member:
            return member.read(MEMBER_LIMIT + 1)

    def close(self) -> None:
        self._zip.close()
