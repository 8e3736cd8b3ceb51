"""What `fix` answers, one dataclass per mode (plan, apply, rollback, history, prune): `to_json()` writes the keys
fix's JSON always had (`fix_version`, `mode`, ...), `console_text()` the lines it always printed.
Their view: sparkdoctor/views/fix.py; sparkdoctor/fix/render.py draws their lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparkdoctor.fix import render
from sparkdoctor.fix.model import Plan
from sparkdoctor.sink import SelfDrawn

if TYPE_CHECKING:
    from sparkdoctor.fix.pipeline import Applied, JournalRow, Pruned, RolledBack
    from sparkdoctor.sink import Sink


def _text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


class FixDocument(SelfDrawn):
    """What `fix` answers: a plan, an apply, a rollback, the history or a prune."""


@dataclass
class PlanDocument(FixDocument):
    """The plan (a dry run; or an apply that had nothing to do or was refused) and the check it was made from."""

    plan: Plan
    report: Any
    dry_run: bool = True
    """Say that nothing was changed and how to apply (a plan with steps, shown without --yes)."""
    shown: bool = True
    """Print the plan on the console (an apply refused for a plan with steps prints only the refusal)."""

    def to_json(self) -> dict[str, Any]:
        return render.plan_document(self.plan, self.report)

    def console_text(self, sink: Sink) -> str:
        if not self.shown:
            return ""
        extra = ["Dry run: nothing was changed. Apply with --yes."] if self.dry_run and not self.plan.empty else []
        return _text(render.plan_lines(self.plan) + extra)


@dataclass
class ApplyDocument(FixDocument):
    """The plan that was applied, what happened, and the check after it."""

    plan: Plan
    applied: Applied

    def to_json(self) -> dict[str, Any]:
        return render.mode_document("apply", self.applied.to_json())

    def console_text(self, sink: Sink) -> str:
        return _text(render.plan_lines(self.plan) + render.applied_lines(self.applied))


@dataclass
class RollbackDocument(FixDocument):
    rolled_back: RolledBack

    def to_json(self) -> dict[str, Any]:
        return render.mode_document("rollback", self.rolled_back.to_json())

    def console_text(self, sink: Sink) -> str:
        return _text(render.rollback_lines(self.rolled_back))


@dataclass
class HistoryDocument(FixDocument):
    rows: list[JournalRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return render.mode_document("history", [r.to_json() for r in self.rows])

    def console_text(self, sink: Sink) -> str:
        return _text(render.history_lines(self.rows))


@dataclass
class PruneDocument(FixDocument):
    pruned: Pruned

    def to_json(self) -> dict[str, Any]:
        return render.mode_document("prune", self.pruned.to_json())

    def console_text(self, sink: Sink) -> str:
        return _text(render.prune_lines(self.pruned))
