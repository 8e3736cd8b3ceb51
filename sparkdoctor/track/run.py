"""Track new releases against every entry. Verdicts per entry (over the new releases of the package
its files table reads):

  still-affected       the checks hold on a new release inside the entry's range (nothing to change)
  upper-bound-moves    the checks hold on a new release above the range: the upper bound must move
  lower-bound-moves    the checks hold on a new release below the range (tracked through an older one)
  no-longer-affected   a new release inside the range no longer holds: the bound closes there (cited)
  check-broken         the release could not be read, or a check's file is gone from it (moved or
                       removed: the check must be re-pointed before it can say anything)
  unchanged            every new release is outside the range and the checks agree
  no-new-release       nothing newer than the tracked-through version (up to --through)
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from sparkdoctor.errors import UsageError
from sparkdoctor.matrix import Entry, Matrix
from sparkdoctor.matrix.file_checks import FileCheck
from sparkdoctor.matrix.tracking import Tracking, bounds_of
from sparkdoctor.matrix.versions import version_in
from sparkdoctor.released import Reader, RemoteError
from sparkdoctor.track.pins import conflicts, pinned_release, read_pins
from sparkdoctor.verify.files import VersionRun, remote_run, tables_of

Log = Callable[[str], None]
VERDICTS = ("check-broken", "no-longer-affected", "upper-bound-moves", "lower-bound-moves", "still-affected", "unchanged", "no-new-release")
NEEDS_EDIT = VERDICTS[:4]  # the verdicts that call for an edit (exit 1)
# The releases of one package a run reads and checks, the newest by version: a daily run sees a handful of new
# releases and a matrix tracked a year behind a few dozen, so 300 cuts only an index that lists thousands (broken
# or hostile), which would otherwise keep the daily gate reading one release after another for hours.
MAX_RELEASES = 300
MAX_BUILDS = 16  # the local builds named per release (download.pytorch.org lists a handful: cpu, cu126, cu128, cu130)


@dataclass
class EntryTrack:
    id: str
    file: str
    package: str  # the package whose files the checks read
    spec: str | None  # the entry's bound on that package's family, if any
    verdict: str = "no-new-release"
    why: str = ""
    runs: list[tuple[VersionRun, bool | None]] = field(default_factory=list)  # (run, inside the range)
    proposal: dict[str, Any] | None = None
    oldest_known: str | None = None  # the oldest release the files table names: before it, an absent file is "not yet there"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "file": self.file, "package": self.package, "spec": self.spec, "verdict": self.verdict,
                "why": self.why, "proposal": self.proposal,
                "releases": [{"version": r.version, "inside": inside, "holds": None if r.error else r.holds, "error": r.error,
                              "evidence": r.evidence} for r, inside in self.runs]}


@dataclass
class TrackResult:
    packages: list[dict[str, Any]]
    entries: list[EntryTrack]
    untracked: list[dict[str, str]]
    proposals: list[dict[str, Any]]
    platform: str
    python: str
    matrix: str
    taken_at: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat())
    pins: list[dict[str, Any]] = field(default_factory=list)  # what each newest release requires of the others, extras included
    pin_conflicts: list[dict[str, str]] = field(default_factory=list)
    pin_errors: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        return {v: sum(1 for e in self.entries if e.verdict == v) for v in VERDICTS}

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "kind": "matrix-track", "taken_at": self.taken_at, "matrix": self.matrix,
                "platform": self.platform, "python": self.python, "summary": self.summary(), "packages": self.packages,
                "entries": [e.to_dict() for e in self.entries], "untracked": self.untracked, "proposals": self.proposals,
                "pins": self.pins, "pin_conflicts": self.pin_conflicts, "pin_errors": self.pin_errors}


def _uploaded_after(reader: Reader, package: str, since: str, on: str | None) -> tuple[set[str], dict[str, str]]:
    """Versions not above `since` that were uploaded on or after the day the matrix was tracked (`on`, a date), or,
    with no date, after `since` itself was uploaded: backports of an older line (cutlass-dsl 4.5.3 after 4.6.0). The
    day itself counts: a run at 06:00 proposes that day, and a backport uploaded at 15:00 was otherwise never seen."""
    try:
        times = reader.index.upload_times(package)
    except RemoteError:
        return set(), {}
    after = on or times.get(str(Version(since)), "")[:10]
    if not after:
        return set(), times
    return {v for v, t in times.items() if (t[:10] >= after if on else t[:10] > after) and Version(v) <= Version(since)}, times


def _new_releases(reader: Reader, package: str, since: str, through: str | None, on: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"package": package, "tracked": since, "through": through, "releases": [], "backports": [], "yanked": [],
                           "note": "", "left_out": 0}
    # a release is its public version: a local build (0.4.0+cu130, tracked by an older run or given to --through) is 0.4.0's
    since, through = Version(since).public, through and Version(through).public
    try:  # every release a box can run: `check` compares pre-releases, and pip installs a yanked one pinned with ==
        versions = reader.versions(package, prereleases=True, yanked=True)
        yanked = reader.index.yanked(package)
        builds = reader.index.builds(package)
    except RemoteError as exc:
        row["note"] = str(exc)
        row["error"] = "no project" not in str(exc)  # not on this index is a fact to say; an unreachable index is an error
        return row
    if through is not None and Version(through) not in {Version(v) for v in versions}:  # 0.4 is 0.4.0
        newest = [v for v in versions if Version(v) <= Version(through)]
        row["note"] = f"{package} {through} does not exist on the registry" + (f"; read up to {newest[-1]}" if newest else "")
    cap = Version(through) if through else None
    backports, times = _uploaded_after(reader, package, since, on)
    new = [v for v in versions if (Version(v) > Version(since) or v in backports) and (cap is None or Version(v) <= cap)]
    row["releases"] = new[-MAX_RELEASES:]  # versions() is oldest first
    if len(new) > MAX_RELEASES:
        row["left_out"] = len(new) - MAX_RELEASES
        row["note"] = "; ".join(filter(None, [row["note"], f"{len(new):,} new releases listed, more than the {MAX_RELEASES} a run reads: "
                                              f"{row['left_out']:,} older ones left out ({new[0]} to {new[row['left_out'] - 1]}), not checked"]))
    kept = set(row["releases"])
    row["backports"] = [v for v in versions if v in backports and v in kept]
    row["yanked"] = [v for v in row["releases"] if v in yanked]
    row["uploaded"] = {v: times[v] for v in row["releases"] if v in times}
    # the local builds a release is listed in, the newest MAX_BUILDS named (an index may list thousands) and the rest counted
    row["builds"] = {v: builds[v][-MAX_BUILDS:] for v in row["releases"] if v in builds}
    row["builds_more"] = {v: len(builds[v]) - MAX_BUILDS for v in row["builds"] if len(builds[v]) > MAX_BUILDS}
    return row


def _short(path: str) -> str:
    """A matrix file as matrix/NAME.toml: the same in every checkout and installed copy."""
    return f"matrix/{Path(path).name}"


def _bound(entry: Entry, tracking: Tracking, package: str) -> str | None:
    family = tracking.family(package)
    bounds = [*bounds_of(entry).items(), *bounds_of(entry, "constraints").items()]  # a constraint's table follows its bound
    return next((spec for p, spec in bounds if p in family), None)


def _without_upper(spec: str) -> str:
    kept = [str(s) for s in SpecifierSet(spec) if s.operator not in ("<", "<=", "==", "===", "~=")]
    return ",".join(sorted(kept)) or "*"


def judge(entry: EntryTrack, releases: list[str]) -> None:
    """The entry's verdict and proposed edit from its runs on the new releases."""
    if not entry.runs:
        entry.verdict, entry.why = "no-new-release", "no release of it newer than the tracked-through version"
        return
    def absent(r: VersionRun) -> bool:  # a check's file is missing, on a release the files table's versions do not precede
        missing = any(e.startswith("no member matches") for e in r.evidence)
        return missing and not (entry.oldest_known and Version(r.version) < Version(entry.oldest_known))

    # a file gone from a release outside a bounded range agrees with the bound (the code it read is gone there)
    broken = [(r, i) for r, i in entry.runs if r.error or (absent(r) and i is not False)]
    if broken:
        r = broken[0][0]
        entry.verdict = "check-broken"
        where = ", ".join(b.version for b, _ in broken)
        entry.why = f"{r.error or next(e for e in r.evidence if e.startswith('no member matches'))} on {where}"
        moved = next((e for b, _ in broken for e in b.evidence if e.startswith("moved: ")), None)
        if moved:
            entry.why += f"; {moved}"
        return
    spec = entry.spec
    if spec is None:
        holding = [r.version for r, _ in entry.runs if r.holds]
        not_holding = [r.version for r, _ in entry.runs if not r.holds]
        entry.why = "no version bound on it (the entry's other conditions decide); the checks hold on " + (", ".join(holding) or "none of the new releases")
        if holding and not_holding:
            entry.why += f"; not on {', '.join(not_holding)}"
        if not holding:
            entry.verdict = "unchanged"
        elif entry.runs[-1][0].holds:
            entry.verdict = "still-affected"
        else:  # held on a new release and stopped holding since: a bound a later release moved
            last = holding[-1]
            stop = next(r.version for r, _ in entry.runs if Version(r.version) > Version(last))
            entry.verdict = "no-longer-affected"
            _propose(entry, "*", f"<{stop}", f"the checks hold through {last} and on none from {stop} on "
                     "(unless another condition of the entry already reads this)")
        return
    stopped = next((r for r, inside in entry.runs if inside and not r.holds), None)
    outside_holds = [r for r, inside in entry.runs if not inside and r.holds]
    if stopped is not None:
        entry.verdict = "no-longer-affected"
        inside_runs = [r for r, inside in entry.runs if inside]
        last_hold = max((i for i, r in enumerate(inside_runs) if r.holds), default=-1)
        gaps = [r.version for r in inside_runs[:last_hold] if not r.holds]  # not holding, with a later release that holds again
        tail = next((r.version for r in inside_runs[last_hold + 1:]), None)
        if not gaps:
            entry.why = f"{stopped.version} is inside {spec} but its released files no longer hold the checks: the bound closes at {stopped.version}"
            _propose(entry, spec, f"{spec},<{stopped.version}", f"the checks fail on {stopped.version} (first new release where they do)")
            return
        entry.why = (f"{', '.join(gaps)} inside {spec} no longer hold the checks, but they hold again on {inside_runs[last_hold].version}: "
                     f"only {'that release leaves' if len(gaps) == 1 else 'those releases leave'} the range" + (f"; the bound closes at {tail}" if tail else ""))
        _propose(entry, spec, ",".join([spec, *(f"!={g}" for g in gaps), *([f"<{tail}"] if tail else [])]),
                 f"the checks fail on {', '.join(gaps)}{f' and from {tail} on' if tail else ''}, and hold on {inside_runs[last_hold].version}")
        return
    lower_only = SpecifierSet(",".join(str(c) for c in SpecifierSet(spec) if c.operator in (">=", ">")))
    below = [r for r in outside_holds if not lower_only.contains(r.version, prereleases=True)]
    above = [r for r in outside_holds if r not in below]
    gaps = [r.version for r, _ in entry.runs if not r.holds]
    if above:
        last = above[-1].version
        newer = [v for v in releases if Version(v) > Version(last)]
        to = _without_upper(spec) + (f",<{newer[0]}" if newer else "")
        entry.verdict = "upper-bound-moves"
        entry.why = f"the checks still hold on {', '.join(r.version for r in above)}, above {spec}"
        between = [v for v in gaps if Version(v) < Version(above[0].version) and not version_in(v, spec)
                   and lower_only.contains(v, prereleases=True)]  # above the range, below the release that holds again
        entry.why += _not_contiguous(between)
        _propose(entry, spec, to.lstrip(",") if to != "*" else "*", f"the checks hold through {last}")
        return
    if below:
        first = below[0].version
        entry.verdict = "lower-bound-moves"
        entry.why = f"the checks hold on {', '.join(r.version for r in below)}, below {spec}"
        between = [v for v in gaps if Version(below[-1].version) < Version(v) and not lower_only.contains(v, prereleases=True)]
        entry.why += _not_contiguous(between)
        kept = ",".join(str(c) for c in SpecifierSet(spec) if c.operator not in (">=", ">"))
        _propose(entry, spec, f">={first}" + (f",{kept}" if kept else ""), f"the checks hold on {first} already")
        return
    inside = [r.version for r, i in entry.runs if i]
    if inside:
        entry.verdict, entry.why = "still-affected", f"the checks still hold on {', '.join(inside)} (inside {spec})"
    else:
        entry.verdict, entry.why = "unchanged", f"every new release is outside {spec} and the checks agree"


def _propose(entry: EntryTrack, old: str, new: str, because: str) -> None:
    entry.proposal = {"entry": entry.id, "file": entry.file, "field": f"when.packages.{entry.package}", "from": old, "to": new,
                      "because": because}


def _not_contiguous(between: list[str]) -> str:
    if not between:
        return ""
    return f"; not on {', '.join(between)} between: the affected releases are not contiguous (a second range, or a narrower check)"


def moved_to(reader: Reader, tracking: Tracking, package: str, version: str, checks: tuple[FileCheck, ...]) -> list[str]:
    """Where a check's missing file went: the same path in another wheel of the lockstep family at the
    same version (cutlass-dsl moved its Python package from libs-base to libs-core in 4.6.0)."""
    out = []
    for other in sorted(tracking.family(package) - {package}):
        try:
            names = reader.release(other, version).names
        except RemoteError:
            continue
        hits = [c.path for c in checks if c.kind != "exists" and any(fnmatch.fnmatchcase(n, c.path) for n in names)]
        if hits:
            out.append(f"moved: {', '.join(sorted(set(hits)))} is in {other} {version} (re-point files.package, or read it with files.also)")
    return out


def track(matrix: Matrix, reader: Reader, through: dict[str, str] | None = None, log: Log | None = None,
          since: str | None = None) -> TrackResult:
    """`since` (YYYY-MM-DD) overrides the matrix's tracked_on: releases uploaded after it are re-checked."""
    tracking = matrix.tracking or Tracking()
    on = since or tracking.tracked_on
    through = {canonicalize_name(k): v for k, v in (through or {}).items()}
    followed = {q for p in tracking.tracked for q in tracking.family(p)}
    if unknown := sorted(set(through) - followed):  # a typo would be read through the newest, silently
        raise UsageError(f"--through {unknown[0]}={through[unknown[0]]}: {unknown[0]} is not a package this matrix tracks "
                         f"(tracked: {', '.join(sorted(tracking.tracked)) or 'none'})")
    def cap(p: str) -> str | None:  # a family member follows its family's --through
        return through.get(p) or next((through[q] for q in sorted(tracking.family(p)) if q in through), None)

    packages = [_new_releases(reader, p, version, cap(p), on) for p, version in tracking.tracked.items()]
    releases = {row["package"]: row["releases"] for row in packages}
    entries: list[EntryTrack] = []
    untracked: list[dict[str, str]] = []
    for e in matrix.entries:
        if e.withdrawn:
            continue
        tables = tables_of(e) if e.files else ()
        reads_all = {t.package for t in tables}
        for package, spec in bounds_of(e).items():
            family = tracking.family(package)
            if any(p in family for p in tracking.tracked) and not reads_all & family:
                untracked.append({"id": e.id, "package": package, "spec": spec,
                                  "why": f"no file check on {package}" + (f" (its files table reads {', '.join(sorted(reads_all))})" if reads_all else " (no files table)")
                                  + (f"; the entry says why: {e.unbracketable}" if e.unbracketable else "")})
        for table in tables:
            reads = table.package
            if reads not in releases:
                continue
            item = EntryTrack(e.id, _short(e.file), reads, _bound(e, tracking, reads),
                              oldest_known=min((*table.affected, *table.fixed), key=Version))
            for version in releases[reads]:
                run = remote_run(reader, reads, table.checks, version, "probe", log, table.also, table.dist)
                if any(x.startswith("no member matches") for x in run.evidence):
                    run.evidence += moved_to(reader, tracking, reads, version, table.checks)
                item.runs.append((run, None if item.spec is None else bool(version_in(version, item.spec))))
            judge(item, releases[reads])
            entries.append(item)
            if log:
                log(f"{e.id}: {item.verdict}")
    proposals = [e.proposal for e in entries if e.proposal]
    broken = any(e.verdict == "check-broken" for e in entries)
    for row in packages:
        newest = row["releases"][-1] if row["releases"] and Version(row["releases"][-1]) > Version(row["tracked"]) else None
        if newest and not row["left_out"] and not any(e.package == row["package"] and e.verdict == "check-broken" for e in entries):
            read = any(e.package == row["package"] for e in entries)
            because = (f"every entry's file checks were re-run on {', '.join(row['releases'])}" if read else
                       f"no entry's file check reads {row['package']}: its new releases {', '.join(row['releases'])} were listed, nothing re-run")
            proposals.append({"file": _short(tracking.where.get(f"tracked.{row['package']}", "tracking.toml")),
                              "field": f"tracked.{row['package']}", "from": row["tracked"], "to": newest, "because": because})
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    if proposals and not broken and tracking.tracked_on != today and not any(r.get("error") or r["left_out"] for r in packages):
        proposals.append({"file": _short(tracking.where.get("tracked_on") or next(iter(tracking.where.values()), "tracking.toml")),
                          "field": "tracked_on", "from": tracking.tracked_on, "to": today,
                          "because": "every release uploaded up to today was listed and its entries' checks re-run"})

    newest = {row["package"]: max([row["tracked"], *row["releases"]], key=Version) for row in packages if not row.get("error")}
    pins, pin_errors = read_pins(reader, newest, set(tracking.tracked))
    unreleased = []
    for pin in [p for p in pins if p.extra is None and pinned_release(p) and pinned_release(p) != newest.get(p.requires)]:
        pinned = str(pinned_release(pin))
        more, errors = read_pins(reader, {pin.requires: pinned}, set(tracking.tracked))  # the release it pins
        pins += [m for m in more if m not in pins]
        pin_errors += errors
        listed = {*reader.versions(pin.requires, True, yanked=True), *reader.versions(pin.requires, True, "sdist", yanked=True)}
        if errors and pinned not in listed:  # pip finds nothing to install for the pin: the release cannot be installed
            unreleased.append({"release": f"{pin.package} {pin.version}", "with": f"{pin.requires} {pinned}", "package": pin.requires,
                               "specs": f"{pin.spec} (not on the index)",
                               "why": f"{pin.package} {pin.version} pins {pin.requires}{pin.spec}, a release the index does not "
                                      f"list: pip cannot install {pin.package}=={pin.version}"})
    return TrackResult(packages, entries, untracked, proposals, reader.platform, reader.python, matrix.source,
                       pins=[asdict(p) for p in pins], pin_conflicts=unreleased + conflicts(pins, newest), pin_errors=pin_errors)
