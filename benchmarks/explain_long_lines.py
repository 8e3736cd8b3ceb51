#!/usr/bin/env python3
"""How long does explain's symptom normaliser take on one long line, before and after it was made linear?

A server log can hold one enormous line (a base64 image in a request log, a JSON dump of a config). The
normaliser (sparkdoctor/matrix/symptoms.py: colour codes out, paths and numbers as tokens) runs over every
line for `explain` and for bench's live log scan. Its path pattern was quadratic in the length of a run of
path characters with no '/' after it. This measures, for lines of 40 KB, 250 KB and 1 MB of three kinds
(one word, a JSON string value, base64):
  * before: the old pattern (kept here as the reference), in a child process stopped at --limit seconds;
  * after:  normalise() as shipped, and the whole explain matcher (match_text against the bundled matrix);
in CPU seconds (a shared, busy machine stretches wall time, not CPU time; the matcher's wall time is shown
too), each the median of --runs, with the machine's load average before and after.

    python benchmarks/explain_long_lines.py [--runs 3] [--limit 120] [--markdown]
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

OLD = r"(?:[A-Za-z]:)?(?:\.{0,2}/)?(?:[\w.+@-]+/)+[\w.+@-]*|/[\w.+@-]+"
SIZES = {"40 KB": 40_000, "250 KB": 250_000, "1 MB": 1_000_000}
CHILD = """
import re, sys, time
sys.path.insert(0, sys.argv[3])
from explain_long_lines import OLD, line
text = line(sys.argv[1], int(sys.argv[2])).lower()
t = time.process_time(); re.sub(OLD, "\\x00p", text); print(time.process_time() - t)
"""


def line(kind: str, n: int) -> str:
    if kind == "word":
        return "a" * n
    if kind == "json":
        return '{"prompt": "' + "v" * (n - 14) + '"}'
    return base64.b64encode(bytes((i * 7919) % 256 for i in range(n * 3 // 4))).decode()[:n]


def before(kind: str, n: int, limit: float) -> float | None:
    """CPU seconds the old pattern took in a fresh process (None: still running at `limit` wall seconds, then
    killed)."""
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(Path(__file__).resolve().parent)],
                           capture_output=True, text=True, timeout=limit, check=True)
    except subprocess.TimeoutExpired:
        return None
    return float(p.stdout.strip())


def after(kind: str, n: int, runs: int) -> tuple[float, float, float]:
    """Medians of: normalise() CPU seconds, the whole explain matcher's CPU seconds, and its wall seconds."""
    from sparkdoctor.matrix import load
    from sparkdoctor.matrix.symptoms import match_text, normalise

    text = line(kind, n)
    entries = load(None).entries
    norm, whole, wall = [], [], []
    for _ in range(runs):
        t = time.process_time()
        normalise(text)
        norm.append(time.process_time() - t)
        t, w = time.process_time(), time.perf_counter()
        match_text(text, entries)
        whole.append(time.process_time() - t)
        wall.append(time.perf_counter() - w)
    return statistics.median(norm), statistics.median(whole), statistics.median(wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=float, default=120.0, help="seconds before the old pattern is stopped")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    load_before = os.getloadavg()
    rows = []
    for label, n in SIZES.items():
        for kind in ("word", "json", "base64"):
            old = before(kind, n, args.limit)
            norm, whole, wall = after(kind, n, args.runs)
            rows.append((label, kind, f"{old:.2f} s" if old is not None else f"> {args.limit:g} s wall (stopped)",
                         f"{norm * 1000:.1f} ms", f"{whole * 1000:.0f} ms", f"{wall * 1000:.0f} ms"))
            print(*rows[-1], sep=" | ", file=sys.stderr)
    load_after = os.getloadavg()
    head = ("line", "kind", "before: old pattern (CPU)", "after: normalise() (CPU)", "after: explain matcher (CPU)",
            "after: explain matcher (wall)")
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        for row in [head, *rows]:
            print("  ".join(f"{c:<28}" for c in row))
    print(f"\nload average (1, 5, 15 min) before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
