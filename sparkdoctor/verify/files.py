"""File checks: prove an entry's version bounds and symptom strings against the released wheels.

The second kind of verify (the first installs and runs a probe): each version of an entry's `files`
table is downloaded (sparkdoctor.verify.wheels) and every check is run over the wheel's members.
On an affected version every check must hold; on a fixed version the claim must not: at least one
"differs" check fails there (each side of a two-sided bound may be proved by its own fact), and every
"same" check holds. `bisect` walks the registry's released versions to find where the checks stop holding
and compares that boundary with the entry's `when.packages` bound; `latest` runs the checks on the
newest release and says whether the entry's range still describes it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from packaging.version import Version

from sparkdoctor.matrix import Entry
from sparkdoctor.matrix.consistency import misplaced_versions
from sparkdoctor.matrix.file_checks import (
    CUBIN_KINDS,
    FileCheck,
    FilesTable,
    parse_files_tables,
)
from sparkdoctor.matrix.tracking import bounds_of
from sparkdoctor.matrix.versions import version_in
from sparkdoctor.patterns import search
from sparkdoctor.released import Reader, RemoteError, RemoteSdist, RemoteWheel
from sparkdoctor.released.cubins import FAMILY_CAVEAT, CubinError, Listing, decided_by
from sparkdoctor.released.strings import is_library
from sparkdoctor.verify.wheels import WheelError, WheelFiles, released_versions, wheel

# A member is a whole file (a CMakeLists.txt, a module), far longer than an environment value: a pattern that
# repeats gets this long to search one, so a loaded machine does not cut off an honest search.
MEMBER_MATCH_SECONDS = 5.0

Log = Callable[[str], None]


@dataclass
class VersionRun:
    """The checks of one entry on one released version."""

    version: str
    role: str  # affected | fixed | probe (bisect / latest)
    results: list[tuple[FileCheck, bool]] = field(default_factory=list)
    error: str | None = None
    evidence: list[str] = field(default_factory=list)  # what was read, e.g. the cubin archs a .so lists

    @property
    def holds(self) -> bool:
        """Does the entry's claim hold here (every check true)?"""
        return self.error is None and all(ok for _, ok in self.results)

    def wrong(self) -> list[str]:
        """What this version gives against its role, in words (empty: as the entry says)."""
        if self.error:
            return [self.error]
        out = []
        # On a fixed version the claim (every "differs" check together) must not hold: one of them
        # failing is enough, so a two-sided bound can be bracketed by two facts (a gate that appears
        # at the lower edge, a kernel that appears at the upper one).
        differs = [ok for check, ok in self.results if check.fixed == "differs"]
        claim_holds = bool(differs) and all(differs)
        for check, ok in self.results:
            if self.role == "affected" and not ok:
                out.append(f"affected {self.version}: {check.label} does not hold")
            elif self.role == "fixed" and check.fixed == "differs" and ok and claim_holds:
                out.append(f"fixed {self.version}: {check.label} still holds")
            elif self.role == "fixed" and check.fixed == "same" and not ok:
                out.append(f"fixed {self.version}: {check.label} does not hold")
        return out

    def to_dict(self) -> dict[str, object]:
        return {"version": self.version, "role": self.role, "error": self.error,
                "checks": [{"check": c.label, "holds": ok} for c, ok in self.results],
                **({"evidence": self.evidence} if self.evidence else {})}


@dataclass
class FileResult:
    id: str
    package: str
    verdict: str  # confirmed | contradicted | error
    why: str
    runs: list[VersionRun]
    kind: str = "files"

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "kind": self.kind, "package": self.package, "verdict": self.verdict, "why": self.why,
                "runs": [r.to_dict() for r in self.runs]}


class Members(Protocol):
    """What the file checks read of one release: WheelFiles, RemoteFiles, or several of them as UnionFiles."""

    names: list[str]

    @property
    def cubin_listings(self) -> dict[str, tuple[str, ...]]: ...

    def text(self, name: str) -> str: ...

    def cubins(self, name: str) -> tuple[str, ...]: ...


class UnionFiles:
    """The members of several wheels of one release (a files table's `package` and its `also` wheels),
    with the interface the checks read; a name in two wheels is read from the first."""

    def __init__(self, parts: Sequence[WheelFiles] | Sequence[RemoteFiles]):
        self.parts = parts
        self._owner: dict[str, Members] = {}
        for part in parts:
            for name in part.names:
                self._owner.setdefault(name, part)
        self.names = list(self._owner)

    @property
    def cubin_listings(self) -> dict[str, tuple[str, ...]]:
        return {n: a for part in self.parts for n, a in part.cubin_listings.items()}

    def text(self, name: str) -> str:
        return self._owner[name].text(name)

    def cubins(self, name: str) -> tuple[str, ...]:
        return self._owner[name].cubins(name)

    def close(self) -> None:
        for part in self.parts:
            if hasattr(part, "close"):
                part.close()


def check_holds(check: FileCheck, files: Members) -> bool:
    members = [n for n in files.names if fnmatch.fnmatchcase(n, check.path)]
    if check.kind == "exists":
        return bool(members) == check.value
    if check.kind == "contains":
        return any(check.value in files.text(n) for n in members)
    if check.kind == "lacks":
        return not any(check.value in files.text(n) for n in members)
    if check.kind == "cubins":
        return any(set(check.value) <= set(files.cubins(n)) for n in members)
    if check.kind == "lacks_cubins":
        return bool(members) and not any(set(check.value) & set(files.cubins(n)) for n in members)
    for name in members:
        found = search(check.value, files.text(name), seconds=MEMBER_MATCH_SECONDS)
        if found is None:  # a pattern that backtracks: the release cannot be judged by it, said instead of a hang
            raise WheelError(f"{name}: /{check.value}/ could not be matched within {MEMBER_MATCH_SECONDS:.0f} s")
        if found:
            return True
    return False


def checks_on(table: FilesTable, version: str, role: str, log: Log | None = None) -> VersionRun:
    if table.dist == "sdist":  # pip cannot fetch an sdist without building it: read it from the registry
        reader = Reader()
        try:
            return remote_run(reader, table.package, table.checks, version, role, log, dist="sdist")
        finally:
            reader.close()
    run = VersionRun(version, role)
    try:
        if log:
            log(f"reading {table.package}=={version}")
        parts = [WheelFiles(wheel(table.package, version))]
        # an `also` wheel released at this version, a pre-release too (a files table may name 4.8.0.dev0)
        parts += [WheelFiles(wheel(other, version)) for other in table.also
                  if Version(version) in {Version(v) for v in released_versions(other, pre=True)}]
        files = UnionFiles(parts) if len(parts) > 1 else parts[0]
        try:
            run.results = [(c, check_holds(c, files)) for c in table.checks]
            run.evidence = [f"{name}: cubins {', '.join(archs) or 'none'} ({FAMILY_CAVEAT})" for name, archs in files.cubin_listings.items()]
        finally:
            files.close()
    except WheelError as exc:
        run.error = str(exc)
    return run


# ---- released files read remotely (bounds, track, sdists) ------------------------------------------------
class RemoteFiles:
    """A remote wheel with the interface the file checks read (names, text, cubins). A library's cubins
    are read only until the cubin checks on that member are decided (sparkdoctor.released.cubins)."""

    def __init__(self, wheel: RemoteWheel | RemoteSdist, checks: tuple[FileCheck, ...] = ()):
        self.wheel = wheel
        self.names = wheel.names
        self.checks = [c for c in checks if c.kind in CUBIN_KINDS]
        self.listings: dict[str, Listing] = {}

    @property
    def cubin_listings(self) -> dict[str, tuple[str, ...]]:
        return {n: x.archs for n, x in self.listings.items()}

    def text(self, name: str) -> str:
        return self.wheel.text(name)

    def cubins(self, name: str) -> tuple[str, ...]:
        if name not in self.listings:
            decided = decided_by((c.kind, tuple(c.value)) for c in self.checks if fnmatch.fnmatchcase(name, c.path))
            try:
                self.listings[name] = self.wheel.cubins(name, decided)
            except CubinError as exc:
                raise WheelError(f"{self.wheel.file.filename}: {exc}") from None
        return self.listings[name].archs

    def evidence(self) -> list[str]:
        return [f"{n}: {x.words()}" for n, x in self.listings.items()]


def remote_run(reader: Reader, package: str, checks: tuple[FileCheck, ...], version: str, role: str, log: Log | None = None,
               also: tuple[str, ...] = (), dist: str = "wheel") -> VersionRun:
    """The checks on one release read remotely (with the `also` wheels of the same version, where
    released; dist "sdist": its source archive); a release that cannot be read is the run's error."""
    run = VersionRun(version, role)
    try:
        if log:
            log(f"reading {package}=={version}")
        # an `also` wheel released at this version, pre-release or yanked as well (cutlass-dsl 4.8.0.dev0's libs-core)
        read = [package] + [other for other in also if Version(version) in {Version(v) for v in reader.versions(other, prereleases=True, yanked=True)}]
        opened = [reader.open(p, version, dist) for p in read]
        exact = sorted({c.path for c in checks if not any(ch in c.path for ch in "*?[")})
        if isinstance(opened[0], RemoteSdist) and len(exact) == len({c.path for c in checks}):
            opened[0].find(exact)  # stream the archive only until these members are met
        parts = [RemoteFiles(o, checks) for o in opened]
        for part in parts:  # libraries are streamed, as far as their checks need (sparkdoctor.released.elf)
            part.wheel.prefetch(sorted({n for c in checks if c.kind != "exists" for n in part.names if fnmatch.fnmatchcase(n, c.path) and not is_library(n)}))
        files = UnionFiles(parts) if len(parts) > 1 else parts[0]
        run.results = [(c, check_holds(c, files)) for c in checks]  # the same interface as WheelFiles
        run.evidence = [reader.picked(p, version, dist) for p in read]
        run.evidence += [line for part in parts for line in part.evidence()]
        unmatched = [c.label for c in checks if c.kind != "exists" and not any(fnmatch.fnmatchcase(n, c.path) for n in files.names)]
        run.evidence += [f"no member matches {label}" for label in unmatched]
    except (RemoteError, WheelError) as exc:
        run.error = str(exc)
    return run


def tables_of(entry: Entry) -> tuple[FilesTable, ...]:
    """Every files table of the entry (one per package it reads)."""
    return parse_files_tables(entry.files, f"{entry.file}: entry {entry.id}")


def table_for(entry: Entry, family: set[str] | frozenset[str]) -> FilesTable | None:
    """The files table that reads one of `family` (a bounded package and its lockstep wheels)."""
    return next((t for t in tables_of(entry) if t.package in family), None) if entry.files else None


def verify_files(entry: Entry, log: Log | None = None, family: Callable[[str], set[str]] | None = None) -> FileResult:
    tables = tables_of(entry)
    package = ", ".join(t.package for t in tables)
    runs: list[VersionRun] = []
    why: list[str] = []
    for table in tables:
        mine = [checks_on(table, v, "affected", log) for v in table.affected]
        mine += [checks_on(table, v, "fixed", log) for v in table.fixed]
        runs += mine
        errors = [r.error for r in mine if r.error]
        if errors:
            return FileResult(entry.id, package, "error", f"{table.package}: {errors[0]}" if len(tables) > 1 else errors[0], runs)
        wrong = [w for r in mine for w in r.wrong()]
        if wrong:
            return FileResult(entry.id, package, "contradicted", (f"{table.package}: " if len(tables) > 1 else "") + "; ".join(wrong), runs)
        n = len(table.checks)
        caveat = f" ({FAMILY_CAVEAT})" if any(c.kind in CUBIN_KINDS for c in table.checks) else ""
        why.append((f"{table.package}: " if len(tables) > 1 else "") + f"{n} check{'s' * (n != 1)} hold on {', '.join(table.affected)}"
                   + (f" and not on {', '.join(table.fixed)}" if table.fixed else "") + caveat)
    misplaced = misplaced_versions(entry, family or (lambda p: {p}))
    if misplaced:  # the checks held as the table says, on versions the entry's own bound puts on the other side
        return FileResult(entry.id, package, "contradicted", "; ".join(misplaced), runs)
    return FileResult(entry.id, package, "confirmed", "; ".join(why), runs)


# ---- bisect and latest ----------------------------------------------------------------------------


def bisect(entry: Entry, log: Log | None = None, versions: tuple[str, ...] | None = None) -> dict[str, object]:
    """Find where the entry's claim stops holding between its newest affected and oldest fixed
    version (binary search over the released versions), and compare it with the entry's bound."""
    table = tables_of(entry)[0]  # the first files table: the one bisect and latest follow
    if not table.fixed:
        return {"id": entry.id, "verdict": "error", "why": "the files table lists no fixed version to bisect towards"}
    released = list(versions or released_versions(table.package))
    lo_v, hi_v = sorted((max(table.affected, key=Version), min(table.fixed, key=Version)), key=Version)
    window = [v for v in released if Version(lo_v) <= Version(v) <= Version(hi_v)]
    if len(window) < 2:
        return {"id": entry.id, "verdict": "error", "why": f"no released versions between {lo_v} and {hi_v}"}
    holds: dict[str, bool] = {}
    runs: list[VersionRun] = []

    def probe(i: int) -> bool:
        v = window[i]
        if v not in holds:
            run = checks_on(table, v, "probe", log)
            runs.append(run)
            if run.error:
                raise WheelError(run.error)
            holds[v] = run.holds
        return holds[v]

    try:
        first_state = probe(0)
        if probe(len(window) - 1) == first_state:
            return {"id": entry.id, "verdict": "error", "why": f"the checks give the same answer on {window[0]} and {window[-1]}: no boundary",
                    "runs": [r.to_dict() for r in runs]}
        lo, hi = 0, len(window) - 1  # probe(lo) == first_state != probe(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if probe(mid) == first_state:
                lo = mid
            else:
                hi = mid
    except WheelError as exc:
        return {"id": entry.id, "verdict": "error", "why": str(exc), "runs": [r.to_dict() for r in runs]}
    last_on, first_off = window[lo], window[hi]
    spec = bounds_of(entry).get(table.package)
    boundary = f"the claim holds on {last_on}, not on {first_off}" if first_state else f"the claim holds from {first_off}, not on {last_on}"
    verdict = "found"
    if spec is not None:
        inside = [bool(version_in(v, spec)) for v in (last_on, first_off)]
        verdict = "agrees" if inside == [first_state, not first_state] else "differs"
    why = boundary + (f"; the entry's bound is {table.package} {spec}" if spec else "; the entry has no version bound on it")
    return {"id": entry.id, "package": table.package, "verdict": verdict, "why": why, "last": last_on, "first": first_off,
            "bound": spec, "runs": [r.to_dict() for r in runs]}


def latest(entry: Entry, log: Log | None = None) -> dict[str, object]:
    """Run the entry's file checks on the newest release: does the entry's range still describe it?"""
    table = tables_of(entry)[0]
    try:
        newest = released_versions(table.package)[-1]
    except (WheelError, IndexError) as exc:
        return {"id": entry.id, "verdict": "error", "why": str(exc) or "no released version"}
    run = checks_on(table, newest, "probe", log)
    if run.error:
        return {"id": entry.id, "verdict": "error", "why": run.error, "version": newest}
    spec = bounds_of(entry).get(table.package)
    expected = bool(version_in(newest, spec)) if spec else None
    fixed_known = [v for v in table.fixed if Version(v) < Version(newest)]
    if expected is None:
        verdict, why = ("holds" if run.holds else "fixed"), f"no version bound; the claim {'holds' if run.holds else 'no longer holds'} on {newest}"
    elif expected == run.holds:
        verdict, why = "holds", f"{newest} is {'inside' if expected else 'outside'} {spec} and the checks agree"
    elif run.holds:
        verdict = "regression" if fixed_known else "range-must-grow"
        why = f"the claim holds again on {newest}, outside {spec}" + (f" (fixed in {', '.join(fixed_known)})" if fixed_known else "")
    else:
        verdict, why = "fixed-upstream", f"{newest} is inside {spec} but the claim no longer holds there: the bound can close"
    return {"id": entry.id, "package": table.package, "version": newest, "verdict": verdict, "why": why, "run": run.to_dict()}
