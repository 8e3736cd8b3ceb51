#!/usr/bin/env python3
"""How does explain's matcher scale with the number of symptoms and the length of the log, before and after it
looked for a symptom only when the text holds every word inside it?

The log is a vLLM server log (startup and per-request INFO lines, repeated) of --lines lines, with one known
symptom line (the bundled matrix's Mamba align assertion) in the middle. The matrices: the bundled one, and a
third-party one of --symptoms symptoms (exception lines naming kernels, ops and options, a few of them single
words) on top of it. For each (log, matrix): `before` is the old matcher (tests/explain_reference.py), `after`
match_text as shipped, both in this run, in CPU seconds (the machine is shared: wall time is stretched by the
other load, CPU time much less), each the median of --runs, with the 1-minute load average before and after.
Every pair of results is compared: the two matchers must return the same matches.

    python benchmarks/explain_many_symptoms.py [--lines 100000 1000000] [--symptoms 4000] [--runs 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from sparkdoctor.matrix import load  # noqa: E402
from sparkdoctor.matrix.model import Entry  # noqa: E402
from sparkdoctor.matrix.symptoms import match_text  # noqa: E402
from tests.explain_reference import old_match_text  # noqa: E402

VLLM = [
    "INFO 11-30 19:02:11 [__init__.py:239] Automatically detected platform cuda.",
    "(APIServer pid=2114) INFO 11-30 19:02:14 [api_server.py:1896] vLLM API server version 0.32.0",
    "(APIServer pid=2114) INFO 11-30 19:02:14 [utils.py:326] non-default args: {'model': 'Qwen/Qwen3-Next-80B-A3B-Instruct', 'max_model_len': 32768}",
    "(EngineCore_DP0 pid=2290) INFO 11-30 19:02:31 [gpu_model_runner.py:2602] Model loading took 46.2 GiB and 41.37 seconds",
    "(EngineCore_DP0 pid=2290) INFO 11-30 19:02:58 [kv_cache_utils.py:1087] GPU KV cache size: 1,043,232 tokens",
    "(EngineCore_DP0 pid=2290) INFO 11-30 19:03:09 [core.py:210] init engine (profile, create kv cache, warmup model) took 37.51 seconds",
    "(APIServer pid=2114) INFO 11-30 19:03:10 [loggers.py:147] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 95.1 tokens/s, Running: 4 reqs",
    "(APIServer pid=2114) INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
]
SYMPTOM_LINE = ("(APIServer pid=2114) AssertionError: Assertion failed, In Mamba cache align mode, block_size (2096) "
                "must be <= max_num_batched_tokens (2048).")
OPS = ["gemm", "attention", "moe", "rmsnorm", "rope", "sampler", "allreduce", "fp4_quant", "topk", "scatter"]
KINDS = ["RuntimeError", "ValueError", "AssertionError", "NotImplementedError", "ImportError", "CUDA error"]


def log(lines: int) -> str:
    body = [VLLM[i % len(VLLM)] for i in range(lines)]
    body[lines // 2] = SYMPTOM_LINE
    return "\n".join(body) + "\n"


def many(base: list[Entry], n: int) -> list[Entry]:
    """`n` third-party symptoms (one per entry) on top of the bundled entries; one in a hundred a single word."""
    extra = []
    for i in range(n):
        op = OPS[i % len(OPS)]
        if i % 100 == 0:
            symptom = f"{op.upper()}_FAILURE_{i}"
        else:
            symptom = f"{KINDS[i % len(KINDS)]}: {op} kernel sm{100 + i % 30}_{i} is not available for this GPU (model loading)"
        extra.append(dataclasses.replace(base[i % len(base)], id=f"third-party-{i}", symptoms=[symptom]))
    return base + extra


def cpu(fn: Callable[[], Sequence[object]], runs: int) -> tuple[float, float, Sequence[object]]:
    cpus: list[float] = []
    walls: list[float] = []
    out: Sequence[object] = []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - w)
    return statistics.median(cpus), statistics.median(walls), out


def serve_scan(entries: list[Entry], runs: int, lines: int = 5000) -> bool:
    """The serve log scanner's per-line matcher (line_hits) over `lines` log lines: before, every symptom was
    normalised again for every line and every line compared with every symptom (the cache swapped out for plain
    normalise, no rows kept and no gate); after, once, and a line no symptom can be in is turned away
    (benchmarks/symptom_gate.py measures that part alone)."""
    from sparkdoctor.matrix import symptoms
    from sparkdoctor.serve.logscan import match_line

    body = log(lines).splitlines()
    a_cpu, _, after = cpu(lambda: [h for x in body for h in match_line(x, entries)], runs)
    cached, index = symptoms._normalised_symptom, symptoms._index
    symptoms._normalised_symptom = symptoms.normalise  # type: ignore[assignment]
    symptoms._index = lambda es: (symptoms._symptoms(es), None)  # type: ignore[assignment]
    try:
        b_cpu, _, before = cpu(lambda: [h for x in body for h in match_line(x, entries)], runs)
    finally:
        symptoms._normalised_symptom, symptoms._index = cached, index
    print(f"\nserve log scanner, {lines:,} lines x bundled matrix: before {b_cpu:.2f} CPU s, after {a_cpu:.2f} CPU s, "
          f"{len(after)} hits, same: {'yes' if before == after else 'NO'}")
    return before == after


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--symptoms", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before-limit", type=int, default=2_000_000_000, help="skip `before` past this lines x symptoms")
    args = ap.parse_args()
    base = load(None).entries
    matrices = {"bundled": base, f"+{args.symptoms} third-party": many(base, args.symptoms)}
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    print("| log lines | matrix | symptoms | before CPU s | after CPU s | after wall s | matches | same |")
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for n in args.lines:
        text = log(n)
        for name, entries in matrices.items():
            count = sum(len(e.symptoms) for e in entries)
            a_cpu, a_wall, after = cpu(partial(match_text, text, entries), args.runs)
            if n * count <= args.before_limit:
                b_cpu, _, before = cpu(partial(old_match_text, text, entries), args.runs)
                same = before == after
                ok &= same
                shown_b, shown_same = f"{b_cpu:.2f}", "yes" if same else "NO"
            else:
                shown_b, shown_same = "(skipped)", "-"
            print(f"| {n:,} | {name} | {count:,} | {shown_b} | {a_cpu:.2f} | {a_wall:.2f} | {len(after)} | {shown_same} |",
                  flush=True)
    ok &= serve_scan(base, args.runs)
    print(f"load average after: {os.getloadavg()[0]:.2f}; runs per cell: {args.runs} (median)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
