"""Judge today's and the predicted Facts with the matrix and tell the difference."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from sparkdoctor.arch import settle
from sparkdoctor.audit.served_model import recipe_facts
from sparkdoctor.conclusions import staleness, store
from sparkdoctor.conclusions.recipe_check import Finding, check
from sparkdoctor.conclusions.toolchain import ArmChange, Toolchains
from sparkdoctor.facts import Facts
from sparkdoctor.findings import (
    REQUIRES_FINDING_PREFIX,
    check_probes,
    install_findings,
    requirement_findings,
    unfinished_fix_finding,
)
from sparkdoctor.findings import Finding as EngineFinding
from sparkdoctor.ledger.store import Ledger
from sparkdoctor.matrix import Evaluation, evaluate_all
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.whatif.probe import ProbeRun
from sparkdoctor.whatif.ptx import PtxComparison
from sparkdoctor.whatif.resolve import Change

SEVERITY = {"info": 0, "warn": 1, "error": 2}


@dataclass(frozen=True)
class FindingRow:
    """A matrix entry, or one of check's own findings (installed files, fix's state file, a kernel probe), judged on one side."""

    id: str
    severity: str
    title: str
    evidence: list[str]
    unknown: list[str] | None = None  # cannot tell: what the predicted Facts do not say
    remedy: str = ""

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "severity": self.severity, "title": self.title, "evidence": self.evidence,
                                  "remedy": self.remedy}
        if self.unknown is not None:
            out["unknown"] = self.unknown
        return out


@dataclass(frozen=True)
class RecipeRow:
    """One `recipe check` finding of the recipe, today or after."""

    id: str
    kind: str | None
    severity: str
    title: str
    remedy: str = ""


@dataclass
class ModsDelta:
    """The recipe's mods judged on today's files and on the upgrade's (rows: sparkdoctor.mods.recipe findings)."""

    introduced: list[Finding] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)
    unchanged: list[Finding] = field(default_factory=list)


@dataclass
class RecipeWhatIf:
    """`whatif --recipe`: the recipe's findings today and after the upgrade."""

    name: str
    introduced: list[RecipeRow] = field(default_factory=list)
    fixed: list[RecipeRow] = field(default_factory=list)
    unchanged: list[RecipeRow] = field(default_factory=list)
    mods: ModsDelta | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)  # the rows and the mods by their fields: the keys of the whatif JSON's "recipe"


@dataclass
class StaleConclusion:
    """A ledger conclusion fresh today that the upgrade would make stale, and what would change."""

    conclusion: str
    changes: list[ArmChange]

    def to_json(self) -> dict[str, object]:
        return {"conclusion": self.conclusion, "changes": self.changes}


@dataclass
class ProbeComparison:
    """`whatif --probe`: the CuTe DSL probes compiled with today's and the proposed cutlass-dsl set (or a note why
    nothing was compiled), and the PTX probes compiled by each ptxas the upgrade moves (sparkdoctor.whatif.ptx)."""

    arch: str
    today: ProbeRun | None = None
    after: ProbeRun | None = None
    note: str | None = None
    ptx: PtxComparison | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"arch": self.arch}
        if self.note is not None:
            out["note"] = self.note
        else:
            out.update(today=self.today and self.today.to_json(), after=self.after and self.after.to_json())
        if self.ptx is not None:
            out["ptx"] = self.ptx.to_json()
        return out


@dataclass
class WhatIf:
    specs: list[str]
    changes: list[Change]
    fixed: list[FindingRow] = field(default_factory=list)
    introduced: list[FindingRow] = field(default_factory=list)
    unchanged: list[FindingRow] = field(default_factory=list)
    cannot_tell: list[FindingRow] = field(default_factory=list)  # matched today, unknown after
    notes: list[str] = field(default_factory=list)
    matrix: str = "bundled"
    probe: ProbeComparison | None = None
    recipe: RecipeWhatIf | None = None
    stale: list[StaleConclusion] | None = None  # None: no ledger to read (said in a note)
    target: str | None = None  # the interpreter judged
    installer: str | None = None  # the installer that ran the dry run
    pip_warnings: list[str] = field(default_factory=list)  # the dependency-conflict lines the dry run printed

    def gate(self, fail_on: str = "error") -> bool:
        """Does the upgrade introduce a finding (of the box, of the recipe or of its mods) at or above fail_on?"""
        return self._reaches("introduced", fail_on)

    def remaining(self, fail_on: str = "error") -> bool:
        """Is a finding at or above fail_on still there after the upgrade (unchanged: of the box, of the recipe, of its mods)?"""
        return self._reaches("unchanged", fail_on)

    def _reaches(self, rows: str, fail_on: str) -> bool:
        severities = [f.severity for f in getattr(self, rows)]
        if self.recipe is not None:
            severities += [f.severity for f in getattr(self.recipe, rows)]
            severities += [str(f["severity"]) for f in (getattr(self.recipe.mods, rows) if self.recipe.mods else [])]
        return any(SEVERITY.get(s, 0) >= SEVERITY[fail_on] for s in severities)

    def to_json(self) -> dict[str, object]:
        """The `whatif` JSON document's own keys (docs/json.md)."""
        rows = {name: [f.to_json() for f in getattr(self, name)] for name in ("fixed", "introduced", "unchanged", "cannot_tell")}
        return {"schema": 1, "kind": "whatif", "specs": self.specs, "matrix": self.matrix, "target": self.target,
                "installer": self.installer, "pip_warnings": self.pip_warnings,
                "changes": [c.to_dict() for c in self.changes], **rows,
                "recipe": None if self.recipe is None else self.recipe.to_json(),
                "stale_conclusions": None if self.stale is None else [s.to_json() for s in self.stale],
                "probe": None if self.probe is None else self.probe.to_json(), "notes": self.notes}


def _row(ev: Evaluation, unknown: list[str] | None = None) -> FindingRow:
    return FindingRow(ev.entry.id, ev.entry.severity, ev.entry.title, ev.evidence, unknown, " ".join(ev.entry.remedy.split()))


def compare(today: Facts, predicted: Facts, matrix: Matrix, specs: list[str], changes: list[Change], notes: list[str]) -> WhatIf:
    out = WhatIf(specs, changes, notes=notes, matrix=getattr(matrix, "source", "bundled"))
    for facts in (today, predicted):
        facts.arch = settle(facts.arch)
    before = {ev.entry.id: ev for ev in evaluate_all(matrix, today)}
    after = {ev.entry.id: ev for ev in evaluate_all(matrix, predicted)}
    for entry_id, ev in after.items():
        was = before.get(entry_id)
        if was is None or was.outcome != "match":
            if ev.outcome == "match":
                out.introduced.append(_row(ev))
        elif ev.outcome == "match":
            out.unchanged.append(_row(ev))
        elif ev.outcome == "clear":
            out.fixed.append(_row(was))
        else:
            out.cannot_tell.append(_row(was, ev.unknowns))
    _compare_engine(out, today, predicted, {c.name for c in changes}, matrix.packages())
    for f in check_probes(today, [ev for ev in before.values() if ev.outcome == "match"])[0]:
        out.cannot_tell.append(_engine_row(f, ["a kernel check compiled with today's files: whatif compiles none of the "
                                               "upgrade's (--probe compiles the CuTe DSL and PTX probes with them)"]))
    return out


def _engine_row(f: EngineFinding, unknown: list[str] | None = None) -> FindingRow:
    return FindingRow(f.id, f.severity, f.title, f.evidence, unknown, f.remedy)


def _compare_engine(out: WhatIf, today: Facts, predicted: Facts, changed: set[str], named: set[str]) -> None:
    """check's own findings from installed files (requires-*, files-missing-*, no-metadata-*, no-record-*) and
    fix-unfinished (fix's state file, which a prediction keeps) judged on both sides. A changed component's own
    requires-* cannot be told: the predicted Facts hold its old Requires-Dist, and pip's dry run judged the new one
    (pip_warnings). probe-* are compare's: today's kernels, the upgrade's compiled by none."""
    before, after = ({f.id: f for f in requirement_findings(facts) + install_findings(facts, named)
                      + [f for f in [unfinished_fix_finding(facts)] if f]} for facts in (today, predicted))
    for fid, f in after.items():
        (out.unchanged if fid in before else out.introduced).append(_engine_row(f))
    for fid, f in before.items():
        if fid in after:
            continue
        if f.id.startswith(REQUIRES_FINDING_PREFIX) and f.component in changed:
            out.cannot_tell.append(_engine_row(f, [f"{f.component}'s Requires-Dist after the upgrade: pip's dry run judged "
                                                   "them (its conflict lines are under pip_warnings)"]))
        else:
            out.fixed.append(_engine_row(f))


def compare_recipe(recipe: Recipe, matrix: Matrix, today: Facts, predicted: Facts, flags_today: Mapping[str, object] | None,
                   flags_after: Mapping[str, object] | None) -> RecipeWhatIf:
    """The recipe judged as `recipe check` judges it, on today's and on the predicted Facts: flags the new
    vLLM no longer accepts, env vars it no longer reads, workarounds whose reason goes away (stale)."""
    served = recipe_facts(recipe)
    before = {f["id"]: f for f in check(recipe, matrix, today, flags_today, served)}
    after = {f["id"]: f for f in check(recipe, matrix, predicted, flags_after, served)}

    def row(f: Finding) -> RecipeRow:
        kind = f.get("kind")
        return RecipeRow(str(f["id"]), kind if isinstance(kind, str) else None, str(f["severity"]), str(f["title"]),
                         str(f.get("remedy") or ""))

    return RecipeWhatIf(recipe.name, [row(f) for i, f in after.items() if i not in before],
                        [row(f) for i, f in before.items() if i not in after],
                        [row(f) for i, f in after.items() if i in before])


def stale_conclusions(ledger: Ledger, python: str, today: Facts, predicted: Facts) -> list[StaleConclusion]:
    """The ledger's conclusions that are fresh today and would be stale after the upgrade, with what
    would change (the staleness rules of `sparkdoctor conclusions`, on the predicted Facts of `python`):
    the reruns to plan before upgrading."""

    class Seeded(Toolchains):
        def __init__(self, facts: Facts):
            super().__init__()
            self._facts[python] = facts

    before, after = Seeded(today), Seeded(predicted)
    out = []
    for conclusion in store.latest(ledger):
        now = staleness.judge(conclusion, ledger, before)
        if now.state != "fresh":
            continue
        then = staleness.judge(conclusion, ledger, after)
        if then.state == "stale":
            out.append(StaleConclusion(conclusion.name, then.changes))
    return out
