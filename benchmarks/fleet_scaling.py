#!/usr/bin/env python3
"""Does `sparkdoctor fleet check` probe nodes in parallel? Time one node against eight.

Starts a real sshd on 127.0.0.1 (tests/fleet/sshd.py: generated host and user keys, installed by apt when
missing), builds one serving venv (tests/fleet/nodes.py), and times `fleet check --hosts` over 1 node and
over N nodes (fleet-0 .. fleet-7, all served by that sshd), interleaved over --runs, each in a fresh
process like a user's run. Prints the median, min and max of each, the ratio N/1 (parallel: well under
2; serial: about N), the machine's CPU count and its load average before and after.

All the "nodes" are this machine: every node's probes compete for its cores, which a real fleet (one
machine per node) does not. The ratio measured here is therefore an upper bound on a real fleet's.

    python benchmarks/fleet_scaling.py [--nodes 8] [--runs 5] [--markdown]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from tests.fleet.nodes import serving_venv  # noqa: E402
from tests.fleet.sshd import start_sshd  # noqa: E402


def timed(argv: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"}
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"fleet check failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(tmp)
        hosts = [f"fleet-{i}" for i in range(args.nodes)]
        server = start_sshd(root / "sshd", hosts)
        try:
            python = serving_venv(root, "venv")
            base = [sys.executable, "-m", "sparkdoctor", "fleet", "check", "--ssh-config", str(server.config),
                    "--remote-python", str(python), "--format", "json"]
            one, many = base + ["--hosts", hosts[0]], base + ["--hosts", ",".join(hosts)]
            timed(one), timed(many)  # warm: page cache, sshd's first fork
            load_before = os.getloadavg()
            times: dict[str, list[float]] = {"1": [], str(args.nodes): []}
            for _ in range(args.runs):
                times["1"].append(timed(one))
                times[str(args.nodes)].append(timed(many))
            load_after = os.getloadavg()
        finally:
            server.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med[str(args.nodes)] / med["1"]
    rows = [(k, med[k], min(v), max(v)) for k, v in times.items()]
    if args.markdown:
        print("| nodes | median s | min s | max s |\n|---|---|---|---|")
        for k, m, lo, hi in rows:
            print(f"| {k} | {m:.2f} | {lo:.2f} | {hi:.2f} |")
    else:
        for k, m, lo, hi in rows:
            print(f"{k:>3} node(s): median {m:.2f} s (min {lo:.2f}, max {hi:.2f})")
    print(f"ratio {args.nodes}/1: {ratio:.2f} (parallel: well under 2; serial: about {args.nodes})")
    print(f"cpus {os.cpu_count()}; load average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")


if __name__ == "__main__":
    main()
