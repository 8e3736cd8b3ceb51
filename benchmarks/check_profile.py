#!/usr/bin/env python3
"""Where does a warm `sparkdoctor check --no-kernels --format json` spend its CPU?

Wall-clock medians lie on a shared, loaded machine; CPU time (user+sys of the child and its own
children, from resource.getrusage(RUSAGE_CHILDREN)) does much less. This script reports, for each
tree given with --tree (a checkout of sparkdoctor; default: this one), interleaved run by run:

  * cpu of the whole check (sparkdoctor process + target probe + GPU query child)
  * cpu of the target probe alone (run by the target's python, warm hash cache, and the RECORD cache
    where the tree has one, as check runs it)
  * wall time, beside the 1-minute load average at that moment

    python benchmarks/check_profile.py --venv VENV [--runs 11] [--tree OLD_CHECKOUT --tree .]
    python benchmarks/check_profile.py --venv VENV --cprofile      # in-process profile of one warm check
    python benchmarks/check_profile.py --venv VENV --importtime    # biggest imports of one warm check

PYTHONDONTWRITEBYTECODE is dropped from the environment (an installed tool has its .pyc files).
Each tree runs with the same python (the one running this script) and PYTHONPATH=<tree>, so two
checkouts compare on the same interpreter and packages. Warm = one untimed run first per tree, each
tree with its own cache dir.
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


def cpu_run(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # cwd = the tree: `python -m` puts the working directory ahead of PYTHONPATH
    done = subprocess.run(argv, env=env, cwd=env["PYTHONPATH"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--tree", action="append", type=Path, help="sparkdoctor checkout to time (repeatable)")
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--importtime", action="store_true")
    args = ap.parse_args()
    py = str(args.venv / "bin" / "python")
    trees = [t.resolve() for t in (args.tree or [HERE])]
    # PYTHONDONTWRITEBYTECODE (set on the development machine) would recompile every module on
    # every run: an installed tool has its .pyc files, so the runs measured here do too.
    base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")}
    caches = {t: tempfile.mkdtemp(prefix="sd-prof-") for t in trees}

    def env(tree: Path) -> dict[str, str]:
        # the probe-only row gets the compiled-modules folder sparkdoctor names (older trees ignore it)
        return {**base, "PYTHONPATH": str(tree), "SPARKDOCTOR_CACHE_DIR": caches[tree],
                "SPARKDOCTOR_PROBE_PYCACHE": str(Path(caches[tree]) / "pycache")}

    def check(tree: Path) -> list[str]:
        return [sys.executable, "-m", "sparkdoctor", "check", "--no-kernels", "--format", "json", "--python", py]

    def probe(tree: Path) -> list[str]:
        cache = Path(caches[tree]) / "probe-only.json"
        records = ["--records", str(cache) + ".records"] if (tree / "probes" / "target_env" / "targetenv_records.py").exists() else []
        return [py, "-B", str(tree / "probes" / "target_env"), "--cache", str(cache), *records]

    for t in trees:  # warm the caches
        cpu_run(check(t), env(t))
        cpu_run(probe(t), env(t))
    if args.cprofile:
        out = Path(tempfile.mkdtemp()) / "check.prof"
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "sparkdoctor"] + check(trees[-1])[3:],
                       env=env(trees[-1]), cwd=trees[-1], stdout=subprocess.DEVNULL, check=False)
        import pstats

        pstats.Stats(str(out)).sort_stats("cumulative").print_stats(40)
        return 0
    if args.importtime:
        done = subprocess.run([sys.executable, "-X", "importtime"] + check(trees[-1])[1:], env=env(trees[-1]),
                              cwd=trees[-1], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        rows = []
        for line in done.stderr.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].strip().isdigit():
                rows.append((int(parts[1]), parts[2].rstrip()))
        for us, name in sorted(rows, reverse=True)[:40]:
            print(f"{us / 1000:8.1f} ms  {name}")
        print(f"total top-level imports: {sum(us for us, n in rows if not n.startswith('  ')) / 1000:.1f} ms")
        return 0
    results: dict[tuple[Path, str], list[tuple[float, float, float]]] = {}
    for _ in range(args.runs):
        for t in trees:
            for what, argv in (("check", check(t)), ("probe", probe(t))):
                load = os.getloadavg()[0]
                cpu, wall, _rc = cpu_run(argv, env(t))
                results.setdefault((t, what), []).append((cpu, wall, load))
    print(f"runs: {args.runs}  cpus: {os.cpu_count()}  python: {sys.version.split()[0]}  venv: {args.venv}")
    print("| tree | what | cpu median s | cpu min s | wall median s | load (1 min) min-median-max |")
    print("|---|---|---:|---:|---:|---|")
    for (t, what), rows in results.items():
        cpus, walls, loads = zip(*rows, strict=False)
        print(f"| {t} | {what} | {statistics.median(cpus):.3f} | {min(cpus):.3f} | {statistics.median(walls):.3f} "
              f"| {min(loads):.1f}-{statistics.median(loads):.1f}-{max(loads):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
