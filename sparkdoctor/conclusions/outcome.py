"""Old numbers against new: did a conclusion hold, flip or change, and did a recipe get slower?

Per concurrency level the old and new A/B ratios (B/A, each with its 95% CI) are set side by side:
  flipped  the verdict changed ("no difference" -> "faster", "faster" -> "slower", ...) and the new 95%
           interval excludes the old ratio (else: inconclusive, the new A/B is only less sure);
  changed  the same verdict, but the two CIs do not overlap (the size of the effect moved);
  holds    otherwise;
  broken   an arm's answers are wrong now (bench/correctness.py), the faster arm, the slower one or either arm
           of a "no difference" (every level: answers are judged per arm): fast and wrong never wins, and a
           conclusion about a recipe that answers wrong no longer means anything.
The whole conclusion takes its worst level (broken > flipped > changed > inconclusive > holds).

A regression is one arm (one recipe) measurably slower on the new toolchain than on the old: its
per-round output tok/s of the new runs against the old runs, with the same conservative verdict bench
uses for an A/B (the CI wholly below 1 and at least min_effect below).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from sparkdoctor.bench.stats import rounds_ratio
from sparkdoctor.ledger.store import Ledger
from sparkdoctor.vocab import Outcome

RANK = {outcome.value: i for i, outcome in enumerate(Outcome)}  # holds 0, inconclusive 1, changed 2, flipped 3, broken 4
NOT_CALLED = "not called"  # bench/ab.py: the arms ran under clearly different machine load
WRONG_ARM = "wrong arm"  # bench/ab.py: the faster arm's answers are wrong (bench/correctness.py)


def _level_outcome(old: dict[str, Any], new: dict[str, Any]) -> str:
    if new["verdict"] == WRONG_ARM:
        return "broken"  # the arm that was faster now gives wrong answers: the conclusion no longer means anything
    if NOT_CALLED in (old["verdict"], new["verdict"]):
        return "inconclusive"  # a verdict taken under uneven load neither holds nor flips
    if old["verdict"] != new["verdict"]:
        # a flip only when the new interval excludes the old estimate (issue 29): a new interval that still
        # holds the old ratio is consistent with both verdicts, and says only that the new A/B is less sure
        if new.get("ci_low") is not None and new["ci_low"] <= old.get("ratio", float("nan")) <= new["ci_high"]:
            return "inconclusive"
        return "flipped"
    if new["ci_low"] > old["ci_high"] or new["ci_high"] < old["ci_low"]:
        return "changed"
    return "holds"


def compare_levels(old_levels: list[dict[str, Any]], new_levels: list[dict[str, Any]],
                   wrong: Sequence[str] = ()) -> dict[str, Any]:
    """Old levels against new; `wrong`: the arms whose answers the new A/B judged wrong (its correctness.wrong)."""
    new_by = {lvl["concurrency"]: lvl for lvl in new_levels}
    rows = [{"concurrency": old["concurrency"], "old": old["ratio"], "new": new["ratio"],
             "outcome": "broken" if wrong else _level_outcome(old["ratio"], new["ratio"])}
            for old in old_levels if (new := new_by.get(old["concurrency"])) is not None]
    overall = max((r["outcome"] for r in rows), key=RANK.__getitem__, default="broken" if wrong else "holds")
    return {"outcome": overall, "levels": rows, "wrong": sorted(wrong)}


def _rounds(ledger: Ledger, run_ids: list[int]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for rid in run_ids:
        run = ledger.run(rid)
        if run is None or run.get("damaged"):  # a damaged row has no numbers to give
            continue
        for lvl in run["summary"].get("levels", []):
            out.setdefault(lvl["concurrency"], []).extend(lvl.get("round_output_tps") or [])
    return out


def arm_change(ledger: Ledger, old_ids: list[int], new_ids: list[int], min_effect: float) -> list[dict[str, Any]]:
    """One recipe's output tok/s, new runs over old runs, per level: ratio, CI, verdict, regression. The rounds
    of each side are resampled (bench's one-pair method), so only a 1.5x change is ever called."""
    old, new = _rounds(ledger, old_ids), _rounds(ledger, new_ids)
    rows = []
    for conc in sorted(set(old) & set(new)):
        if not old[conc] or not new[conc]:
            continue
        ratio = rounds_ratio(old[conc], new[conc], min_effect).to_dict()
        rows.append({"concurrency": conc, "old_median": statistics.median(old[conc]), "new_median": statistics.median(new[conc]),
                     "ratio": ratio, "regression": ratio["verdict"] == "slower"})
    return rows
