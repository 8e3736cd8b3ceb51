"""`matrix verify --bounds`: every version bound of every entry, bracketed by its file checks on the
real released files (read member by member with sparkdoctor.released, never whole wheels).

For a bound `P SPEC` of an entry whose files table reads P (or a package released in lockstep with
P), the released versions of that package inside SPEC are the affected ones; the checks run on the
first and the last of them (every check must hold) and on the release just outside each bounded side
(below the first, above the last: each check must give what its `fixed` mode says, and at least one
must stop holding, or nothing tells the outside release apart). Verdicts per bound:

  bracketed       the checks hold inside and tell each bounded side's outside release apart
  not-bracketed   it cannot be (no file check reads P, no released version inside SPEC, every check
                  is fixed = "same"/"unchecked") - the reason is said
  contradicted    a check does not hold inside, or still holds outside
  error           a release could not be read (named)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from sparkdoctor.matrix import Entry, Matrix
from sparkdoctor.matrix.file_checks import FilesTable
from sparkdoctor.matrix.tracking import Tracking, bounds_of
from sparkdoctor.matrix.versions import version_in
from sparkdoctor.released import Reader, RemoteError
from sparkdoctor.verify.files import VersionRun, remote_run, table_for, tables_of

Log = Callable[[str], None]
VERDICTS = ("bracketed", "not-bracketed", "contradicted", "error")


@dataclass
class BoundResult:
    id: str
    package: str  # the bounded package
    spec: str
    verdict: str  # one of VERDICTS
    why: str
    reads: str | None = None  # the package whose released files the checks read
    first: str | None = None
    last: str | None = None
    below: str | None = None  # the release just outside the lower side
    above: str | None = None  # the release just outside the upper side
    runs: list[VersionRun] = field(default_factory=list)
    proposal: str | None = None  # a bound the released files support, when they show one
    source: str = "packages"  # the `when` field the bound is in: packages | constraints
    bytes_read: int = 0  # what bracketing this bound read from the registry (what earlier bounds read is not read again)
    requests: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "package": self.package, "spec": self.spec, "source": self.source, "verdict": self.verdict, "why": self.why,
                "proposal": self.proposal,
                "reads": self.reads, "first": self.first, "last": self.last, "below": self.below, "above": self.above,
                "bytes_read": self.bytes_read, "requests": self.requests, "runs": [r.to_dict() for r in self.runs]}


def bracket(entry: Entry, package: str, spec: str, reader: Reader, tracking: Tracking,
            log: Log | None = None) -> BoundResult:
    """One bound of one entry, bracketed (or not) on the released files."""
    out = BoundResult(entry.id, package, spec, "not-bracketed", "")
    table = table_for(entry, tracking.family(package))
    if table is None and entry.unbracketable:
        out.why = f"unbracketable (the entry says): {entry.unbracketable}"
        return out
    if not entry.files:
        out.why = f"no file check: the entry has no files table (a bound on {package} needs one on its released files)"
        return out
    if table is None:
        out.why = f"no file check on {package}: the files table reads {', '.join(t.package for t in tables_of(entry))}"
        return out
    out.reads = table.package
    if not any(c.fixed == "differs" for c in table.checks):
        out.why = "every check is fixed = \"same\" or \"unchecked\": nothing tells a release outside the bound apart"
        return out
    try:
        versions = reader.versions(table.package, dist=table.dist)
    except RemoteError as exc:
        out.verdict, out.why = "error", str(exc)
        return out
    inside = [i for i, v in enumerate(versions) if version_in(v, spec)]
    if not inside:
        out.why = f"no released version of {table.package} is inside {spec}"
        return out
    lo, hi = inside[0], inside[-1]
    out.first, out.last = versions[lo], versions[hi]
    out.below = versions[lo - 1] if lo > 0 else None
    out.above = versions[hi + 1] if hi + 1 < len(versions) else None
    plan = [(out.first, "affected"), (out.last, "affected"), (out.below, "fixed"), (out.above, "fixed")]
    seen: set[str] = set()
    for version, role in plan:
        if version is not None and version not in seen:
            seen.add(version)
            out.runs.append(remote_run(reader, table.package, table.checks, version, role, log, table.also, table.dist))
    errors = [r for r in out.runs if r.error]
    if errors:
        out.verdict, out.why = "error", f"{errors[0].version}: {errors[0].error}"
        return out
    wrong = [w for r in out.runs for w in r.wrong()]
    if wrong:
        out.verdict, out.why = "contradicted", "; ".join(wrong)
        first_run = out.runs[0]
        last_run = next((r for r in out.runs if r.version == out.last), None)
        if out.below is None and not first_run.holds and last_run is not None and last_run.holds:
            start = _first_holding(reader, table, versions[lo : hi + 1], log)
            if start is not None:
                out.proposal = f">={start}," + spec if not spec.startswith(">") else None
                out.why = (f"the bound has no lower side, but the checks do not hold on {out.first} (the first release) and first hold on "
                           f"{start}: the bound is wider than the claim" + (f"; propose {out.proposal}" if out.proposal else "") + "; " + out.why)
        return out
    below = f"fails on {out.below} below" if out.below else f"{out.first} is the first release"
    above = f"fails on {out.above} above" if out.above else f"open above: holds through {out.last}, the newest release"
    span = out.first if out.first == out.last else f"{out.first} and {out.last}"
    out.verdict, out.why = "bracketed", f"holds on {span}; {below}; {above}"
    return out


def _first_holding(reader: Reader, table: FilesTable, window: list[str], log: Log | None) -> str | None:
    """The first release of `window` (oldest first; its last one holds, its first does not) where every
    check holds, by bisection: where the code the checks look for first appeared."""
    lo, hi = 0, len(window) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        run = remote_run(reader, table.package, table.checks, window[mid], "probe", log, table.also, table.dist)
        if run.error:
            return None
        if run.holds:
            hi = mid
        else:
            lo = mid
    return window[hi]


def verify_bounds(matrix: Matrix, reader: Reader, entry_id: str | None = None, log: Log | None = None) -> list[BoundResult]:
    """Every bound of every entry (or of one), in matrix order: `when.packages`, then `when.constraints`."""
    tracking = matrix.tracking or Tracking()
    results = []
    for e in matrix.entries:
        if e.withdrawn or (entry_id is not None and e.id != entry_id):
            continue
        for source in ("packages", "constraints"):
            for package, spec in bounds_of(e, source).items():
                before = (reader.client.bytes_read, reader.client.requests)
                results.append(bracket(e, canonicalize_name(package), spec, reader, tracking, log=log))
                results[-1].source = source
                results[-1].bytes_read = reader.client.bytes_read - before[0]
                results[-1].requests = reader.client.requests - before[1]
                if log:
                    log(f"{e.id} {source} {package} {spec}: {results[-1].verdict}")
    return results


def summary(results: list[BoundResult]) -> dict[str, int]:
    return {v: sum(1 for r in results if r.verdict == v) for v in VERDICTS}


def sides_of(spec: str) -> int:
    """How many sides a specifier bounds: a lower side (>=, >), an upper side (<, <=), both for an
    exact or compatible release (==, ===, ~=); != only cuts releases out of a range and bounds none."""
    try:
        ops = {s.operator for s in SpecifierSet(spec)}
    except InvalidSpecifier:
        return 0
    both = bool(ops & {"==", "===", "~="})
    return int(both or bool(ops & {">=", ">"})) + int(both or bool(ops & {"<", "<="}))


def side_counts(results: list[BoundResult]) -> dict[str, int]:
    """The bounded sides of every bound and how many of them are bracketed (a bound is bracketed as a
    whole: each of its sides by the release just outside it)."""
    return {"sides": sum(sides_of(r.spec) for r in results),
            "bracketed": sum(sides_of(r.spec) for r in results if r.verdict == "bracketed")}
