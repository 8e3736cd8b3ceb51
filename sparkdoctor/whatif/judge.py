"""Judge today's and the predicted Facts with the matrix and tell the difference."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.whatif.resolve import Change

SEVERITY = {"info": 0, "warn": 1, "error": 2}


@dataclass
class WhatIf:
    specs: list[str]
    changes: list[Change]
    fixed: list[dict[str, Any]] = field(default_factory=list)
    introduced: list[dict[str, Any]] = field(default_factory=list)
    unchanged: list[dict[str, Any]] = field(default_factory=list)
    cannot_tell: list[dict[str, Any]] = field(default_factory=list)  # matched today, unknown after
    notes: list[str] = field(default_factory=list)
    matrix: str = "bundled"

    def gate(self, fail_on: str = "error") -> bool:
        """Does the upgrade introduce a finding at or above fail_on?"""
        return any(SEVERITY.get(f["severity"], 0) >= SEVERITY[fail_on] for f in self.introduced)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "kind": "whatif", "specs": self.specs, "matrix": self.matrix,
                "changes": [c.to_dict() for c in self.changes], "fixed": self.fixed, "introduced": self.introduced,
                "unchanged": self.unchanged, "cannot_tell": self.cannot_tell, "notes": self.notes}


def _row(ev: Any) -> dict[str, Any]:
    return {"id": ev.entry.id, "severity": ev.entry.severity, "title": ev.entry.title, "evidence": ev.evidence}


def compare(today: Any, predicted: Any, matrix: Any, specs: list[str], changes: list[Change], notes: list[str]) -> WhatIf:
    from sparkdoctor.arch import settle
    from sparkdoctor.matrix import evaluate_all

    out = WhatIf(specs, changes, notes=notes, matrix=getattr(matrix, "source", "bundled"))
    for facts in (today, predicted):
        facts.arch = settle(facts.arch)
    before = {ev.entry.id: ev for ev in evaluate_all(matrix, today)}
    after = {ev.entry.id: ev for ev in evaluate_all(matrix, predicted)}
    for entry_id, ev in after.items():
        was = before.get(entry_id)
        was_match = was is not None and was.outcome == "match"
        if ev.outcome == "match":
            (out.unchanged if was_match else out.introduced).append(_row(ev))
        elif was_match and ev.outcome == "clear":
            out.fixed.append(_row(was))
        elif was_match:
            out.cannot_tell.append({**_row(was), "unknown": ev.unknowns})
    return out
