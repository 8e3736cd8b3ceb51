"""What `fix` answers, one dataclass per mode (plan, apply, rollback, history, prune): `to_json()` writes the keys
fix's JSON always had (`fix_version`, `mode`, ...); their view (sparkdoctor/views/fix.py) prints the lines it always
printed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparkdoctor.fix.model import Plan

if TYPE_CHECKING:
    from sparkdoctor.findings import Report
    from sparkdoctor.fix.pipeline import Applied, JournalRow, Pruned, RolledBack

FIX_VERSION = 1


def mode_document(mode: str, body: object) -> dict[str, object]:
    """The JSON of rollback, history and prune: `body` under "result" (an apply's keys are at the top)."""
    return {"fix_version": FIX_VERSION, "mode": mode, "result": body}


class FixDocument:
    """What `fix` answers: a plan, an apply, a rollback, the history or a prune."""

    def to_json(self) -> dict[str, object]:
        raise NotImplementedError


@dataclass
class PlanDocument(FixDocument):
    """The plan (a dry run; or an apply that had nothing to do or was refused) and the check it was made from."""

    plan: Plan
    report: Report
    dry_run: bool = True
    """Say that nothing was changed and how to apply (a plan with steps, shown without --yes)."""
    shown: bool = True
    """Print the plan on the console (an apply refused for a plan with steps prints only the refusal)."""

    def to_json(self) -> dict[str, object]:
        return {"fix_version": FIX_VERSION, "mode": "plan", "plan": self.plan.to_dict(),
                "findings": sorted(f.id for f in self.report.findings), "verdict": self.report.verdict()}


@dataclass
class ApplyDocument(FixDocument):
    """The plan that was applied, what happened, and the check after it."""

    plan: Plan
    applied: Applied

    def to_json(self) -> dict[str, object]:
        return {"fix_version": FIX_VERSION, "mode": "apply", **self.applied.to_json()}


@dataclass
class RollbackDocument(FixDocument):
    rolled_back: RolledBack

    def to_json(self) -> dict[str, object]:
        return mode_document("rollback", self.rolled_back.to_json())


@dataclass
class HistoryDocument(FixDocument):
    rows: list[JournalRow] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return mode_document("history", [r.to_json() for r in self.rows])


@dataclass
class PruneDocument(FixDocument):
    pruned: Pruned

    def to_json(self) -> dict[str, object]:
        return mode_document("prune", self.pruned.to_json())
