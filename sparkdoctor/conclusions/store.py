"""Conclusions in the ledger: one row per recording, a rerun adds a row that points to the one it
re-measured (`previous_id`), so the history of "is X still faster?" is kept, newest row per name wins.

The runs behind a conclusion are read from the ledger's `runs` table (those of its comparison); a
conclusion names its runs by id, so one whose runs were deleted is found out (staleness.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

from sparkdoctor.conclusions.model import (
    CONCLUSION_VERSION,
    Arm,
    Conclusion,
    ConclusionError,
    shape_problem,
)
from sparkdoctor.ledger.schema import LedgerError
from sparkdoctor.ledger.store import Ledger, decode

_COLUMNS = "id, name, created_at, comparison_id, previous_id, outcome, data_json"


def _row(row: tuple) -> Conclusion:
    """A stored conclusion; a row whose data_json is damaged comes back marked (`damaged`), not raised."""
    data, damage = decode("data_json", row[6])
    if damage is None:
        damage = shape_problem(data)
    if damage is not None:
        return Conclusion(row[0], str(row[1]), str(row[2]), None, None, None, {}, damaged=damage)
    return Conclusion(row[0], row[1], row[2], row[3], row[4], row[5], data)


class LedgerReadError(ConclusionError, LedgerError):
    """The ledger itself failed (malformed, locked, read-only): a LedgerError (exit 5) to the commands,
    a ConclusionError to the code that only knows conclusions. The exit code is named here: by the method
    resolution order ConclusionError's (an InputError, exit 2) would come first."""

    exit_code = LedgerError.exit_code
    code = LedgerError.code


def _rows(ledger: Ledger, sql: str, args: Sequence[object] = ()) -> list[tuple]:  # sqlite3 rows, as _row reads them
    """The rows `sql` selects; a ledger that fails (malformed, locked) is a LedgerReadError naming it."""
    try:
        return ledger.db.execute(sql, args).fetchall()
    except sqlite3.Error as exc:
        raise LedgerReadError(f"ledger {ledger.path}: {exc}") from None


class StoredRun(TypedDict):
    """One stored run of an A/B, as a conclusion records it."""

    id: int
    fingerprint: str
    recipe_hash: str
    bench_version: int
    workload: dict[str, object]


def comparison_runs(ledger: Ledger, comparison_id: int) -> dict[str, list[StoredRun]]:
    """The stored runs of one A/B, by arm."""
    rows = _rows(ledger, "SELECT id, arm, fingerprint, recipe_hash, bench_version, workload_json FROM runs "
                         "WHERE comparison_id = ? ORDER BY id", (comparison_id,))
    out: dict[str, list[StoredRun]] = {"A": [], "B": []}
    for rid, arm, fp, rhash, bver, workload in rows:
        if arm in out:
            out[arm].append({"id": rid, "fingerprint": fp, "recipe_hash": rhash, "bench_version": bver,
                             "workload": decode("workload_json", workload)[0] or {}})
    return out


def record(ledger: Ledger, name: str, comparison: dict[str, Any], arms: dict[str, Arm], python: str | None,
           previous_id: int | None = None, outcome: str | None = None, extra: dict[str, Any] | None = None) -> Conclusion:
    """Store a conclusion from a finished A/B (bench's comparison document) and return it."""
    if not name.strip():
        raise ConclusionError("--conclude needs a name (e.g. --conclude nvfp4-vs-fp8)")
    cid = comparison.get("comparison_id")
    if cid is None:
        raise ConclusionError("a conclusion needs a stored A/B (not --no-store)")
    runs = comparison_runs(ledger, cid)
    if not runs["A"] or not runs["B"]:
        raise ConclusionError(f"comparison {cid} has no stored runs on both arms: nothing to conclude")
    data = {
        "version": CONCLUSION_VERSION,
        "a": arms["A"].to_dict(), "b": arms["B"].to_dict(), "python": python,
        "workload": runs["A"][0]["workload"], "pairs": len(runs["A"]), "min_effect": comparison.get("min_effect"),
        "metric": comparison.get("metric"), "verdict": comparison.get("verdict"), "levels": comparison.get("levels") or [],
        "correctness": comparison.get("correctness"),  # which arm's answers were wrong (bench/ab.py): rerun's advice
        "runs": {arm: [r["id"] for r in rs] for arm, rs in runs.items()},
        "fingerprints": {arm: rs[-1]["fingerprint"] for arm, rs in runs.items()},
        "recipe_hashes": {arm: rs[-1]["recipe_hash"] for arm, rs in runs.items()},
        "bench_version": runs["A"][0]["bench_version"],
        **(extra or {}),
    }
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        cur = ledger.db.execute(
            "INSERT INTO conclusions (name, created_at, comparison_id, previous_id, outcome, data_json) VALUES (?,?,?,?,?,?)",
            (name, now, cid, previous_id, outcome, json.dumps(data, sort_keys=True, default=str)))
    except sqlite3.Error as exc:
        raise LedgerReadError(f"ledger {ledger.path}: {exc}") from None
    assert cur.lastrowid is not None, "sqlite sets it after an INSERT"
    return Conclusion(cur.lastrowid, name, now, cid, previous_id, outcome, data)


def latest(ledger: Ledger, name: str | None = None) -> list[Conclusion]:
    """The newest row of every conclusion name (or of the one named), oldest name first."""
    sql = f"SELECT {_COLUMNS} FROM conclusions WHERE id IN (SELECT max(id) FROM conclusions GROUP BY name)"
    args: tuple[str, ...] = ()
    if name is not None:
        sql += " AND name = ?"
        args = (name,)
    return [_row(r) for r in _rows(ledger, sql + " ORDER BY id", args)]


def history(ledger: Ledger, name: str) -> list[Conclusion]:
    """Every recording of one conclusion, oldest first."""
    return [_row(r) for r in _rows(ledger, f"SELECT {_COLUMNS} FROM conclusions WHERE name = ? ORDER BY id", (name,))]


def existing_runs(ledger: Ledger, run_ids: list[int]) -> set[int]:
    if not run_ids:
        return set()
    marks = ",".join("?" * len(run_ids))
    return {r[0] for r in _rows(ledger, f"SELECT id FROM runs WHERE id IN ({marks})", run_ids)}


def conclude(name: str, comparison: dict[str, Any], path_a: Path, path_b: Path, python: str | None,
             ledger_path: Path | None, sets: dict[str, str] | None = None, local: bool = False) -> dict[str, object]:
    """`bench A --vs B --conclude NAME`: store the finished A/B as conclusion NAME; its JSON."""
    if "unknown" in (comparison.get("fingerprints") or {}).values():
        raise ConclusionError(f"conclusion {name!r}: an arm's toolchain is unknown; a conclusion is bound to the "
                              "toolchain it was measured on (give --python)")
    if comparison.get("verdict") == "not called":
        raise ConclusionError(f"conclusion {name!r}: not recorded: the arms ran under different machine load "
                              f"({(comparison.get('load') or {}).get('differ')}); rerun on a quiet machine or pass "
                              "--allow-load-difference")
    if python is not None and "/" in python:  # rerun re-measures it from any folder (a bare name: looked up on PATH)
        python = os.path.abspath(python)
    arms = {"A": Arm(str(Path(path_a).resolve()), str(comparison.get("a") or path_a)),
            "B": Arm(str(Path(path_b).resolve()), str(comparison.get("b") or path_b))}
    try:
        with Ledger(ledger_path) as ledger:
            # the folder it ran in: rerun finds a model named relative to it there, from any folder
            extra = {"sets": dict(sets or {}), "local": local, "folder": os.getcwd()}
            return record(ledger, name, comparison, arms, python, extra=extra).to_dict()
    except LedgerError as exc:
        raise LedgerReadError(str(exc)) from None
