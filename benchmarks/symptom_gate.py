#!/usr/bin/env python3
"""What does the serve log scanner pay per line (matrix.symptoms.line_hits against the bundled matrix's entries with
symptoms), before and after lines that cannot hold a symptom were turned away by the entries' gate?

Three sets of lines: the real logs and pasted errors in tests/data/explain (every line, symptom lines included), a
vLLM server's INFO lines (benchmarks/explain_many_symptoms.py's), and random printable 1 KB lines. `before` is every
symptom compared with the line (the plain path, with the symptom rows built for each line as before), `after`
line_hits as shipped, both in this run, in CPU microseconds per line (the machine is shared), each the median of
--runs, with the 1-minute load average before and after. The two must give the same hits on every line.

    python benchmarks/symptom_gate.py [--runs 7] [--random 2000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "benchmarks"))

from explain_many_symptoms import VLLM  # noqa: E402

from sparkdoctor.matrix.symptoms import _line_hits, _symptoms, line_hits  # noqa: E402
from sparkdoctor.serve.logscan import symptom_entries  # noqa: E402


def per_line(fn: Callable[[str], object], lines: list[str], runs: int) -> float:
    """Median CPU microseconds per line of `runs` passes over `lines`."""
    times = []
    for _ in range(runs):
        started = time.process_time()
        for line in lines:
            fn(line)
        times.append((time.process_time() - started) / len(lines) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--random", type=int, default=2000)
    args = parser.parse_args()
    entries = symptom_entries(None)
    real = [x for p in sorted((HERE / "tests/data/explain").iterdir()) for x in p.read_text(errors="replace").splitlines()]
    rnd = random.Random(0)
    chars = string.printable[:95]
    sets = {"tests/data/explain": real, "vLLM INFO": VLLM * 50,
            "random 1 KB": ["".join(rnd.choices(chars, k=1024)) for _ in range(args.random)]}

    def before(line: str) -> list[tuple[str, str, str]]:
        return [(e.id, s, h) for e, s, h in _line_hits(line, _symptoms(entries))]

    def after(line: str) -> list[tuple[str, str, str]]:
        return [(e.id, s, h) for e, s, h in line_hits(line, entries)]

    print(f"{len(entries)} entries, {sum(len(e.symptoms) for e in entries)} symptoms; {os.cpu_count()} CPUs")
    print(f"{'lines':<20}{'n':>6}{'hits':>6}{'before us':>11}{'after us':>10}{'x':>7}   load 1m before/after")
    for name, lines in sets.items():
        hits = [after(x) for x in lines]
        assert hits == [before(x) for x in lines], name
        load = os.getloadavg()[0]
        b, a = per_line(before, lines, args.runs), per_line(after, lines, args.runs)
        print(f"{name:<20}{len(lines):>6}{sum(map(bool, hits)):>6}{b:>11.1f}{a:>10.1f}{b / a:>7.1f}"
              f"   {load:.2f}/{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
