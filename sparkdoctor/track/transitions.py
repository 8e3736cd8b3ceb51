"""`matrix track --probe`, across releases: each tracked package that brings a compiler or kernel source
(sparkdoctor.track.probe) probed on its tracked-through release and every new one, in version order. A probe whose
answer flips between a release and the last earlier one that had an answer is a transition (`starts refusing`: a
breakage found before anyone reports it; `stops refusing`: a fix); one that no entry's bound already separates
becomes a proposed entry in `matrix track`'s proposal shape, never applied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from sparkdoctor.matrix.model import Entry, Matrix
from sparkdoctor.matrix.tracking import Tracking, bounds_of
from sparkdoctor.released import Reader
from sparkdoctor.track.probe import COMPONENT, ReleaseProbe, probe_kind, probe_release

Log = Callable[[str], None]


@dataclass
class Transition:
    package: str
    group: str
    probes: list[str]
    before: str  # the last release with an answer
    after: str
    change: str  # starts refusing | stops refusing
    detail: str
    known_by: list[str] = field(default_factory=list)  # entries whose bound on the package separates the two releases

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProbeTrack:
    arch: str
    releases: list[ReleaseProbe]
    transitions: list[Transition]
    proposals: list[dict[str, Any]]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"arch": self.arch, "releases": [r.to_json() for r in self.releases],
                "transitions": [t.to_json() for t in self.transitions], "proposals": self.proposals, "notes": self.notes}


def transitions(releases: list[ReleaseProbe]) -> list[Transition]:
    """Where a probe's answer flips between a release and the last earlier one that had an answer (releases in
    version order, one package). Probes of one group flipping between the same two releases are one transition."""
    last: dict[tuple[str, str], tuple[str, bool, str]] = {}  # (group, probe) -> (version, refuses, detail)
    grouped: dict[tuple[str, str, str, str], Transition] = {}
    for rel in releases:
        for o in rel.outcomes:
            now = o.refuses
            if now is None:
                continue
            seen = last.get((o.group, o.probe))
            last[(o.group, o.probe)] = (rel.version, now, o.detail)
            if seen is None or seen[1] == now:
                continue
            change = "starts refusing" if now else "stops refusing"
            key = (o.group, seen[0], rel.version, change)
            if key not in grouped:
                detail = f"{seen[0]}: {seen[2]}; {rel.version}: {o.detail}"
                grouped[key] = Transition(rel.package, o.group, [], seen[0], rel.version, change, detail)
            grouped[key].probes.append(o.probe)
    return list(grouped.values())


def known_by(entries: list[Entry], family: set[str], t: Transition) -> list[str]:
    """Entries whose bound on the package's family separates the two releases (one is inside it, the other not):
    the matrix already draws a line there, so the transition is said with them instead of proposed."""

    out = set()
    for e in entries:
        if getattr(e, "withdrawn", False):
            continue
        for package, spec in [*bounds_of(e).items(), *bounds_of(e, "constraints").items()]:
            if package not in family:
                continue
            try:
                inside = SpecifierSet(spec)
                if inside.contains(t.before, prereleases=True) != inside.contains(t.after, prereleases=True):
                    out.add(e.id)
            except (InvalidSpecifier, InvalidVersion):
                continue
    return sorted(out)


def proposal(t: Transition, arch: str, kind: str) -> dict[str, object]:
    """A new entry, in `matrix track`'s proposal shape: its range on the package and why."""
    spec = f">={t.after}" if t.change == "starts refusing" else f"<{t.after}"
    slug = "".join(c if c.isalnum() else "-" for c in t.group.split(":")[-1].lower()).strip("-")
    what = ", ".join(t.probes)
    return {"entry": f"probe-{t.package}-{slug}-{arch.replace('_', '')}", "file": f"matrix/{COMPONENT[kind]}.toml",
            "field": f"when.packages.{t.package}", "from": "(new entry)", "to": spec,
            "because": (f"{t.group}: {what} {t.change} {arch} from {t.after} on (compiled/read here from the released "
                        f"files; {t.before} answered the opposite): {t.detail}")}


def probe_track(matrix: Matrix, reader: Reader, packages: list[dict[str, Any]], arch: str = "sm_121a", log: Log | None = None) -> ProbeTrack:
    """Every tracked package that brings a compiler or kernel source and has new releases: its tracked-through
    release and each new one probed, compared in order; a transition no entry names becomes a proposal."""

    tracking = matrix.tracking or Tracking()
    out = ProbeTrack(arch, [], [], [], [])
    for row in packages:
        kind = probe_kind(row["package"])
        if kind is None or not row["releases"]:
            continue
        probed = []
        for version in [row["tracked"], *row["releases"]]:
            if log:
                log(f"probe: {row['package']} {version}")
            probed.append(probe_release(reader, row["package"], version, arch, reader.python))
        out.releases += probed
        for t in transitions(probed):
            t.known_by = known_by(list(matrix.entries), set(tracking.family(row["package"])), t)
            out.transitions.append(t)
            if not t.known_by:
                out.proposals.append(proposal(t, arch, kind))
    if not out.releases:
        out.notes.append("no new release of a package that brings a compiler or kernel source (triton, nvidia-cuda-nvcc-*, "
                         "nvidia-cutlass-dsl, flashinfer-python): nothing probed")
    out.notes.append("compiled or read here without a GPU: a probe says whether a release assembles or admits the arch, "
                     "not that a GB10 ran its result")
    return out


def probe_lines(d: dict[str, Any]) -> list[str]:
    """The probe section of `matrix track`'s console and markdown: transitions first, then what was probed."""
    out = []
    for t in d["transitions"]:
        known = f" (a bound of {', '.join(t['known_by'])} changes there: not proposed)" if t["known_by"] else " (no entry has it: proposed)"
        out.append(f"probe: {t['package']} {t['before']} -> {t['after']}: {t['group']}: {', '.join(t['probes'])} "
                   f"{t['change']} {d['arch']}{known}")
    for r in d["releases"]:
        counts = Counter(o["verdict"] for o in r["outcomes"])
        said = r["error"] or ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "nothing to probe"
        out.append(f"probed {r['package']} {r['version']} ({r['kind']}{', cached' if r['cached'] else ''}): {said}")
    return out + [f"note: {n}" for n in d["notes"]]
