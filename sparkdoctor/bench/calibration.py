"""The noise floor of a recipe (issue 29): `bench RECIPE --calibrate` is an interleaved A/A whose pairs measure
the launch-to-launch noise; `document` turns its comparison into the calibration report (the CV and the
smallest effect 1, 3, 5 and 10 pairs detect), and `floor` finds the latest calibration a one-pair A/B of the
same toolchain and model takes its interval from (ab.apply_calibration)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import TYPE_CHECKING, Any

from sparkdoctor.bench.stats import min_detectable_effect
from sparkdoctor.ledger.store import Ledger

if TYPE_CHECKING:
    from sparkdoctor.bench.document import ComparisonDocument


def floor(ledger: Ledger, run_id: int) -> dict[int, dict[str, Any]]:
    """The launch noise of the latest complete calibration (an A/A: both labels the same) whose runs have the
    fingerprint of `run_id` (toolchain and model identity): concurrency -> {launch_cv, df, comparison_id, loads},
    `loads` the load index of each of its runs (ab.apply_calibration passes over a calibration taken under other
    load than the A/B)."""

    try:
        row = ledger.db.execute("SELECT fingerprint FROM runs WHERE id = ?", (run_id,)).fetchone()
        found = ledger.db.execute(
            "SELECT c.id, c.result_json FROM comparisons c WHERE c.status = 'complete' AND c.a_label = c.b_label "
            "AND c.result_json IS NOT NULL AND EXISTS (SELECT 1 FROM runs r WHERE r.comparison_id = c.id AND "
            "r.fingerprint = ?) ORDER BY c.id DESC", (row[0] if row else None,)).fetchall()
    except sqlite3.Error:
        return {}
    # the latest A/A that measured the launch noise: a one-pair A/A (which measures none) is passed over
    for comparison_id, result_json in found:
        try:
            levels = json.loads(result_json).get("levels") or []
        except (ValueError, AttributeError):
            continue
        out = {}
        for lvl in levels:
            cv, pairs = (lvl.get("noise") or {}).get("launch_cv"), (lvl.get("ratio") or {}).get("pairs")
            if isinstance(cv, (int, float)) and isinstance(pairs, int) and pairs >= 2:
                out[lvl["concurrency"]] = {"launch_cv": float(cv), "df": pairs - 1, "comparison_id": comparison_id}
        if out:
            loads = _run_loads(ledger, comparison_id)
            return {c: {**f, "loads": loads} for c, f in out.items()}
    return {}


def _run_loads(ledger: Ledger, comparison_id: int) -> list[dict[str, object]]:
    """The load index (bench/load.py) of each run of a comparison that has one."""

    try:
        rows = ledger.db.execute("SELECT summary_json FROM runs WHERE comparison_id = ?", (comparison_id,)).fetchall()
    except sqlite3.Error:
        return []
    out = []
    for (text,) in rows:
        try:
            index = (json.loads(text).get("load") or {}).get("index")
        except (ValueError, AttributeError):
            continue
        if isinstance(index, dict):
            out.append(index)
    return out


def document(doc: ComparisonDocument) -> ComparisonDocument:
    """An A/A comparison of one recipe as a noise floor (issue 29): per level the launch-to-launch CV and the
    smallest effect 1, 3, 5 and 10 pairs would detect with 80% power under the verdict's rule. Its runs and the
    comparison are in the ledger like any A/B (keyed to the toolchain, recipe, model identity and load)."""

    levels = []
    for lvl in doc.levels:
        cv = (lvl.get("noise") or {}).get("launch_cv")
        levels.append({"concurrency": lvl["concurrency"], "launch_cv": cv, "a": lvl["a"], "b": lvl["b"],
                       "aa_verdict": lvl["ratio"]["verdict"],
                       # one pair: with this calibration stored, a one-pair A/B takes its interval from it (ab.apply_calibration)
                       "mde": {str(k): min_detectable_effect(k, cv, len(lvl["a"]) - 1) for k in (1, 3, 5, 10)}})
    return dataclasses.replace(doc, calibration=levels)
