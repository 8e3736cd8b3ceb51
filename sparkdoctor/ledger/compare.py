"""Two stored runs side by side: what changed in the toolchain, what changed in the numbers.

Unlike things are not silently compared: runs taken with different bench-code versions get no
ratios at all (a change in how a number is taken is a change in the number), and a different
recipe or workload is said out loud, because then the numbers compare configurations, not toolchains.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from sparkdoctor.facts import Facts, FactsError
from sparkdoctor.ledger.store import number

FIGURES = (  # (name shown, where in a level summary, scale)
    ("decode tok/s/stream (headline)", ("headline", "decode_tps_per_stream"), 1.0),
    ("output tok/s (tokens / wall time)", ("client", "output_tps_pooled"), 1.0),
    ("TTFT ms (client median)", ("client", "ttft_s", "median"), 1000.0),
    ("TPOT ms (client median)", ("client", "tpot_s", "median"), 1000.0),
    ("ITL ms (server mean)", ("server", "itl_s", "mean"), 1000.0),
)



class Figure(TypedDict):
    """One figure of one concurrency level in both runs (ratio None: not comparable, or a side missing)."""

    concurrency: int
    figure: str
    a: float | None
    b: float | None
    ratio: float | None


class Comparison(TypedDict):
    a: dict[str, object]  # the run's identifying columns
    b: dict[str, object]
    comparable: bool
    notes: list[str]
    toolchain: list[dict[str, object]]  # toolchain_changes
    numbers: list[Figure]


def dig(data: object, path: tuple[str, ...]) -> object:
    """The value at `path` in nested JSON objects; None where one of them is missing or not an object."""
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _number(value: object) -> float | None:
    """A stored figure, or None when it is not a finite number (a damaged or hand-edited row): store.number's test."""
    return float(value) if isinstance(value, (int, float)) and number(value, False) else None


def _flatten(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def toolchain_changes(facts_a: Mapping[str, object], facts_b: Mapping[str, object]) -> list[dict[str, object]]:
    """The fingerprint material (what decides behaviour and speed) that differs between two Facts."""

    try:
        mat_a = _flatten(Facts.from_dict(facts_a, source="ledger").fingerprint_material())
        mat_b = _flatten(Facts.from_dict(facts_b, source="ledger").fingerprint_material())
    except FactsError as exc:  # a stored Facts this sparkdoctor cannot read: say so in the table
        return [{"what": "(the stored toolchain)", "a": "unreadable", "b": str(exc)[:200]}]
    rows = []
    for key in sorted(set(mat_a) | set(mat_b)):
        a, b = mat_a.get(key), mat_b.get(key)
        if a != b:
            rows.append({"what": key, "a": a if key in mat_a else "(absent)", "b": b if key in mat_b else "(absent)"})
    return rows


def _head(run: Mapping[str, object]) -> dict[str, object]:
    return {k: run[k] for k in ("id", "created_at", "recipe_name", "fingerprint", "bench_version", "model")}


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> Comparison:
    notes: list[str] = []
    comparable = a["bench_version"] == b["bench_version"]
    if not comparable:
        notes.append(f"not comparable: measured by bench version {a['bench_version']} and {b['bench_version']}; "
                     "no ratios are given")
    if a["recipe_hash"] != b["recipe_hash"]:
        notes.append("different recipes (argv, env or model differ): the numbers compare configurations, not toolchains")
    if a["workload"] != b["workload"]:
        notes.append("different workloads: the numbers are not like for like")
    if a["fingerprint"] == b["fingerprint"]:
        notes.append("same toolchain fingerprint")
    numbers: list[Figure] = []
    levels_b = {lvl.get("concurrency"): lvl for lvl in b["summary"].get("levels", [])}
    for lvl_a in a["summary"].get("levels", []):
        lvl_b = levels_b.get(lvl_a.get("concurrency"))
        if lvl_b is None:
            continue
        for name, path, scale in FIGURES:
            va, vb = _number(dig(lvl_a, path)), _number(dig(lvl_b, path))
            if va is None and vb is None:
                continue
            va = va * scale if va is not None else None
            vb = vb * scale if vb is not None else None
            ratio = vb / va if comparable and va and vb is not None else None
            numbers.append({"concurrency": lvl_a["concurrency"], "figure": name, "a": va, "b": vb, "ratio": ratio})
    return {"a": _head(a), "b": _head(b), "comparable": comparable, "notes": notes,
            "toolchain": toolchain_changes(a["facts"], b["facts"]), "numbers": numbers}
