"""The file side of a target on this machine: what `fix` reads, copies, writes and removes IN THE TARGET.

`fix` journals the files of the dists it touches, edits pin files, removes what an uninstall left and restores
bytes on rollback; none of that may assume the target's files are this machine's, so it goes through a
FileTransport (targets/interface.py; every write atomic, the mode kept). LocalFiles does its operations here, with
the same functions targets/fileops.py runs inside a container for ContainerFiles (targets/container_files.py).
Host files that the user names on the command line (an env file, a recipe) always use LocalFiles.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sparkdoctor.targets import fileops as ops
from sparkdoctor.targets.interface import FileError, FileTransport, LinkRefused, Target  # noqa: F401 (re-exported)


def hashes(transport: FileTransport, paths: list[str]) -> dict[str, str | None]:
    """path -> sha256 (None: missing or not a file), in one call."""
    rows = transport.info(list(paths), with_hash=True) if paths else {}
    return {p: (rows.get(p) or {}).get("sha256") for p in paths}


class LocalFiles:
    """This machine's files (a venv's, the user's env file)."""

    where = "here"

    def _do(self, fn, *args):
        try:
            return fn(*args)
        except ops.LinkError as exc:
            raise LinkRefused(str(exc)) from None
        except ops.OpError as exc:
            raise FileError(str(exc)) from None

    def info(self, paths, with_hash=False):
        return ops.info(list(paths), with_hash)

    def read(self, path):
        return self._do(ops.read, path)

    def write(self, path, data, mode=None):
        self._do(ops.write, path, data, mode)

    def remove(self, paths, prune=False, roots=None):
        return self._do(ops.remove, list(paths), prune, roots)

    def listdir(self, path):
        return self._do(ops.listdir, path)

    def export(self, paths, dest):
        """path -> {"name": file in dest, "mode"} for each path that is a regular file."""
        out = {}
        for i, path in enumerate(paths):
            if not os.path.isfile(path):
                continue
            target = Path(dest) / str(i)
            tmp = target.with_name(f".{target.name}.tmp")  # until the copy is complete
            try:
                with ops.open_regular(path) as fin, open(tmp, "wb") as fout:  # a FIFO swapped in: refused, not waited on
                    shutil.copyfileobj(fin, fout, 1 << 20)
                    fout.flush()
                    os.fsync(fout.fileno())
                os.replace(tmp, target)
                out[path] = {"name": target.name, "mode": os.stat(path).st_mode & 0o7777}
            except OSError as exc:
                raise FileError(f"{path}: cannot copy: {exc.strerror or exc}") from None
        return out

    def import_files(self, items, roots=None):
        for src, path, mode in items:
            try:
                data = Path(src).read_bytes()
            except OSError as exc:
                raise FileError(f"{src}: cannot read: {exc.strerror or exc}") from None
            if roots is None:
                self._do(ops.write, path, data, mode)
            else:
                self._do(ops.write_under, list(roots), path, data, mode)
        return len(items)

    @contextmanager
    def scratch(self) -> Iterator[str]:
        path = self._do(ops.mkscratch)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)


def transport_of(target: Target) -> FileTransport:
    """The target's file transport (a target without one is this machine's files)."""
    get = getattr(target, "file_transport", None)
    return get() if callable(get) else LocalFiles()
