"""Ledgers with real rows for the fast rerun tests: runs written through the ledger's own add_run, A/B
levels computed by bench's own ab.compare, Facts collected for real from this interpreter (stored copies
edited to stand for an older toolchain). No server: the slow tests measure for real."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

from sparkdoctor.bench import BENCH_VERSION, ab
from sparkdoctor.conclusions import store
from sparkdoctor.conclusions.model import Arm
from sparkdoctor.ledger import Ledger, RunRecord
from sparkdoctor.recipes import load

RECIPE = '''schema = 1
name = "{name}"
model = "/models/m"
command = ["{bindir}/vllm", "serve", "{{model}}", "--max-model-len", "1024"{extra}]
{workarounds}
[workload]
max_tokens = 8
concurrency = [1]
rounds = 3
'''


def write_recipe(folder: Path, name: str, extra: str = "", workarounds: str = "") -> Path:
    path = folder / f"{name}.toml"
    path.write_text(RECIPE.format(name=name, bindir=Path(sys.executable).parent, extra=extra, workarounds=workarounds))
    return path


def older(facts: dict[str, Any], **versions: str) -> dict[str, Any]:
    """These Facts as they were before an upgrade: the named packages at other versions."""
    old = copy.deepcopy(facts)
    for name, version in versions.items():
        old.setdefault("packages", {})[name] = {"version": version, "files_modified": [], "integrity": "ok"}
    return old


def add_ab(ledger: Ledger, paths: dict[str, Path], facts: dict[str, Any], tps: dict[str, list[float]],
           name: str = "b-vs-a", min_effect: float = 0.02, extra: dict[str, Any] | None = None) -> Any:
    """One stored A/B (one run per arm, rounds `tps`) and the conclusion `name` recorded from it."""
    from sparkdoctor.bench.run import resolved_recipe
    from sparkdoctor.facts import Facts

    fingerprint = Facts.from_dict(facts, source="test").fingerprint()
    cid = ledger.begin_comparison(str(paths["A"]), str(paths["B"]))
    summaries = {}
    for arm in ("A", "B"):
        recipe = load(str(paths[arm]))
        summary = {"levels": [{"concurrency": 1, "round_output_tps": tps[arm], "headline": {"decode_tps_per_stream": tps[arm][0]}}],
                   "headline": {"decode_tps_per_stream": tps[arm][0]}}
        summaries[arm] = summary
        ledger.add_run(RunRecord(recipe=resolved_recipe(recipe), base_url="http://127.0.0.1:1", model="m",
                                 server={"kind": "vllm"}, facts=facts, fingerprint=fingerprint, bench_version=BENCH_VERSION,
                                 tool_version="test", workload={"max_tokens": 8, "concurrency": [1], "rounds": 3},
                                 summary=summary, comparison_id=cid, arm=arm))
    levels = ab.compare([summaries["A"]], [summaries["B"]], min_effect)
    doc = {"comparison_id": cid, "a": paths["A"].stem, "b": paths["B"].stem, "levels": levels,
           "verdict": ab.overall(levels), "metric": ab.METRIC, "min_effect": min_effect}
    ledger.finish_comparison(cid, "complete", doc)
    arms = {arm: Arm(str(paths[arm]), paths[arm].stem) for arm in ("A", "B")}
    return store.record(ledger, name, doc, arms, None, extra=extra)
