"""Read matrix files: TOML, the top-level fields, ids unique across files, and every entry and
stack through sparkdoctor.matrix.schema. This is the only way a Matrix is made, so the files that
`check --matrix`, `matrix validate` and `matrix verify` accept are the same.

A bad file is one line naming it: unreadable, not UTF-8, not TOML, nested past what the parser
can take, or of a schema this sparkdoctor does not read.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from itertools import takewhile
from pathlib import Path

from sparkdoctor import (
    locations,  # called through the module: tests point data_dir at their own matrix
)
from sparkdoctor.inputs import read_text, read_toml, toml_module
from sparkdoctor.matrix.cache import cached
from sparkdoctor.matrix.model import Entry, Matrix, MatrixError, Stack
from sparkdoctor.matrix.tracking import Tracking, check_bracketable, tracking_from
from sparkdoctor.vocab import CUTEDSL_KERNELS

SCHEMA = 1  # the matrix file format this sparkdoctor reads; `schema` may be left out
# Bytes of one TOML file read at most (a matrix file, the config): the largest bundled matrix file is 68 KB. A
# third-party file past it is refused by its size before a byte is read: a 3 GB sparse file took 6 GB of memory
# and 14 s of CPU before, and a multi-megabyte summary made `matrix show` draw for minutes.
MAX_TOML_BYTES = 1024 * 1024
_TOP = {"component", "entry", "stack", "schema", "tracked", "tracked_on", "lockstep"}


@lru_cache(maxsize=1)
def known_probes() -> frozenset[str]:
    """Every probe id an entry may name: the PTX probes in probes/kernels/ and the CuTe DSL ones.
    Read only when some entry names a probe, and once per process."""
    return frozenset(_ptx_probe_ids() | set(CUTEDSL_KERNELS))


def _ptx_probe_ids() -> set[str]:
    """The `id` in the header (the leading `//` lines, TOML) of each probes/kernels/*.ptx.

    Read here rather than through sparkdoctor.kernels.load_probes, which would import the kernels
    module (~30 ms) into every `check --no-kernels` and `--facts` run just to validate names;
    tests/test_matrix_engine.py checks that load_probes finds the same ids."""

    tomllib = toml_module()
    ids = set()
    for path in sorted((locations.data_dir("probes") / "kernels").glob("*.ptx")):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        header = [line[2:] for line in takewhile(lambda x: x.startswith("//"), lines)]
        try:
            probe_id = tomllib.loads("\n".join(x[1:] if x.startswith(" ") else x for x in header)).get("id")
        except tomllib.TOMLDecodeError:
            continue
        if isinstance(probe_id, str):
            ids.add(probe_id)
    return ids


def load_file(path: Path) -> tuple[list[Entry], list[Stack], Tracking]:
    from sparkdoctor.matrix.schema import (  # not needed when the parsed matrix is cached
        entry_from,
        stack_from,
    )

    where = str(path)
    doc = read_toml(path, MAX_TOML_BYTES, MatrixError)
    schema = doc.get("schema", SCHEMA)
    if type(schema) is not int or schema != SCHEMA:
        raise MatrixError(f"{where}: field 'schema' is {schema!r}; this sparkdoctor reads matrix schema {SCHEMA} (upgrade sparkdoctor for newer files)")
    component = doc.get("component")
    if not isinstance(component, str) or not component.strip():
        raise MatrixError(f"{where}: top-level field 'component' (a string) is missing")
    unknown_top = set(doc) - _TOP
    if unknown_top:
        raise MatrixError(f"{where}: unknown top-level field(s): {', '.join(sorted(map(repr, unknown_top)))}")
    raw_entries = _table_list(doc, "entry", where)
    probes = known_probes() if any("verified_by" in raw for raw in raw_entries) else frozenset()
    entries = [entry_from(raw, i, component, where, probes) for i, raw in enumerate(raw_entries)]
    stacks = [stack_from(raw, i, component, where) for i, raw in enumerate(_table_list(doc, "stack", where))]
    return entries, stacks, tracking_from(doc, where)


def _table_list(doc: dict, key: str, where: str) -> list[dict]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise MatrixError(f"{where}: '{key}' must be an array of tables ([[{key}]])")
    return value


def fix_ids(folder: Path | None) -> set[str]:
    """The fix ids an entry may name: the stems of fixes/*.toml (sparkdoctor.fix.definitions checks
    that each file's id is its stem, and everything else in it). Only names, so matrix never imports fix."""
    root = folder or locations.data_dir("fixes")
    if folder is not None and not root.is_dir():  # a mistyped --fixes: the folder is wrong, not the first entry naming a fix
        raise MatrixError(f"{root}: no such fixes folder")
    return {p.stem for p in root.glob("*.toml")} if root.is_dir() else set()


def fix_hint(fix: str) -> str:
    """How to see a finding's fix: `sparkdoctor fix` for a bundled fix; a matrix's own fix (written for `fix --matrix M
    --fixes F`, which check and the other judging verbs read without F) needs both options, and the hint says so."""
    if fix in fix_ids(None):
        return "sparkdoctor fix shows the plan"
    return f"not a bundled fix: sparkdoctor fix --matrix MATRIX --fixes FOLDER, FOLDER holding {fix}.toml, shows the plan"


def check_fixes(entries: list[Entry], ids: set[str], bundled: bool, folder: Path | None = None) -> None:
    """Every `fix` names a fix file; in the bundled matrix also: action = "fix" names a fix, and no fix is unused."""
    for e in entries:
        if e.fix is not None and e.fix not in ids:
            where = f"{folder}" if folder else "the bundled fixes/; a folder of your own: --fixes FOLDER"
            raise MatrixError(f"{e.file}: entry {e.id}: field 'fix' names {e.fix!r}, which is no fix in fixes/ ({where}; known: {', '.join(sorted(ids)) or 'none'})")
        if bundled and e.action == "fix" and e.fix is None:
            raise MatrixError(f"{e.file}: entry {e.id}: field 'fix' is missing: action = \"fix\" needs a fix id (or use action = \"configure\" when no safe automatic fix exists)")
    if bundled:
        unused = sorted(ids - {e.fix for e in entries})
        if unused:
            raise MatrixError(f"fixes/{unused[0]}.toml: fix {unused[0]!r} is named by no matrix entry (field 'fix'); remove it or name it")


def load(path: Path | None = None, fixes: Path | None = None, strict_fixes: bool = False) -> Matrix:
    """Load a matrix folder or a single file; by default the matrix `matrix update` installed, else the
    bundled one, with the user's local overrides layered over it (Matrix.source says which). Ids must
    be unique. Fix ids must name fix files (of `fixes`, default the bundled fixes/) in the bundled matrix, when
    `fixes` is given, and with `strict_fixes` (fix and `matrix validate` act on them); a verb that only judges
    (check) reads a matrix written for `fix --fixes F` without F: a fix id is shown, never run, there."""
    if path is not None:
        matrix = _load(Path(path), fixes, path_given=True, strict_fixes=strict_fixes)
        matrix.source = str(path)
        return matrix

    current = locations.data_home() / "matrix" / "current"
    try:
        installed = locations.installed_matrix()
        gone = installed is None and current.is_symlink()
    except OSError as exc:  # another user's data folder (HOME of root, run as nobody): the bundled one, said
        installed, gone, unreadable = None, False, _unreadable(current, exc)
    else:
        unreadable = ""
    if installed is not None:
        try:
            matrix = cached(installed, fixes, ("installed", strict_fixes),
                            lambda: _load(installed, fixes, path_given=True, strict_fixes=strict_fixes))
            matrix.source = f"installed {installed.resolve().name[:12]} ({installed.resolve()})"
        except MatrixError as exc:
            matrix = _bundled(fixes)
            matrix.fallback = f"the installed matrix does not load: {exc}"
    else:
        matrix = _bundled(fixes)
        matrix.fallback = unreadable
        if gone:  # `matrix update` installed one, and its folder is gone: said, never a silent fallback
            matrix.fallback = (f"the installed matrix is gone: {current} points at {os.readlink(current)}; "
                               "run `sparkdoctor matrix update` again")
    if matrix.fallback:
        matrix.source = f"bundled ({matrix.fallback})"
    local = locations.local_overrides()
    try:
        layered = local.is_dir() and any(local.glob("*.toml"))
    except OSError as exc:
        if not unreadable:  # the user's own overrides unread would be a silent change of verdicts
            raise MatrixError(f"{local}: the local overrides cannot be read ({exc.strerror or type(exc).__name__})") from None
        layered = False  # the whole data folder is unreadable: said in the fallback
    if layered:
        overlay(matrix, _load(local, fixes, path_given=True, strict_fixes=strict_fixes))
        matrix.source += f" + local overrides ({local})"
    return matrix


def _unreadable(current: Path, exc: OSError) -> str:
    """Why the data folder's matrix is not used when it cannot be read (one line, for Matrix.fallback)."""
    return (f"the data folder cannot be read ({current}: {exc.strerror or type(exc).__name__}): neither a matrix "
            "`matrix update` installed there nor local overrides are used; set SPARKDOCTOR_DATA_DIR to a folder of yours")


def _bundled(fixes: Path | None) -> Matrix:
    root = locations.data_dir("matrix")
    return cached(root, fixes, ("bundled",), lambda: _load(root, fixes, path_given=False))


def overlay(base: Matrix, local: Matrix) -> None:
    """Local entries and stacks replace those with the same id and add the rest."""
    ids = {e.id for e in local.entries}
    base.entries = [e for e in base.entries if e.id not in ids] + local.entries
    ids = {s.id for s in local.stacks}
    base.stacks = [s for s in base.stacks if s.id not in ids] + local.stacks
    base.files += local.files


def check_source_list(root: Path, names: list[str]) -> None:
    """A folder `matrix update` installed (it has a SOURCE.json) holds exactly the files SOURCE.json lists:
    a missing one (a damaged install) or one nobody installed is an error, never a smaller matrix."""
    source = root / "SOURCE.json"
    if not source.exists():
        return
    try:
        listed = json.loads(read_text(source, 1024 * 1024)).get("files")
    except (OSError, ValueError, AttributeError) as exc:
        raise MatrixError(f"{source}: unreadable ({getattr(exc, 'strerror', None) or type(exc).__name__}); reinstall it with `matrix update`") from None
    if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
        raise MatrixError(f"{source}: field 'files' must be the list of the matrix files installed; reinstall it with `matrix update`")
    missing, extra = sorted(set(listed) - set(names)), sorted(set(names) - set(listed))
    if missing:
        raise MatrixError(f"{root}: {len(missing)} of the {len(listed)} files SOURCE.json lists are missing ({', '.join(missing[:3])}"
                          f"{', ...' if len(missing) > 3 else ''}): a damaged install; run `matrix update` again or `matrix update --rollback`")
    if extra:
        raise MatrixError(f"{root}: {', '.join(extra[:3])} is not in SOURCE.json's file list: not part of what `matrix update` installed")


def _load(root: Path, fixes: Path | None, path_given: bool, strict_fixes: bool = False) -> Matrix:
    if not root.exists():
        raise MatrixError(f"{root}: no such matrix file or folder")
    files = sorted(root.glob("*.toml")) if root.is_dir() else [root]
    if not files:
        raise MatrixError(f"{root}: no *.toml matrix files")
    if root.is_dir():
        check_source_list(root, [f.name for f in files])
    entries: list[Entry] = []
    stacks: list[Stack] = []
    seen: dict[str, str] = {}
    tracking = Tracking()
    for f in files:
        e, s, t = load_file(f)
        tracking = tracking.merge(t, str(f))
        for kind, items in (("entry", e), ("stack", s)):
            for item in items:
                if item.id in seen:
                    raise MatrixError(f"{f}: {kind} id {item.id!r} is already used in {seen[item.id]}")
                seen[item.id] = str(f)
        entries += e
        stacks += s
    if any(e.fix is not None or e.action == "fix" for e in entries):
        bundled = not path_given or (root.is_dir() and root.resolve() == locations.data_dir("matrix").resolve())
        if bundled or fixes is not None or strict_fixes:
            check_fixes(entries, fix_ids(fixes), bundled and fixes is None, fixes)
    check_bracketable(entries, tracking)
    return Matrix(entries, stacks, [str(f) for f in files], tracking)
