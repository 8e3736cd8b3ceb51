"""An entry's `files` table: what the released wheels of a package must contain, so that an entry's
version bounds and symptom strings are checked mechanically (its evidence level `checked`).

Part of the entry schema (the loader checks it for every command); sparkdoctor.verify.files
downloads the wheels and runs the checks. Format:

    files.package = "vllm"                       # the distribution whose wheels are read
    files.affected = ["0.19.1"]                  # released versions where every check must hold
    files.fixed = ["0.20.0"]                     # released versions where they must not
    files.also = ["nvidia-cutlass-dsl-libs-core"]  # optional: wheels released in lockstep with
                                                 # `package` (matrix/tracking.toml [lockstep]) read
                                                 # with it at the same version, where that exists
    files.checks = [
      { path = "vllm/envs.py", contains = "VLLM_FOO" },                  # a string in a file
      { path = "vllm/*.py", lacks = "virtual_memory().available" },       # in none of the files
      { path = "vllm/*/flashinfer_utils.py", regex = "fall(ing)? back" },  # a regular expression
      { path = "*.dist-info/METADATA", contains = "Requires-Dist: x>=1" },  # a METADATA pin
      { path = "vllm/model_executor/foo.py", exists = false },           # a file (not) shipped
      { path = "vllm/envs.py", contains = "BAR", fixed = "same" },      # true on fixed versions too
      { path = "vllm/_C.abi3.so", cubins = ["sm_120"] },                 # cubin archs a .so ships
      { path = "vllm/_C.abi3.so", lacks_cubins = ["sm_120a", "sm_121a"] }, # archs it ships no cubin for
    ]

An entry whose bounds are on two packages (a `when.packages` bound and a `when.constraints` bound
on another package, say) gives one table per package as an array of tables, written after the
entry's other fields:

    [[entry.files]]
    package = "flashinfer-python"
    ...
    [[entry.files]]
    package = "nvidia-cutlass-dsl-libs-base"
    ...

Each bound is bracketed by the table that reads its package (or a wheel released in lockstep with
it); `matrix verify` runs every table. Two tables may not read the same package.

`dist = "sdist"` reads each version's source distribution instead of its wheel, for what only a
source build uses (CMakeLists.txt, cmake/*.cmake): paths are relative to the archive's top folder
(`CMakeLists.txt`, not `vllm-0.18.1/CMakeLists.txt`). The sdist is downloaded whole once and cached.

`also` is for a family whose files move between its wheels (cutlass-dsl's Python package left
libs-base for a new libs-core wheel in 4.6.0): the checks run over the members of `package`'s wheel
and of each `also` wheel released at the same version (one not released there is skipped), so a
check with a glob path such as `*/cute/nvgpu/warp/mma.py` follows the file.

`path` is a glob over the wheel's member names (fnmatch: `*` crosses folders); a check holds when
some matching member satisfies it (`lacks`: no matching member has the string; `exists` asks only
whether one matches; `cubins`: some matching member ships a cubin for every arch listed;
`lacks_cubins`: at least one member matches and none ships a cubin for any of them). Cubins are
listed with `cuobjdump --list-elf`, which names a family cubin (sm_120f) as plain sm_120: so a
family arch cannot be asked for by name (write sm_120, meaning "sm_120 or the family"). `fixed` says what the
check must give on the fixed versions: "differs" (default: part of the claim, which must not hold
there: at least one "differs" check fails on each fixed version), "same" (it must hold there too,
e.g. the code that prints a symptom), or "unchecked".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparkdoctor.matrix.model import MatrixError, refuse_unknown_keys
from sparkdoctor.matrix.versions import parse_version
from sparkdoctor.names import canonicalize_name
from sparkdoctor.patterns import regex_error

FIXED_MODES = ("differs", "same", "unchecked")
_PREDICATES = ("contains", "lacks", "regex", "exists", "cubins", "lacks_cubins")
CUBIN_KINDS = ("cubins", "lacks_cubins")
_ARCH = re.compile(r"sm_\d+a?")
_CHECK_KEYS = {"path", "fixed", "note", *_PREDICATES}
_TABLE_KEYS = {"package", "affected", "fixed", "checks", "also", "dist"}
DISTS = ("wheel", "sdist")


@dataclass(frozen=True)
class FileCheck:
    path: str
    kind: str  # contains | lacks | regex | exists | cubins | lacks_cubins
    value: Any  # the string, the pattern, the bool, or the tuple of arch names
    fixed: str = "differs"
    note: str = ""

    @property
    def label(self) -> str:
        if self.kind == "exists":
            return f"{self.path} {'exists' if self.value else 'is absent'}"
        if self.kind in CUBIN_KINDS:
            return f"{self.path} {'ships' if self.kind == 'cubins' else 'ships no'} cubins for {', '.join(self.value)}"
        verb = {"contains": "contains", "lacks": "lacks", "regex": "matches"}[self.kind]
        return f"{self.path} {verb} {self.value!r}"

    def to_dict(self) -> dict[str, object]:
        value = list(self.value) if self.kind in CUBIN_KINDS else self.value
        return {"path": self.path, self.kind: value, "fixed": self.fixed, **({"note": self.note} if self.note else {})}


@dataclass(frozen=True)
class FilesTable:
    package: str
    affected: tuple[str, ...]
    fixed: tuple[str, ...]
    checks: tuple[FileCheck, ...]
    also: tuple[str, ...] = ()  # wheels read with `package` at the same version, where released
    dist: str = "wheel"  # wheel | sdist: which released file of each version the checks read


def parse_files_table(table: object, label: str) -> FilesTable:
    """The checks of a `files` table; MatrixError naming `label` and the field otherwise."""
    where = f"{label}: field 'files"
    if not isinstance(table, dict):
        raise MatrixError(f"{where}' must be a table")
    refuse_unknown_keys(table, _TABLE_KEYS, f"{where}'")
    package = table.get("package")
    if not isinstance(package, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", package):
        raise MatrixError(f"{where}.package' must be a distribution name such as \"vllm\"")
    affected = _versions(table.get("affected"), f"{where}.affected'", need_one=True)
    fixed = _versions(table.get("fixed", []), f"{where}.fixed'", need_one=False)
    both = set(affected) & set(fixed)
    if both:
        raise MatrixError(f"{where}': version {sorted(both)[0]} is both affected and fixed")
    raw_checks = table.get("checks")
    if not isinstance(raw_checks, list) or not raw_checks:
        raise MatrixError(f"{where}.checks' must be a non-empty list of checks ({{ path = ..., contains = ... }})")
    checks = tuple(_check(c, f"{where}.checks[{i}]'") for i, c in enumerate(raw_checks))
    also = table.get("also", [])
    if not isinstance(also, list) or not all(isinstance(a, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", a) for a in also):
        raise MatrixError(f"{where}.also' must be a list of distribution names released in lockstep with files.package")
    also_names = tuple(canonicalize_name(a) for a in also)
    if canonicalize_name(package) in also_names:
        raise MatrixError(f"{where}.also' repeats files.package {package!r}")
    dist = table.get("dist", "wheel")
    if dist not in DISTS:
        raise MatrixError(f"{where}.dist' must be one of {', '.join(DISTS)}, not {dist!r}")
    if dist == "sdist" and (also_names or any(c.kind in CUBIN_KINDS for c in checks)):
        raise MatrixError(f"{where}.dist' \"sdist\" reads one source archive: no 'also' wheels, no cubin checks")
    return FilesTable(canonicalize_name(package), affected, fixed, checks, also_names, dist)


def parse_files_tables(value: object, label: str) -> tuple[FilesTable, ...]:
    """An entry's `files`: one table, or an array of tables (one per package read); MatrixError
    naming `label` and the field otherwise."""
    if isinstance(value, dict):
        return (parse_files_table(value, label),)
    if not isinstance(value, list) or not value:
        raise MatrixError(f"{label}: field 'files' must be a table or a non-empty array of tables ([[entry.files]])")
    tables = tuple(parse_files_table(t, f"{label} (files #{i + 1})") for i, t in enumerate(value))
    twice = next((t for i, t in enumerate(tables) if t.package in {u.package for u in tables[:i]}), None)  # a few tables
    if twice:
        raise MatrixError(f"{label}: field 'files' has two tables reading {twice.package!r}: merge their checks into one")
    return tables


def _versions(value: object, where: str, need_one: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MatrixError(f"{where} must be a list of released versions (strings)")
    if need_one and not value:
        raise MatrixError(f"{where} needs at least one version")
    for v in value:
        if parse_version(v) is None:
            raise MatrixError(f"{where} has {v!r}, which is not a PEP 440 version")
    return tuple(value)


def _check(raw: object, where: str) -> FileCheck:
    if not isinstance(raw, dict):
        raise MatrixError(f"{where} must be a table {{ path = ..., contains = ... }}")
    refuse_unknown_keys(raw, _CHECK_KEYS, where)
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip() or path.startswith("/") or ".." in path.split("/"):
        raise MatrixError(f"{where} needs path = a glob inside the wheel (relative, no '..')")
    kinds = [k for k in _PREDICATES if k in raw]
    if len(kinds) != 1:
        raise MatrixError(f"{where} needs exactly one of {', '.join(_PREDICATES)}")
    kind, value = kinds[0], raw[kinds[0]]
    if kind == "exists" and not isinstance(value, bool):
        raise MatrixError(f"{where}: exists must be true or false")
    if kind in CUBIN_KINDS:
        value = _archs(value, f"{where}: {kind}")
    elif kind != "exists" and (not isinstance(value, str) or not value):
        raise MatrixError(f"{where}: {kind} must be a non-empty string")
    if kind == "regex":
        err = regex_error(value)  # no nested-quantifier rule: a member's text is large and multi-line, so
        if err:                   # `(?:\s*#[^\n]*\n)*` is a real need; matching is bounded in time instead
            raise MatrixError(f"{where}: regex {value!r} does not compile: {err}")
    fixed = raw.get("fixed", "differs")
    if fixed not in FIXED_MODES:
        raise MatrixError(f"{where}: fixed must be one of {', '.join(FIXED_MODES)}, not {fixed!r}")
    note = raw.get("note", "")
    if not isinstance(note, str):
        raise MatrixError(f"{where}: note must be a string")
    return FileCheck(path, kind, value, fixed, note)


def _archs(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise MatrixError(f"{where} must be a non-empty list of arch names such as [\"sm_120a\"]")
    for arch in value:
        if re.fullmatch(r"sm_\d+f", arch):
            raise MatrixError(f"{where} has {arch!r}: cuobjdump lists family cubins as plain {arch[:-1]}; write that")
        if not _ARCH.fullmatch(arch):
            raise MatrixError(f"{where} has {arch!r}, which is not an arch name such as sm_90 or sm_120a")
    return tuple(value)
