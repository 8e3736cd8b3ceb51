"""The parsed bundled (or `matrix update`-installed) matrix, kept between runs.

Reading the matrix (TOML, every entry through the schema, the tracked-versions rules) is ~40 ms of every `check` and
imports the schema's modules (packaging.requirements, shlex, ...). The parsed Matrix is pickled into sparkdoctor's
cache dir under a key of everything it was made from: the (path, size, mtime_ns, ctime_ns) of each matrix file, of
the probes/kernels/*.ptx files (probe ids an entry may name) and of the code that parses it (sparkdoctor/matrix/**.py
and the few modules it reads rules from), the fix file names (fix ids) and the Python version. ctime is in the key
because a program can put a file's mtime back but not its ctime. Only a load that succeeded is kept, so a broken
matrix file is reported on every run; a cache that cannot be read or written is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path

from sparkdoctor import (
    locations,  # called through the module: tests point data_dir at their own matrix
)
from sparkdoctor.files import write_cache_entry
from sparkdoctor.matrix.model import Matrix

_PKG = Path(__file__).resolve().parent.parent  # sparkdoctor/
_CODE_FILES = ("arch.py", "names.py", "patterns.py", "text.py", "errors.py", "collect/cutedsl.py")


def _stats(paths: list[Path]) -> list[tuple[str, int, int, int]]:
    return [(str(p), st.st_size, st.st_mtime_ns, st.st_ctime_ns) for p in paths for st in [os.stat(p)]]


def _key(toml_files: list[Path], fixes: Path | None, extra: tuple) -> str:
    code = sorted(_PKG.joinpath("matrix").rglob("*.py")) + [_PKG / name for name in _CODE_FILES]
    fix_root = fixes or locations.data_dir("fixes")
    fix_names = sorted(p.name for p in fix_root.glob("*.toml")) if fix_root.is_dir() else []
    ptx = sorted((locations.data_dir("probes") / "kernels").glob("*.ptx"))
    parts = (sys.version, extra, str(fix_root), fix_names, _stats(toml_files), _stats(ptx), _stats(code))
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogateescape")).hexdigest()


def cached(root: Path, fixes: Path | None, extra: tuple, build: Callable[[], Matrix]) -> Matrix:
    """build(), or the Matrix it made last time from the same files."""
    try:
        files = sorted(root.glob("*.toml")) if root.is_dir() else [root]
        files += [root / "SOURCE.json"] if root.is_dir() and (root / "SOURCE.json").exists() else []
        key = _key(files, fixes, extra)
        path = locations.cache_dir() / "matrix" / f"{key[:32]}.pickle"
    except OSError:
        return build()
    with contextlib.suppress(Exception):  # missing, half-written by another sparkdoctor, or from another version: rebuild
        with open(path, "rb") as fh:
            stored_key, matrix = pickle.load(fh)
        if stored_key == key and isinstance(matrix, Matrix):
            return matrix
    matrix = build()
    with contextlib.suppress(OSError):
        for old in path.parent.glob("*.pickle"):  # one matrix per key shape is plenty; keep the folder small
            if old != path:
                old.unlink(missing_ok=True)
    write_cache_entry(path, pickle.dumps((key, matrix), protocol=pickle.HIGHEST_PROTOCOL))
    return matrix
