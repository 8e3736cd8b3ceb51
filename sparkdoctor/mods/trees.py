"""Where the files a mod touches come from: an installed environment, or a release read without installing it.

A tree answers one question, `read(rel)`: the bytes of a file given by its path relative to the site
folder (`vllm/v1/attention/backends/mla/triton_mla.py`), or None when the tree has no such file. Nothing
here ever writes to a target.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from packaging.requirements import InvalidRequirement, Requirement

from sparkdoctor import inputs, proc
from sparkdoctor.inputs import TooBig, UnreadableInput, read_bytes
from sparkdoctor.mods.model import ModError, Verdict
from sparkdoctor.released import Reader, RemoteError
from sparkdoctor.released.http import TooLarge
from sparkdoctor.targets.interface import FileError, FileTransport
from sparkdoctor.text import one_line

PATH_MAX, NAME_MAX = 4096, 255  # Linux's
MAX_FILE = 32 * 1024 * 1024  # a source file a mod edits; anything larger is not what a mod edits
PROBE_TIMEOUT = 30.0
_SITE = re.compile(r"(?:^|/)(?:site|dist)-packages/(.+)$")


class NotPatchable(ModError):
    """What a tree holds at a path a mod names is no file patch edits (a folder, a FIFO, a file too large to
    read): that file's verdict (`verdict`, `why`), never the whole run's error."""

    def __init__(self, message: str, why: str, verdict: Verdict = Verdict.FAILS):
        super().__init__(message)
        self.why, self.verdict = why, verdict


class Tree(Protocol):
    label: str
    def read(self, rel: str) -> bytes | None: ...


def site_relative(path: str) -> str:
    """A path as a diff or a script names it, made relative to the site folder.

    `usr/local/lib/python3.12/dist-packages/vllm/x.py` (eugr's `patch -p1 -d /`), `a/vllm/x.py` (git) and
    `vllm/x.py` all give `vllm/x.py`.
    """
    path = path.strip().replace("\\", "/")
    found = _SITE.search(path)
    if found:
        return found.group(1)
    path = path.lstrip("/")
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


def refused_path(path: str) -> str | None:
    """Why GNU patch would refuse the file name `path` a diff gives, or None: absolute outside any site folder,
    climbing out through `..`, empty. Such a name never reaches a tree."""
    raw = path.strip().replace("\\", "/")
    shown = one_line(raw)[:120]
    if "\x00" in raw:
        return f"its file name `{shown}` holds a NUL byte"
    if not fits_a_path(raw):
        return f"its file name `{shown}...` is {len(raw):,} characters long, longer than a path can be"
    if raw.startswith("/") and not _SITE.search(raw):
        return f"its file name `{shown}` is absolute (patch refuses it as dangerous)"
    rel = site_relative(raw)
    if ".." in rel.split("/"):
        return f"its file name `{shown}` climbs out of the tree through `..` (patch refuses it as dangerous)"
    if not rel.strip("/"):
        return "it names no file (an empty file name)"
    if rel.startswith("/") or rel.endswith("/"):
        return f"its file name `{shown}` names no file in a site folder"
    return None


def fits_a_path(name: str) -> bool:
    """Can `name` be a path at all (PATH_MAX 4096 bytes, NAME_MAX 255 a component)? A longer one is never looked up:
    resolving 1,000,000 components (a 14 MB name in a diff's header) took longer than 10 minutes."""
    return len(name) < PATH_MAX and all(len(part.encode("utf-8", "surrogateescape")) <= NAME_MAX for part in name.split("/"))


def read_regular(path: Path) -> bytes | None:
    """A regular file's bytes (MAX_FILE at most), never blocking on a FIFO or a device; None when it is not there."""
    try:
        return read_bytes(path, MAX_FILE)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except TooBig:
        why = f"is larger than {MAX_FILE} bytes, too large for a file a mod edits"
        raise NotPatchable(f"{path}: {why}", why, Verdict.CANNOT_TELL) from None
    except UnreadableInput as exc:  # a folder, a FIFO, a device: nothing patch edits
        why = (exc.strerror or str(exc)).split(";")[0]
        raise NotPatchable(f"{path}: cannot read: {exc.strerror or exc}", why) from None
    except OSError as exc:
        raise ModError(f"{path}: cannot read: {exc.strerror or exc}") from None


# The interpreter's site folders, asked without `site` (-S: no .pth import line, no sitecustomize.py runs; a package's
# code never runs when sparkdoctor only reads files). Without site a venv's interpreter starts at its base prefix
# (before 3.11 always), so the venv is found as site's venv() finds it: pyvenv.cfg beside the interpreter or one up.
SITE_FOLDERS_ARGV = ["-S", "-I", "-B", "-c", (
    "import json,os,sys\n"
    "d=os.path.dirname(os.path.abspath(sys.executable))\n"
    "for v in (d,os.path.dirname(d)):\n"
    " if os.path.isfile(os.path.join(v,'pyvenv.cfg')):\n"
    "  sys.prefix=sys.exec_prefix=v;break\n"
    "import sysconfig\n"  # after: Debian's reads the prefix as it is imported
    "p=sysconfig.get_paths(vars={'base':sys.prefix,'platbase':sys.exec_prefix})\n"
    "print(json.dumps([p['purelib'],p['platlib']]))")]


@dataclass
class SiteTree:
    """Site folders on this machine: a venv's, or a folder standing for one (an unpacked image layer: `confined`, its
    links are the image's, so one that leaves the folder names a file of the image, never one of this machine)."""

    dirs: list[Path]
    label: str
    confined: bool = False

    def read(self, rel: str) -> bytes | None:
        if rel.startswith("/") or ".." in rel.split("/") or not rel:
            return None
        for folder in self.dirs:
            if self.confined and not _inside(folder, folder / rel):
                why = "is a link out of the site folder (in an image it names the image's file, not this machine's)"
                raise NotPatchable(f"{folder / rel}: {why}", why, Verdict.CANNOT_TELL)
            data = read_regular(folder / rel)
            if data is not None:
                return data
        return None


def _inside(folder: Path, path: Path) -> bool:
    root = os.path.realpath(folder)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def venv_tree(python: str) -> SiteTree:
    """The site folders of the interpreter `python` (or of the venv folder `python`, as `check --python` takes it),
    asked of it (with a time limit). No such interpreter is a TargetError (exit 3), as in every other verb."""
    from sparkdoctor.targets.local import resolve_python_target

    python = resolve_python_target(python).python
    result = proc.run([python, *SITE_FOLDERS_ARGV], timeout=PROBE_TIMEOUT)
    if not result.ok:
        raise ModError(f"--python {python}: {result.describe_failure()}")
    try:
        dirs = [Path(d) for d in dict.fromkeys(inputs.json_answer(result.stdout.strip().splitlines()[-1]))]  # type: ignore[call-overload]
    except (ValueError, IndexError, TypeError) as exc:
        raise ModError(f"--python {python}: {f'its answer {exc}' if isinstance(exc, inputs.NumberTooLong) else 'did not say where its site folder is'}") from None
    return SiteTree(dirs, f"the environment of {python}")


@dataclass
class ContainerTree:
    """The site folders of the interpreter inside a running container, read through the container CLI (the
    target package's file transport: `docker exec ... python`, nothing installed, nothing written there)."""

    target: Any  # a Target whose files are the container's (sparkdoctor.targets.container.ContainerTarget)
    label: str = ""
    _dirs: list[str] | None = field(default=None, repr=False)
    _files: FileTransport | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.label = self.label or f"container {self.target.name} ({self.target.python})"

    def dirs(self) -> list[str]:
        if self._dirs is None:
            result = self.target.run_command([self.target.python, *SITE_FOLDERS_ARGV], timeout=PROBE_TIMEOUT)
            if not result.ok:
                raise ModError(f"{self.label}: {result.describe_failure()}: {(result.stderr or '').strip()[-200:]}")
            try:
                self._dirs = [str(d) for d in dict.fromkeys(inputs.json_answer(result.stdout.strip().splitlines()[-1]))]  # type: ignore[call-overload]
            except (ValueError, IndexError, TypeError) as exc:
                raise ModError(f"{self.label}: its interpreter {f'answered JSON that {exc}' if isinstance(exc, inputs.NumberTooLong) else 'did not say where its site folder is'}") from None
        return self._dirs

    def read(self, rel: str) -> bytes | None:
        if rel.startswith("/") or ".." in rel.split("/") or not rel:
            return None
        if self._files is None:
            self._files = self.target.file_transport()
        paths = [f"{d.rstrip('/')}/{rel}" for d in self.dirs()]
        try:
            rows = self._files.info(paths)
            for path in paths:
                row = rows.get(path)
                if row is None:
                    continue
                if row.get("kind") not in ("file", "link"):
                    why = f"is a {row.get('kind')}, not a regular file"
                    raise NotPatchable(f"{self.label}: {path}: not a regular file", why)
                if int(row.get("size") or 0) > MAX_FILE:
                    why = f"is {row.get('size')} bytes, too large for a file a mod edits"
                    raise NotPatchable(f"{self.label}: {path}: {why}", why, Verdict.CANNOT_TELL)
                data: bytes = self._files.read(path)
                return data
        except FileError as exc:
            raise ModError(str(exc)) from None
        return None


@dataclass
class ReleaseTree:
    """Released wheels (`vllm==0.33.0`, ...) read member by member over range requests (sparkdoctor.released),
    never downloaded whole, never installed. The wheel is the one a Spark installs (manylinux aarch64)."""

    specs: list[tuple[str, str]]
    label: str = ""
    _reader: Reader | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.label = self.label or " + ".join(f"{n} {v} (released wheel)" for n, v in self.specs)

    def read(self, rel: str) -> bytes | None:
        if self._reader is None:
            self._reader = Reader()
        for name, version in self.specs:
            try:
                wheel = self._reader.release(name, version)
                if rel not in set(wheel.names):
                    continue
                data: bytes = wheel.read(rel, MAX_FILE)
            except TooLarge as exc:  # judged by the size the wheel declares, before the member is fetched
                why = f"is {exc.size} bytes, too large for a file a mod edits"
                raise NotPatchable(f"{rel}: {why}", why, Verdict.CANNOT_TELL) from None
            except RemoteError as exc:
                raise ModError(f"{name}=={version}: {exc}") from None
            return data
        return None


@dataclass
class UpgradedTree:
    """A target as it would be after an upgrade: the changed distributions' files from their released wheels,
    every other file from the target as it is (what-if: "will my mods survive this upgrade?")."""

    released: ReleaseTree
    installed: Tree
    changed_tops: set[str]  # top-level folders of the changed distributions (vllm, flashinfer, ...)
    label: str = ""

    def __post_init__(self) -> None:
        self.label = self.label or f"{self.installed.label} upgraded to {self.released.label}"

    def read(self, rel: str) -> bytes | None:
        top = rel.split("/", 1)[0]
        if top in self.changed_tops:  # a file the upgrade replaces: as released (or gone)
            return self.released.read(rel)
        return self.installed.read(rel)


def parse_release(spec: str) -> tuple[str, str]:
    """`vllm==0.33.0` -> ("vllm", "0.33.0"); one line for anything else."""
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        raise ModError(f"--release {spec!r}: not NAME==VERSION") from None
    pins = [s for s in req.specifier if s.operator == "=="]
    if len(pins) != 1 or len(req.specifier) != 1 or "*" in pins[0].version:
        raise ModError(f"--release {spec!r}: name one release exactly, as NAME==VERSION")
    return req.name, pins[0].version
