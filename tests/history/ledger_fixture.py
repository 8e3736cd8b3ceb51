"""A real ledger file with many runs, written through the ledger's own API (Ledger.add_run, comparisons and
conclusions as bench and rerun record them): recipes whose toolchain changes every `every` runs."""

from __future__ import annotations

import json
import random
from pathlib import Path

from sparkdoctor.ledger import Ledger
from sparkdoctor.ledger.store import RunRecord

RECIPES = ("qwen-fp8", "qwen-nvfp4", "nemotron-w4a16")


def facts(version: str) -> dict:
    return {"schema": 1, "packages": {"vllm": {"name": "vllm", "version": version},
                                      "torch": {"name": "torch", "version": "2.10.0"}}}


def build(path: Path, runs: int, every: int = 150, seed: int = 7) -> dict:
    """The ledger at `path`; what it holds (runs per recipe, changes, comparisons, conclusions)."""
    rng = random.Random(seed)
    held = {"per_recipe": {r: 0 for r in RECIPES}, "changes": 0, "comparisons": 0, "conclusions": 0,
            "verdicts": {"reference": 0, "correct": 0, "wrong": 0}}
    with Ledger(path) as led:
        led.db.execute("PRAGMA synchronous = OFF")  # test data: speed over durability
        last_version: dict[str, str] = {}
        for i in range(runs):
            recipe = RECIPES[i % len(RECIPES)]
            n = held["per_recipe"][recipe]
            version = f"0.{22 + n // every}.0"
            if recipe in last_version and last_version[recipe] != version:
                held["changes"] += 1
            last_version[recipe] = version
            tps = 40.0 + 5 * (i % len(RECIPES)) + (n // every) * 1.5 + rng.gauss(0, 0.8)
            f = facts(version)
            verdict = None if i % 4 == 3 else "reference" if i < len(RECIPES) else "wrong" if i % 13 == 0 else "correct"
            if verdict:
                held["verdicts"][verdict] += 1
            from sparkdoctor.facts import Facts

            led.add_run(RunRecord(recipe={"name": recipe, "argv": ["vllm", "serve", recipe]}, base_url="http://127.0.0.1:1",
                                  model=recipe, server={"kind": "vllm"}, facts=f,
                                  fingerprint=Facts.from_dict(f, source="test").fingerprint(), bench_version=1,
                                  tool_version="test", workload={"max_tokens": 128},
                                  summary={"levels": [], "headline": {"decode_tps_per_stream": tps, "concurrency": 1},
                                           "correctness": {"verdict": verdict, "why": []} if verdict else None}))
            held["per_recipe"][recipe] += 1
        led.db.execute("UPDATE runs SET created_at = strftime('%Y-%m-%dT%H:%M:%S+00:00', 1767225600 + id * 900, 'unixepoch')")
        for k in range(3):
            cid = led.begin_comparison(f"A{k}", f"B{k}")
            led.finish_comparison(cid, "complete", {"levels": [
                {"concurrency": 1, "ratio": {"ratio": 1.1 + k / 10, "ci_low": 1.02 + k / 10, "ci_high": 1.2 + k / 10,
                                             "verdict": "faster"}},
                {"concurrency": 4, "ratio": {"ratio": 0.97, "ci_low": 0.9, "ci_high": 1.05, "verdict": "no difference"}}]})
            held["comparisons"] += 2
        for outcome in (None, "flipped"):
            led.db.execute("INSERT INTO conclusions (name, created_at, comparison_id, previous_id, outcome, data_json) "
                           "VALUES (?,?,?,?,?,?)", ("compile-helps", "2026-01-02T00:00:00+00:00", None, None, outcome,
                                                   json.dumps({"verdict": "faster" if outcome is None else "no difference"})))
            held["conclusions"] += 1
        led.db.commit()
    return held
