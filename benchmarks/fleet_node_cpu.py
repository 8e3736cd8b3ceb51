#!/usr/bin/env python3
"""What one fleet node's probes cost in CPU on the node, and what the bundle bootstrap's imports add.

Runs what `fleet check` sends a node (bundle.multi_bundle: the runner, then the target_env, capabilities
and fleet_node probes, each in its own interpreter) with a serving venv's interpreter (tests/fleet/nodes.py),
and reads the CPU of that process tree with getrusage(RUSAGE_CHILDREN). Interleaved A/B: the bootstrap as
shipped, and the same with the import it had before (importlib.abc, whose import pulls importlib.resources
into every probe process).

    python benchmarks/fleet_node_cpu.py [--runs 15]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sparkdoctor.fleet.bundle as bundle_module  # noqa: E402
from sparkdoctor.targets.probe import HASH_BUDGET  # noqa: E402
from tests.fleet.nodes import serving_venv  # noqa: E402

JOBS = [("target_env", ["--hash-budget", str(HASH_BUDGET)]), ("capabilities", []), ("fleet_node", [])]


def script(bootstrap: str) -> str:
    bundle_module.BOOTSTRAP = bootstrap
    bundle_module.bundle.cache_clear()
    return bundle_module.multi_bundle(JOBS, 60)


def cpu_of(python: Path, text: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([str(python), "-B", "-"], input=text, capture_output=True, text=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or done.stdout.count('"returncode": 0') != len(JOBS):
        raise SystemExit(f"a probe failed: {(done.stdout + done.stderr)[-600:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    shipped = bundle_module.BOOTSTRAP
    older = shipped.replace("import base64, importlib.machinery, json", "import base64, importlib.abc, importlib.machinery, json")
    assert older != shipped
    with tempfile.TemporaryDirectory(prefix="fleet-node-cpu-") as tmp:
        python = serving_venv(Path(tmp), "venv")
        scripts = {"with importlib.abc (before)": script(older), "as shipped": script(shipped)}
        got: dict[str, list[float]] = {k: [] for k in scripts}
        for _ in range(args.runs):
            for key, text in scripts.items():
                got[key].append(cpu_of(python, text))
    for key, values in got.items():
        print(f"{key}: median {statistics.median(values) * 1000:.0f} ms CPU per node "
              f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f}, {len(values)} runs)")
    print(f"python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
