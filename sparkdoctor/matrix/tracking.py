"""Tracking metadata of a matrix (top-level `[tracked]` and `[lockstep]` tables, in any matrix file,
normally matrix/tracking.toml) and the rule that ties evidence to bounds.

    tracked_on = "2026-11-28"      # the day (UTC) they were tracked: a release uploaded later is new even
                                   # when its version is lower (a backport: cutlass-dsl 4.5.3 after 4.6.0)
    [tracked]                      # the release each tracked package is tracked through
    vllm = "0.33.0"
    [lockstep]                     # families released with the same version numbers
    nvidia-cutlass-dsl = ["nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13"]

Rule (checked by the loader): an entry whose evidence is `checked` has a file check on the released
files of every package it bounds (`when.packages` other than "*"): its `files.package` is that package
or one of its lockstep family. A bound nothing can bracket is not `checked`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.matrix.model import Entry, MatrixError
from sparkdoctor.matrix.versions import parse_version
from sparkdoctor.names import canonicalize_name, name_problem


@dataclass
class Tracking:
    tracked: dict[str, str] = field(default_factory=dict)  # canonical package -> version
    lockstep: dict[str, tuple[str, ...]] = field(default_factory=dict)  # canonical package -> its family
    where: dict[str, str] = field(default_factory=dict)  # "tracked.NAME" -> the file that says it
    tracked_on: str | None = None  # YYYY-MM-DD: releases uploaded after it are re-checked whatever their version

    def merge(self, other: Tracking, where: str) -> Tracking:
        if other.tracked_on:
            if self.tracked_on:
                raise MatrixError(f"{where}: tracked_on is already given in {self.where['tracked_on']}")
            self.tracked_on, self.where["tracked_on"] = other.tracked_on, where
        for key in ("tracked", "lockstep"):
            mine, theirs = getattr(self, key), getattr(other, key)
            for name, value in theirs.items():
                if name in mine:
                    raise MatrixError(f"{where}: [{key}] {name} is already given in {self.where[f'{key}.{name}']}")
                mine[name] = value
                self.where[f"{key}.{name}"] = where
        return self

    def family(self, package: str) -> set[str]:
        """The package and every package released in lockstep with it (canonical names)."""
        name = canonicalize_name(package)
        groups = [{head, *members} for head, members in self.lockstep.items()]
        return {name}.union(*(group for group in groups if name in group))

    def to_dict(self) -> dict[str, Any]:
        return {"tracked": dict(self.tracked), "tracked_on": self.tracked_on, "lockstep": {k: list(v) for k, v in self.lockstep.items()}}


def tracking_from(doc: dict, where: str) -> Tracking:
    out = Tracking()
    on = doc.get("tracked_on")
    if on is not None:
        if not isinstance(on, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", on):
            raise MatrixError(f"{where}: 'tracked_on' must be a date YYYY-MM-DD, not {on!r}")
        out.tracked_on, out.where["tracked_on"] = on, where
    tracked = doc.get("tracked", {})
    if not isinstance(tracked, dict):
        raise MatrixError(f"{where}: 'tracked' must be a table of package = \"version\"")
    for name, version in tracked.items():
        if name_problem(name):  # a name becomes a registry URL's path and a pip argument
            raise MatrixError(f"{where}: field 'tracked': {name_problem(name)}")
        if not isinstance(version, str) or parse_version(version) is None:
            raise MatrixError(f"{where}: field 'tracked' {name}: {version!r} is not a PEP 440 version")
        out.tracked[canonicalize_name(name)] = version
        out.where[f"tracked.{canonicalize_name(name)}"] = where
    lockstep = doc.get("lockstep", {})
    if not isinstance(lockstep, dict):
        raise MatrixError(f"{where}: 'lockstep' must be a table of package = [\"package\", ...]")
    for name, members in lockstep.items():
        if not isinstance(members, list) or not members or not all(isinstance(m, str) and m for m in members):
            raise MatrixError(f"{where}: field 'lockstep' {name}: must be a non-empty list of package names")
        bad = next((n for n in [name, *members] if name_problem(n)), None)
        if bad is not None:
            raise MatrixError(f"{where}: field 'lockstep': {name_problem(bad)}")
        out.lockstep[canonicalize_name(name)] = tuple(canonicalize_name(m) for m in members)
        out.where[f"lockstep.{canonicalize_name(name)}"] = where
    return out


def bounds_of(entry: Entry, when_field: str = "packages") -> dict[str, str]:
    """The entry's version bounds: canonical package -> specifier, "*" (no bound) left out.
    `when_field` "constraints" gives the bounds of `when.constraints` (what the target's pip constraints pin)."""
    packages = entry.when.get(when_field) or {}
    return {canonicalize_name(k): v for k, v in packages.items() if isinstance(v, str) and v.strip() != "*"}


def check_bracketable(entries: list[Entry], tracking: Tracking) -> None:
    for e in entries:
        if e.evidence != "checked" or e.withdrawn:
            continue
        tables = e.files if isinstance(e.files, list) else [e.files] if e.files else []
        reads = {canonicalize_name(t["package"]) for t in tables if isinstance(t, dict) and isinstance(t.get("package"), str)}
        for package, spec in [*bounds_of(e).items(), *bounds_of(e, "constraints").items()]:
            if not reads & tracking.family(package):
                what = (f"its files table{'s' * (len(reads) > 1)} read{'s' * (len(reads) == 1)} {', '.join(sorted(reads))}" if reads
                        else "it has no files table")
                raise MatrixError(f"{e.file}: entry {e.id}: field 'evidence' is \"checked\" but its bound {package} {spec} "
                                  f"cannot be bracketed ({what}): add a files table on {package} or use evidence = \"reported\"")
