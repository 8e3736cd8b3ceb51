#!/usr/bin/env python3
"""How much of a checkpoint does `sparkdoctor audit` read, and how long does it take, against reading the weights?

Builds a real-shaped many-shard checkpoint as sparse files (default: Qwen3-Next-80B-A3B NVFP4 in ModelOpt
layout, 11 shards, ~51 GB on paper, a few MB on disk; see tests/audit/builders.py), then measures, in fresh
processes, interleaved over --runs:
  * `sparkdoctor audit MODEL --format json`       (wall time; bytes read per the kernel, /proc/self/io rchar)
  * reading every shard end to end, 16 MiB at a time (the least any weight loader must do; holes read as
    zeros from the page cache, so this is a lower bound on loading from a real disk)
and prints the median, min and max of each and the ratio.

    python benchmarks/audit_headers.py [--model qwen3-next|qwen3.6|qwen3-8b] [--runs 5] [--folder DIR] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

PROBE = """
import atexit, sys
def report():
    with open("/proc/self/io") as f:
        sys.stderr.write("IO " + [l.split()[1] for l in f if l.startswith("rchar")][0] + "\\n")
atexit.register(report)
sys.argv = ["sparkdoctor"] + sys.argv[1:]
from sparkdoctor.cli import main
main()
"""

READ_ALL = """
import sys, os
total = 0
for path in sys.argv[1:]:
    with open(path, "rb", buffering=0) as f:
        while True:
            chunk = f.read(16 << 20)
            if not chunk:
                break
            total += len(chunk)
print(total)
"""


def build(model: str, folder: Path) -> Path:
    from tests.audit import builders

    makers = {"qwen3-next": builders.qwen3_next_80b_nvfp4, "qwen3.6": builders.qwen36_35b_a3b_nvfp4,
              "qwen3-8b": lambda f: builders.qwen3_8b(f, "nvfp4")}
    target = folder / model
    if not (target / "config.json").exists():
        makers[model](target)
    return target


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    return time.perf_counter() - start, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen3-next", choices=["qwen3-next", "qwen3.6", "qwen3-8b"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--folder", type=Path, default=None, help="where to build the sparse checkpoint (default: a temp dir)")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="audit-bench-"))
    model = build(args.model, folder)
    shards = sorted(str(p) for p in model.glob("*.safetensors"))
    on_disk = sum(os.stat(s).st_blocks * 512 for s in shards)
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    probe = folder / "io_probe.py"
    probe.write_text(PROBE)
    audit_s, read_s, rchar, doc, total = [], [], 0, {}, 0
    for _ in range(args.runs):
        seconds, done = timed([sys.executable, str(probe), "audit", str(model), "--format", "json", "--gpu", "gb10"], env)
        if done.returncode not in (0, 1):
            print(done.stderr, file=sys.stderr)
            return 2
        audit_s.append(seconds)
        rchar = int(done.stderr.rsplit("IO ", 1)[1].split()[0])
        doc = json.loads(done.stdout)
        seconds, done = timed([sys.executable, "-c", READ_ALL, *shards], env)
        read_s.append(seconds)
        total = int(done.stdout)
    header = doc["headers"]["bytes_read"]
    rows = [
        ("checkpoint", f"{len(shards)} shards, {total / 1e9:.1f} GB of tensors on paper, {on_disk / 1e6:.1f} MB allocated on disk (sparse)"),
        ("audit: header bytes it read", f"{header:,} ({header / total:.4%} of the checkpoint)"),
        ("audit: bytes the process read (rchar: headers + its own Python modules)", f"{rchar:,}"),
        ("audit: wall time (median, min-max)", f"{statistics.median(audit_s):.2f} s ({min(audit_s):.2f}-{max(audit_s):.2f})"),
        ("read every byte of the shards (median, min-max)", f"{statistics.median(read_s):.2f} s ({min(read_s):.2f}-{max(read_s):.2f})"),
        ("reading the weights / audit", f"{statistics.median(read_s) / statistics.median(audit_s):.1f}x the time, {total / rchar:,.0f}x the bytes"),
        ("audit result", f"{doc['per_token']['total_bytes'] / 1e9:.2f} GB per token, ceiling {doc['roofline']['ceiling_tok_s']} tok/s at 273 GB/s"),
    ]
    for name, value in rows:
        print(f"| {name} | {value} |" if args.markdown else f"{name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
