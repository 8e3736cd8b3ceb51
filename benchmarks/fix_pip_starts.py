#!/usr/bin/env python3
"""What a pip start of `fix` costs, and how many a plan and an apply make (docs/evidence/suitetime-2026-12-02.md).

Builds the fix tests' pip target (tests/fix/scenario.py: `python -m venv`, its pip, six/idna/cattrs/attrs/typing_extensions
from local wheels), then:

- per kind of call of targets/target_pip_dry.py (the settings read alone, a dry run with and without the settings printed
  first, a bare interpreter start): the CPU seconds of the child, min and median of --runs;
- with --trace (needs strace): one `fix --yes` of the test plan and its `fix --rollback` under `strace -f -e execve`,
  every process they started, counted by kind.

    .venv/bin/python benchmarks/fix_pip_starts.py [--runs 9] [--trace]

Run it from the repository root (it imports tests.fix.scenario). CPU seconds, not wall time: the machine may be shared.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.getcwd())

from sparkdoctor.fix.pip_settings import keep_argument  # noqa: E402
from tests.fix import scenario  # noqa: E402


def child_cpu(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, done


def per_call(python: Path, wheels: Path, runs: int) -> None:
    shared, script = os.path.join(os.getcwd(), "probes/shared"), os.path.join(os.getcwd(), "sparkdoctor/targets/target_pip_dry.py")
    base = [str(python), "-S", "-B", "-X", f"sparkdoctor_site={shared}", script]
    dry = ["install", "--disable-pip-version-check", "--no-input", "--dry-run", "--report", os.devnull, "--quiet",
           "six==1.17.0", "--no-index", "--find-links", str(wheels)]
    cases = {"--list-settings (the settings read alone)": base + ["--list-settings"],
             "dry run, --keep-settings": base + keep_argument() + dry,
             "dry run, --keep-settings --print-settings": base + keep_argument() + ["--print-settings"] + dry,
             "python -S -c pass": [str(python), "-S", "-c", "pass"]}
    for name, argv in cases.items():
        seconds = []
        for _ in range(runs):
            cpu, done = child_cpu(argv)
            assert done.returncode == 0, done.stderr[-500:]
            seconds.append(cpu)
        seconds.sort()
        print(f"{name:45s} min {seconds[0]:.3f}  median {seconds[len(seconds) // 2]:.3f} CPU s")


def traced(root: Path, python: Path) -> None:
    env_file, pins = scenario.files_for(root)
    env = {**os.environ, "PIP_CONSTRAINT": str(pins), "SPARKDOCTOR_STATE_DIR": str(root / "state")}
    data = scenario.DATA
    runs = {"apply": ["--env-file", str(env_file), "--yes", "--python", str(python), "--no-kernels", "--matrix",
                      str(data / "matrix"), "--fixes", str(data / "fixes")], "rollback": ["--rollback"]}
    for label, args in runs.items():
        trace = root / f"{label}.strace"
        cpu, done = child_cpu(["strace", "-f", "-s", "400", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(trace),
                               sys.executable, "-m", "sparkdoctor", "fix", *args], env)
        kinds: collections.Counter[str] = collections.Counter()
        for line in trace.read_text().splitlines():
            if "execve(" not in line or "= 0" not in line:
                continue
            words = re.findall(r'"([^"]*)"', line.split("[", 1)[-1])
            words = [w for w in words if not w.startswith("sparkdoctor_site=") and w not in ("-S", "-B", "-X")]
            kinds[re.sub(r"/tmp/\S+", "TMP", " ".join([os.path.basename(words[0]), *words[1:5]]))[:140]] += 1
        print(f"\n{label}: exit {done.returncode}, {sum(kinds.values())} processes, {cpu:.2f} CPU s under strace")
        for kind, n in kinds.most_common():
            print(f"  {n:3d}  {kind}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--trace", action="store_true", help="count the processes of one apply and its rollback (strace)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fix-pip-starts-"))
    wheels = scenario.wheelhouse(root / "wheels")
    python = scenario.make_target(root, "pip", wheels)
    per_call(python, wheels, args.runs)
    if args.trace:
        traced(root, python)


if __name__ == "__main__":
    main()
