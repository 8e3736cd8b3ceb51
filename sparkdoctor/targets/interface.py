"""The target stage's interface: what every target (a local interpreter, one inside a container) offers, what its
file transport offers, and the errors the stage raises.

Implementations live beside this file: local.py (PythonTarget) and container.py (ContainerTarget) are Targets;
files.py (LocalFiles) and container_files.py (ContainerFiles) are FileTransports. Collectors, `fix` and `bench`
depend on these Protocols only, never on an implementation's insides.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

from sparkdoctor.errors import TargetUnprobeable

if TYPE_CHECKING:
    from sparkdoctor.proc import ProcResult, Running

class FileRow(TypedDict, total=False):
    """What `FileTransport.info` says of one path (targets/fileops.py: info; `sha256` only when asked for);
    what `export` says of one copied file: `name` (in the destination folder) and `mode`."""

    kind: str  # file | link | dir | other
    size: int
    mode: int
    writable: bool
    read_only_fs: bool
    sha256: str | None
    real: str  # the path with every link followed (info)
    name: str


class TargetError(TargetUnprobeable, RuntimeError):
    """The target cannot be probed at all (exit code 3)."""

    code = "target"


class FileError(TargetUnprobeable, RuntimeError):
    """A file operation in the target failed; the message is one line."""

    code = "target-file"


class LinkRefused(FileError):
    """A write under the target's roots met a symbolic link on its way (or a path outside them): nothing was written
    through it (targets/fileops.py: write_under)."""


class FileTransport(Protocol):
    """The target's files, as `fix` reads, copies and writes them; every write is atomic."""

    where: str
    """"here" or "container NAME": what an error line says."""

    def info(self, paths: list[str], with_hash: bool = False) -> dict[str, FileRow | None]:
        """path -> its row (None: missing), in one call."""
        ...

    def read(self, path: str) -> bytes: ...

    def write(self, path: str, data: bytes, mode: int | None = None) -> None: ...

    def remove(self, paths: list[str], prune: bool = False, roots: list[str] | None = None) -> int:
        """How many paths were removed; `prune` removes folders left empty too. With `roots`, each path must lie
        under one of them and is removed through no link (LinkRefused otherwise: fileops.remove)."""
        ...

    def listdir(self, path: str) -> list[str]: ...

    def export(self, paths: list[str], dest: Path) -> dict[str, FileRow]:
        """Copy `paths` out of the target into the host folder `dest`."""
        ...

    def import_files(self, items: list[tuple[Path, str, int | None]], roots: list[str] | None = None) -> int:
        """Copy (host file, target path, mode) into the target; how many were written. With `roots`, every path must
        lie under one of them and is written through no link (LinkRefused otherwise: fileops.write_under)."""
        ...

    def scratch(self) -> AbstractContextManager[str]:
        """A scratch folder in the target, removed on exit."""
        ...


class Target(Protocol):
    """An environment to examine: probe scripts run under its interpreter, commands in its file system."""

    kind: str
    """"python" (an interpreter on this machine) or "container"."""
    python: str
    """The target interpreter's path (inside the container for a container target)."""

    def describe(self) -> dict[str, object]:
        """What Facts.target records: kind, python, how it was chosen (and the container's name, image)."""
        ...

    def start_script(self, script: Path, args: list[str], env: dict[str, str] | None = None) -> Running: ...

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None) -> ProcResult: ...

    def run_command(self, argv: list[str], timeout: float, input: str | None = None) -> ProcResult:
        """A command in the target's file system (pip, ptxas): here for a venv, inside it for a container."""
        ...

    def file_transport(self) -> FileTransport:
        """The target's files (files.py, container_files.py)."""
        ...
