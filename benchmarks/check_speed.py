#!/usr/bin/env python3
"""How fast is `sparkdoctor check` against the environment collectors people use today?

Times, on ONE machine in ONE run, interleaved so drift hits everyone alike:
  * sparkdoctor check --no-kernels     (fast path; warm = hash caches filled, cold = empty cache dir)
  * sparkdoctor check                  (with kernel + CuTe DSL probes; cold and warm)
  * python -m torch.utils.collect_env  (PyTorch's collector, run by the target interpreter)
  * vllm collect-env                   (vLLM's collector)
against a real serving venv (default: one made with `pip install vllm==0.32.0`).

    python benchmarks/check_speed.py --venv /path/to/venv --runs 11 [--cpus 0,1] [--markdown]

Reports the median, min and max wall time of each, the speed-up of the warm fast path over each
anchor (of the medians, and the smallest of the per-run ratios: run i of the anchor against run i of
sparkdoctor, interleaved), the machine's load average before and after, and the goals of issue 30
(warm --no-kernels median <= 0.25 s, warm with kernel probes <= 0.3 s, >= 10x torch's collector in
every run). sparkdoctor runs from its own environment (like a pipx/uv tool install) and examines the
target with --python. `--cpus 0,1` pins this script and everything it starts to those CPUs: a
2-core machine on a larger, idle one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


CPU: dict[str, list[float]] = {}  # per case: the CPU seconds (user + sys) of the command and the children it waited for


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], timeout: float = 300) -> tuple[float, int, str]:
    start, cpu = time.perf_counter(), _cpu()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    CPU.setdefault("_last", []).append(_cpu() - cpu)
    return time.perf_counter() - start, done.returncode, done.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", required=True, type=Path, help="target serving venv (with vllm installed)")
    ap.add_argument("--runs", type=int, default=7, help="repetitions of each command (odd: the median is a run)")
    ap.add_argument("--sparkdoctor", default=None, help="sparkdoctor executable (default: the one beside this python)")
    ap.add_argument("--skip-kernels", action="store_true", help="do not time the kernel-probe variants")
    ap.add_argument("--markdown", action="store_true", help="print a README-ready table")
    ap.add_argument("--cpus", default=None, help="pin every run to these CPUs (e.g. 0,1: a 2-core machine)")
    ap.add_argument("--skip-anchors", action="store_true", help="do not time torch's and vLLM's collectors")
    ap.add_argument("--baseline", default=None, help="another sparkdoctor executable (an earlier commit) timed in the "
                    "same run, interleaved, on the same caches: its cases are named 'baseline: ...'")
    args = ap.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})  # inherited by every child
    load_before = os.getloadavg()

    py = args.venv / "bin" / "python"
    if not py.exists():
        ap.error(f"{py} does not exist")
    doctor = args.sparkdoctor or shutil.which("sparkdoctor", path=str(Path(sys.executable).parent)) or "sparkdoctor"
    base_env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV",)}
    warm_cache = Path(tempfile.mkdtemp(prefix="sd-bench-warm-"))
    check = [doctor, "check", "--python", str(py), "--format", "json"]

    def env_with(cache: Path) -> dict[str, str]:
        # sparkdoctor runs with its .pyc files, as installed (PYTHONDONTWRITEBYTECODE would recompile
        # every module every run); the target is never written to (the probe runs with -B)
        env = {**base_env, "SPARKDOCTOR_CACHE_DIR": str(cache)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def cold(argv: list[str]):
        # a fresh, empty cache dir for every cold run
        def run():
            d = Path(tempfile.mkdtemp(prefix="sd-bench-cold-"))
            try:
                return timed(argv, env_with(d))
            finally:
                shutil.rmtree(d, ignore_errors=True)

        return run

    cases: dict[str, callable] = {}
    for prefix, exe in [("", doctor)] + ([("baseline: ", args.baseline)] if args.baseline else []):
        argv = [exe, *check[1:]]
        cases[f"{prefix}sparkdoctor check --no-kernels (warm)"] = lambda a=argv: timed(a + ["--no-kernels"], env_with(warm_cache))
        cases[f"{prefix}sparkdoctor check --no-kernels (cold)"] = cold(argv + ["--no-kernels"])
        if not args.skip_kernels:
            cases[f"{prefix}sparkdoctor check, kernel probes (warm)"] = lambda a=argv: timed(a, env_with(warm_cache))
            cases[f"{prefix}sparkdoctor check, kernel probes (cold)"] = cold(argv)
    if not args.skip_anchors:
        cases["python -m torch.utils.collect_env"] = lambda: timed([str(py), "-m", "torch.utils.collect_env"], base_env)
    vllm_cli = args.venv / "bin" / "vllm"
    if vllm_cli.exists() and not args.skip_anchors:
        cases["vllm collect-env"] = lambda: timed([str(vllm_cli), "collect-env"], base_env)

    # fill the warm cache once (not timed)
    timed(check, env_with(warm_cache))
    samples: dict[str, list[float]] = {name: [] for name in cases}
    notes: dict[str, str] = {}
    for i in range(args.runs):
        for name, fn in cases.items():  # interleaved
            seconds, rc, out = fn()
            samples[name].append(seconds)
            CPU.setdefault(name, []).append(CPU["_last"][-1])
            if ("sparkdoctor" in name and rc not in (0, 1)) or ("sparkdoctor" not in name and rc != 0):
                notes[name] = f"exit {rc}"  # an anchor that fails is no anchor: its goal is not judged
            if name == "sparkdoctor check --no-kernels (warm)" and i == 0 and rc in (0, 1):
                facts = json.loads(out)["facts"]
                notes["_collected"] = (
                    f"{len(facts.get('packages') or {})} packages, "
                    f"{sum(len(p.get('files_modified') or []) + 0 for p in (facts.get('packages') or {}).values())} modified files flagged, "
                    f"{len(facts.get('toolkits') or [])} ptxas, {len(facts.get('capabilities') or {})} capabilities"
                )
        print(f"run {i + 1}/{args.runs} done", file=sys.stderr)
    shutil.rmtree(warm_cache, ignore_errors=True)

    load_after = os.getloadavg()
    warm = samples["sparkdoctor check --no-kernels (warm)"]
    fast = statistics.median(warm)
    rows = []
    for name, xs in samples.items():
        med = statistics.median(xs)
        ratio = ""
        mine = samples.get(name.removeprefix("baseline: "))
        if name.startswith("baseline: ") and mine:  # this commit against the baseline, run by run: wall, then CPU
            cpu_ratio = statistics.median(m / b for m, b in zip(CPU[name.removeprefix("baseline: ")], CPU[name], strict=True))
            ratio = (f"{statistics.median(m / b for m, b in zip(mine, xs, strict=True)):.2f} wall, {cpu_ratio:.2f} CPU "
                     f"(medians of per-run ratios)")
        if "sparkdoctor" not in name:
            every = min(x / w for x, w in zip(xs, warm, strict=True))
            ratio = f"{med / fast:.1f}x (every run >= {every:.1f}x)"
        rows.append((name, med, min(xs), max(xs), ratio, notes.get(name, "")))
    cpus = sorted(os.sched_getaffinity(0))
    header = (f"target venv: {args.venv}  runs: {args.runs}  python: {sys.version.split()[0]}  "
              f"cpus used: {len(cpus)} of {os.cpu_count()}  load average (1/5/15 min) before: "
              f"{' '.join(f'{x:.2f}' for x in load_before)}, after: {' '.join(f'{x:.2f}' for x in load_after)}")
    if args.markdown:
        print(header + "\n")
        print("| command | median s | min s | max s | slower than sparkdoctor (warm, no kernels); baseline: this commit / it |")
        print("|---|---:|---:|---:|---:|")
        for name, med, lo, hi, ratio, note in rows:
            print(f"| `{name}` | {med:.3f} | {lo:.3f} | {hi:.3f} | {ratio}{' ' + note if note else ''} |")
    else:
        print(header)
        for name, med, lo, hi, ratio, note in rows:
            print(f"{name:42s} median {med:7.3f}s  min {lo:7.3f}s  max {hi:7.3f}s  {ratio:>6s} {note}")
    if "_collected" in notes:
        print(f"\nsparkdoctor collected: {notes['_collected']}")
    goals = [("warm check --no-kernels, median <= 0.25 s", fast <= 0.25, f"{fast:.3f} s")]
    kernels = samples.get("sparkdoctor check, kernel probes (warm)")
    if kernels:
        goals.append(("warm check with kernel probes, median <= 0.3 s", statistics.median(kernels) <= 0.3,
                      f"{statistics.median(kernels):.3f} s"))
    torch = samples.get("python -m torch.utils.collect_env")
    if torch and "python -m torch.utils.collect_env" in notes:
        goals.append((">= 10x torch collect_env in every run", False, f"not judged: torch's collector failed ({notes['python -m torch.utils.collect_env']})"))
    elif torch:
        every = min(x / w for x, w in zip(torch, warm, strict=True))
        goals.append((">= 10x torch collect_env in every run", every >= 10, f"smallest per-run ratio {every:.1f}x"))
    print()
    for goal, met, value in goals:
        print(f"goal: {goal}: {'met' if met else 'NOT met'} ({value})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
