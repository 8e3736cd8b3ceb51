"""Is a conclusion still true of this box? Judged from the ledger and the current Facts, never guessed:
  fresh         every arm's target has the fingerprint its runs were measured on;
  stale         some target's fingerprint differs; `changes` says exactly what (package versions,
                modified files, driver, env, ...);
  broken        runs it points to are gone from the ledger: there is nothing left to compare with;
  incomparable  a recipe changed since (argv, env or model), or bench measures differently now: a
                rerun would compare apples to pears, so none is offered (asv marks such pairs `x`).
A stale conclusion whose recipe can no longer be loaded (the file or its model is gone) stays stale
and says why it cannot be re-run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.bench import BENCH_VERSION
from sparkdoctor.bench.model_identity import identity
from sparkdoctor.bench.run import resolved_recipe
from sparkdoctor.conclusions import store
from sparkdoctor.conclusions.model import (
    Conclusion,
    ConclusionError,
    folder_note,
    in_folder,
)
from sparkdoctor.conclusions.toolchain import (
    ArmChange,
    Toolchains,
    material,
    python_of,
    what_changed,
)
from sparkdoctor.conclusions.workarounds import load_arm
from sparkdoctor.facts import Facts, FactsError
from sparkdoctor.ledger.store import Ledger, recipe_hash


@dataclass
class Status:
    conclusion: Conclusion
    state: str
    changes: list[ArmChange] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why broken / incomparable / not re-runnable
    rerunnable: bool = True
    pythons: dict[str, str] = field(default_factory=dict)  # arm -> the target python
    notes: list[str] = field(default_factory=list)  # what the reader should know (where its relative paths are read)

    @property
    def word(self) -> str:
        """What the listing shows: the state, or "flipped" for a fresh one whose last rerun flipped."""
        return "flipped" if self.state == "fresh" and self.conclusion.outcome == "flipped" else self.state

    def to_dict(self) -> dict[str, object]:
        return {"conclusion": self.conclusion.to_dict(), "state": self.state, "status": self.word,
                "changes": self.changes, "reasons": self.reasons, "rerunnable": self.rerunnable,
                "pythons": self.pythons, "notes": self.notes}


def _unreadable(run: dict[str, Any] | None) -> str | None:
    """Why a stored run cannot be judged (None: it can): gone, a damaged column, or Facts this sparkdoctor
    cannot read (a schema it does not know, wrong types)."""
    if run is None:
        return "gone"
    if run.get("damaged") or not isinstance(run["facts"], dict):
        return "; ".join(run.get("damaged") or ["facts_json is not an object"])
    try:
        Facts.from_dict(run["facts"], source="ledger")
    except FactsError as exc:
        return f"its stored toolchain cannot be read: {exc}"
    return None


def judge(conclusion: Conclusion, ledger: Ledger, toolchains: Toolchains) -> Status:
    with in_folder(conclusion.data):  # its recipes' models named relative to bench's folder are found there
        status = _judge(conclusion, ledger, toolchains)
    note = None if conclusion.damaged else folder_note(conclusion.data)
    if note:
        status.notes.append(note)
    return status


def _judge(conclusion: Conclusion, ledger: Ledger, toolchains: Toolchains) -> Status:
    if conclusion.damaged:
        return Status(conclusion, "broken", reasons=[f"its ledger row is damaged ({conclusion.damaged}): record it again"],
                      rerunnable=False)
    data = conclusion.data
    wanted = [rid for ids in (data.get("runs") or {}).values() for rid in ids]
    gone = sorted(set(wanted) - store.existing_runs(ledger, wanted))
    if gone or not wanted:
        why = (f"run{'s' if len(gone) > 1 else ''} {', '.join(map(str, gone))} {'are' if len(gone) > 1 else 'is'} gone from the "
               "ledger" if gone else "it names no runs")
        return Status(conclusion, "broken", reasons=[f"{why}: nothing left to compare with; record it again"],
                      rerunnable=False)
    status = Status(conclusion, "fresh")
    if data.get("bench_version") != BENCH_VERSION:
        status.state = "incomparable"
        status.reasons.append(f"measured by bench version {data.get('bench_version')}, this sparkdoctor measures with "
                              f"{BENCH_VERSION}: the numbers are not comparable; record it again")
    seen: set[str] = set()
    for arm, conclusion_arm in conclusion.arms.items():
        run = ledger.run(data["runs"][arm][-1])
        problem = _unreadable(run)
        if problem or run is None:
            return Status(conclusion, "broken", reasons=[f"run {data['runs'][arm][-1]} (arm {arm}) is damaged in the "
                                                         f"ledger ({problem}): record it again"], rerunnable=False)
        python = python_of(run["facts"]) or ""
        status.pythons[arm] = python
        try:
            recipe = load_arm(conclusion_arm, data.get("sets"))
        except ConclusionError as exc:
            status.rerunnable = False
            status.reasons.append(f"arm {arm} cannot be re-run: {exc}")
        else:
            if recipe_hash(resolved_recipe(recipe)) != data["recipe_hashes"][arm]:
                status.state = "incomparable"
                status.reasons.append(f"recipe {arm} ({conclusion_arm.path}) changed since the conclusion (argv, env or model "
                                      "differ): a rerun would compare another configuration; record a new conclusion")
        try:
            current = toolchains.facts(python, run["facts"].get("container"))
        except ConclusionError as exc:
            status.rerunnable = False
            status.reasons.append(f"arm {arm}: {exc}")
            if status.state == "fresh":
                status.state = "stale"
            continue
        current = _with_served_model(current, run["facts"])

        # the stored facts under this sparkdoctor's fingerprint rules: a rule that grew (a package now counted)
        # does not make a conclusion stale by itself, only a change in what it counts does
        then = Facts.from_dict(run["facts"], source="ledger").fingerprint()
        if current.fingerprint() not in (run["fingerprint"], then):
            for row in what_changed(material(run["facts"]), material(current)):
                if row["text"] not in seen:
                    seen.add(row["text"])
                    status.changes.append({**row, "arm": arm})
            if status.state == "fresh":
                status.state = "stale"
    if status.state == "stale" and not status.changes and not status.reasons:
        status.reasons.append("the fingerprint differs in no field this sparkdoctor names (a newer Facts layout)")
    if status.state == "incomparable":
        status.rerunnable = False
    return status


def _with_served_model(current: Facts, old_facts: dict[str, Any]) -> Facts:
    """The current Facts with the identity the run's model folder has NOW, when the run recorded one."""
    model = (old_facts.get("recipe") or {}).get("model") or {}
    if not model.get("identity") or not model.get("ref"):
        return current
    now = {"ref": model["ref"], "identity": identity(model["ref"])}
    return dataclasses.replace(current, recipe={**(current.recipe or {}), "model": now})
