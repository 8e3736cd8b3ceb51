#!/usr/bin/env python3
"""How fast is `sparkdoctor recipe check` against a real vLLM venv, cold and warm, next to a whole `check`?

Times, on ONE machine in ONE run, interleaved so drift hits everyone alike, the same recipe each time:
  * recipe check, cold   (an empty cache folder: the first run on a machine; every cache of sparkdoctor empty)
  * recipe check, warm   (the cache folder of the previous runs)
  * check --no-kernels, warm (the anchor issue 39 compares with: the same venv, the same cache folder)
and, with --baseline 'CMD ...' (e.g. an older checkout: 'python -m sparkdoctor' with PYTHONPATH set by --baseline-path),
the same recipe check cold and warm through that command.

    python benchmarks/recipe_check_speed.py --venv /path/to/vllm-0.32.0-venv [--runs 7] [--cpus 0,1]
        [--baseline-path /tmp/old-checkout] [--markdown]

sparkdoctor runs from this interpreter's environment, as an installed command would: with bytecode caches
(PYTHONDONTWRITEBYTECODE is dropped for the children; one untimed run writes them first). The machine's load
average is printed before and after: on a shared machine it is most of the spread. Goals (issue 39 item 5):
warm median <= 0.5 s, cold median <= 3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
RECIPE = """recipe_version: "2"
model: Qwen/Qwen3-0.6B
runtime: vllm
env:
  VLLM_USE_FLASHINFER_SAMPLER: "1"
command: vllm serve Qwen/Qwen3-0.6B --port 8000 --max-model-len 2048 --enforce-eager --gpu-memory-utilization 0.8
"""


CPU: dict[str, list[float]] = {}


def timed(argv: list[str], env: dict[str, str], cwd: Path, name: str = "") -> float:
    """Wall seconds of one run (and its CPU seconds, user + sys of it and its children, into CPU[name]). Run from
    the tree's own folder: `python -m` puts the working directory ahead of PYTHONPATH."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, cwd=cwd)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    if name:
        CPU.setdefault(name, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", required=True, type=Path, help="the target venv (vLLM 0.32.0 installed)")
    ap.add_argument("--runs", type=int, default=7, help="repetitions of each (odd: the median is a run)")
    ap.add_argument("--baseline-path", type=Path, default=None,
                    help="a checkout of an older sparkdoctor, timed the same way (run with PYTHONPATH=it)")
    ap.add_argument("--cpus", default=None, help="pin every run to these CPUs (e.g. 0,1: a 2-core machine)")
    ap.add_argument("--markdown", action="store_true", help="print a table for docs/evidence/")
    args = ap.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})  # inherited by every child
    python = args.venv / "bin" / "python"
    if not python.exists():
        ap.error(f"{python} does not exist")
    load_before = os.getloadavg()
    scratch = Path(tempfile.mkdtemp(prefix="recipe-check-speed-"))
    recipe = scratch / "qwen3-small.yaml"
    recipe.write_text(RECIPE)
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")}
    arms: dict[str, tuple[list[str], dict[str, str], Path]] = {"this": ([sys.executable, "-m", "sparkdoctor"], base_env, HERE)}
    if args.baseline_path:
        arms["baseline"] = ([sys.executable, "-m", "sparkdoctor"], {**base_env, "PYTHONPATH": str(args.baseline_path)},
                            args.baseline_path.resolve())
    results: dict[str, list[float]] = {}
    for name, (cmd, env, cwd) in arms.items():  # untimed: bytecode written, the venv's files in the page cache
        timed([*cmd, "recipe", "check", str(recipe), "--python", str(python), "-f", "json"],
              {**env, "SPARKDOCTOR_CACHE_DIR": str(scratch / f"{name}-prime")}, cwd)
    for i in range(args.runs):
        for name, (cmd, env, cwd) in arms.items():
            cold = {**env, "SPARKDOCTOR_CACHE_DIR": str(scratch / f"{name}-cold-{i}")}
            warm = {**env, "SPARKDOCTOR_CACHE_DIR": str(scratch / f"{name}-warm")}
            rc = [*cmd, "recipe", "check", str(recipe), "--python", str(python), "-f", "json"]
            check = [*cmd, "check", "--python", str(python), "--no-kernels", "-f", "json"]
            key = f"{name}: recipe check, cold"
            results.setdefault(key, []).append(timed(rc, cold, cwd, key))
            if i == 0:
                timed(rc, warm, cwd)  # fills the warm folder
                timed(check, warm, cwd)
            key = f"{name}: recipe check, warm"
            results.setdefault(key, []).append(timed(rc, warm, cwd, key))
            key = f"{name}: check --no-kernels, warm"
            results.setdefault(key, []).append(timed(check, warm, cwd, key))
    load_after = os.getloadavg()
    rows = [(name, statistics.median(v), min(v), max(v), statistics.median(CPU[name])) for name, v in results.items()]
    if args.markdown:
        print("| what | wall median s | min s | max s | CPU median s |\n|---|---:|---:|---:|---:|")
        for name, med, lo, hi, cpu in rows:
            print(f"| {name} | {med:.2f} | {lo:.2f} | {hi:.2f} | {cpu:.2f} |")
    else:
        for name, med, lo, hi, cpu in rows:
            print(f"{name:40s} wall median {med:6.2f} s  min {lo:6.2f}  max {hi:6.2f}  CPU median {cpu:6.2f} s "
                  f"({len(results[name])} runs)")
    print(f"\nload average before {load_before[0]:.2f} {load_before[1]:.2f}, after {load_after[0]:.2f} "
          f"{load_after[1]:.2f}; {os.cpu_count()} CPUs{' (pinned to ' + args.cpus + ')' if args.cpus else ''}; "
          f"python {sys.version.split()[0]}; target {python}")
    warm = statistics.median(results["this: recipe check, warm"])
    cold = statistics.median(results["this: recipe check, cold"])
    print(f"goals: warm median {warm:.2f} s (<= 0.5: {'met' if warm <= 0.5 else 'NOT met'}), "
          f"cold median {cold:.2f} s (<= 3: {'met' if cold <= 3 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
