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
    probe: dict[str, Any] | None = None  # --probe: {"today": ..., "after": ...}, sparkdoctor.whatif.probe
    recipe: dict[str, Any] | None = None  # {"name", "introduced", "fixed", "unchanged"}: the recipe's findings, today vs after
    stale: list[dict[str, Any]] | None = None  # ledger conclusions fresh today, stale after: [{"conclusion", "changes"}]

    def gate(self, fail_on: str = "error") -> bool:
        """Does the upgrade introduce a finding (of the box or of the recipe) at or above fail_on?"""
        rows = self.introduced + ((self.recipe or {}).get("introduced") or []) + \
            (((self.recipe or {}).get("mods") or {}).get("introduced") or [])
        return any(SEVERITY.get(f["severity"], 0) >= SEVERITY[fail_on] for f in rows)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": 1, "kind": "whatif", "specs": self.specs, "matrix": self.matrix,
                "changes": [c.to_dict() for c in self.changes], "fixed": self.fixed, "introduced": self.introduced,
                "unchanged": self.unchanged, "cannot_tell": self.cannot_tell, "recipe": self.recipe, "stale_conclusions": self.stale, "probe": self.probe, "notes": self.notes}


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


def compare_recipe(recipe: Any, matrix: Any, today: Any, predicted: Any, flags_today: Any, flags_after: Any) -> dict[str, Any]:
    """The recipe judged as `recipe check` judges it, on today's and on the predicted Facts: flags the new
    vLLM no longer accepts, env vars it no longer reads, workarounds whose reason goes away (stale)."""
    from sparkdoctor.conclusions.recipe_check import check
    from sparkdoctor.conclusions.served_model import recipe_facts

    served = recipe_facts(recipe)
    before = {f["id"]: f for f in check(recipe, matrix, today, flags_today, served)}
    after = {f["id"]: f for f in check(recipe, matrix, predicted, flags_after, served)}

    def row(f: dict[str, Any]) -> dict[str, Any]:
        return {"id": f["id"], "kind": f.get("kind"), "severity": f["severity"], "title": f["title"]}

    return {"name": recipe.name, "introduced": [row(f) for i, f in after.items() if i not in before],
            "fixed": [row(f) for i, f in before.items() if i not in after],
            "unchanged": [row(f) for i, f in after.items() if i in before]}


def stale_conclusions(ledger: Any, python: str, today: Any, predicted: Any) -> list[dict[str, Any]]:
    """The ledger's conclusions that are fresh today and would be stale after the upgrade, with what
    would change (the staleness rules of `sparkdoctor conclusions`, on the predicted Facts of `python`):
    the reruns to plan before upgrading."""
    from sparkdoctor.conclusions import staleness, store
    from sparkdoctor.conclusions.toolchain import Toolchains

    class Seeded(Toolchains):
        def __init__(self, facts: Any):
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
            out.append({"conclusion": conclusion.name, "changes": then.changes})
    return out
