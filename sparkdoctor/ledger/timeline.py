"""The ledger as a timeline, for `history --html`: every run's headline and correctness verdict over time, where
each recipe's toolchain changed and what changed, the A/B comparisons with their ratios and intervals, the conclusions and
their reruns. Reads only. A row whose JSON is damaged is counted and left out, never fatal.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import TypedDict

from sparkdoctor.ledger.compare import toolchain_changes
from sparkdoctor.ledger.store import decode, number


class Run(TypedDict):
    id: int
    created_at: str
    recipe: str
    fingerprint: str
    tps: float | None
    comparison: int | None
    arm: str | None
    correctness: str | None  # the correctness gate's verdict (reference | correct | wrong | ...; None: not run)


class Change(TypedDict):
    recipe: str
    run: int
    created_at: str
    tps: float | None
    what: list[str]


class Level(TypedDict):
    """One concurrency level of a stored A/B comparison."""

    id: int
    created_at: str
    a: str
    b: str
    status: str
    concurrency: object
    ratio: float
    low: object
    high: object
    verdict: object


class Conclusion(TypedDict):
    id: int
    name: str
    created_at: str
    outcome: str
    verdict: object


@dataclass
class Timeline:
    runs: list[Run] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    comparisons: list[Level] = field(default_factory=list)
    conclusions: list[Conclusion] = field(default_factory=list)
    damaged: int = 0
    latest_facts: dict[str, object] | None = None


def _text(value: object) -> str:
    """A TEXT column as text ("" for NULL): SQLite keeps whatever was stored, a BLOB too (bytes, which no str sorts
    against)."""
    if value is None or isinstance(value, str):
        return value or ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read(db: sqlite3.Connection) -> Timeline:
    tl = Timeline()
    last: dict[str, tuple[int, str]] = {}  # recipe -> (run id, fingerprint) of its previous run
    pairs: list[tuple[int, int, Change]] = []
    for rid, created, recipe, fingerprint, comparison, arm, summary in db.execute(
            "SELECT id, created_at, recipe_name, fingerprint, comparison_id, arm, summary_json FROM runs ORDER BY id"):
        doc = decode("summary_json", summary)[0]
        created, recipe, fingerprint, arm = map(_text, (created, recipe, fingerprint, arm))
        if not isinstance(doc, dict):
            tl.damaged += 1
            continue
        head = doc.get("headline")
        tps = head.get("decode_tps_per_stream") if isinstance(head, dict) else None
        checked = doc.get("correctness")
        verdict = checked.get("verdict") if isinstance(checked, dict) else None
        run: Run = {"id": rid, "created_at": created, "recipe": recipe or "(url)", "fingerprint": fingerprint,
               "tps": tps if number(tps, False) else None, "comparison": comparison, "arm": arm,
               "correctness": verdict if isinstance(verdict, str) else None}
        tl.runs.append(run)
        before = last.get(run["recipe"])
        if before is not None and before[1] != fingerprint:
            change: Change = {"recipe": run["recipe"], "run": rid, "created_at": created, "tps": run["tps"], "what": []}
            tl.changes.append(change)
            pairs.append((before[0], rid, change))
        last[run["recipe"]] = (rid, fingerprint)
    _name_changes(db, pairs)
    for cid, created, a, b, status, result in db.execute(
            "SELECT id, created_at, a_label, b_label, status, result_json FROM comparisons ORDER BY id"):
        doc = decode("result_json", result)[0]
        created, a, b, status = map(_text, (created, a, b, status))
        for level in (doc or {}).get("levels") or [] if isinstance(doc, dict) else []:
            ratio = level.get("ratio") if isinstance(level, dict) else None
            # finite numbers only (ledger.store.number): a 401-digit bound was an OverflowError in the error bars
            if isinstance(ratio, dict) and number(ratio.get("ratio"), False):
                low, high = (ratio.get(k) if number(ratio.get(k)) else None for k in ("ci_low", "ci_high"))
                tl.comparisons.append({"id": cid, "created_at": created, "a": a, "b": b, "status": status,
                                       "concurrency": level.get("concurrency"), "ratio": ratio["ratio"],
                                       "low": low, "high": high,
                                       "verdict": ratio.get("verdict")})
    for cid, name, created, outcome, data in db.execute(
            "SELECT id, name, created_at, outcome, data_json FROM conclusions ORDER BY id"):
        doc = decode("data_json", data)[0]
        tl.conclusions.append({"id": cid, "name": _text(name), "created_at": _text(created), "outcome": _text(outcome) or "recorded",
                               "verdict": doc.get("verdict") if isinstance(doc, dict) else "(damaged)"})
    if tl.runs:
        row = db.execute("SELECT facts_json FROM runs WHERE id = ?", (tl.runs[-1]["id"],)).fetchone()
        facts = decode("facts_json", row[0])[0] if row else None
        tl.latest_facts = facts if isinstance(facts, dict) else None
    return tl


def _name_changes(db: sqlite3.Connection, pairs: list[tuple[int, int, Change]]) -> None:
    """What changed at each toolchain change (the Facts of the two runs, read only for those runs)."""
    ids = sorted({i for a, b, _ in pairs for i in (a, b)})
    facts: dict[int, object] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for rid, text in db.execute(f"SELECT id, facts_json FROM runs WHERE id IN ({marks})", chunk):
            facts[rid] = decode("facts_json", text)[0]
    for a, b, change in pairs:
        fa, fb = facts.get(a), facts.get(b)
        if isinstance(fa, dict) and isinstance(fb, dict):
            try:
                change["what"] = [f"{r['what']}: {r['a']} -> {r['b']}" for r in toolchain_changes(fa, fb)]
            except (KeyError, TypeError, ValueError, AttributeError) as exc:  # damaged Facts: marked, content unknown
                change["what"] = [f"(cannot tell: {str(exc)[:100]})"]
        else:
            change["what"] = ["(the Facts of one run are damaged)"]
