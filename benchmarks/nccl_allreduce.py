#!/usr/bin/env python3
"""A real NCCL all-reduce over two GPUs of one host (torch.distributed, 2 processes, NCCL), printed as
nccl-tests' all_reduce_perf prints it, so `fleet check`'s parser (sparkdoctor/fleet/toolparse.py) reads it
into the same finding shape as a measured rail (fleet/measure.py from_all_reduce).

Sizes double from --min-bytes to --max-bytes (8 MiB to 256 MiB by default); --max-bytes above 1 GiB is
refused: the 16 GB size of the NCCL playbook exhausts a Spark's unified memory and froze a node
(dgx-spark-playbooks#102). Each size runs --warmup then --iters timed all-reduces of float32 sums; each
result is checked (every element must equal the sum of the ranks' fills), so #wrong is real. Bus bandwidth
is algbw * 2(n-1)/n, as nccl-tests defines it (its doc/PERFORMANCE.md).

    python benchmarks/nccl_allreduce.py [--min-bytes 8M] [--max-bytes 256M] [--iters 20] [--warmup 5]
                                        [--rated-gbps 200] [--judge]

--judge also prints the Measurement fleet check would record (JSON on the last line), judged against
--rated-gbps. Needs torch with CUDA and two visible GPUs; on anything else it says so in one line (exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

MAX_BYTES = 1 << 30
WORLD = 2


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(float(text[:-1]) * units[text[-1]]) if text[-1:] in units else int(text)


def header(hosts: list[str], min_bytes: int, max_bytes: int, iters: int, warmup: int) -> str:
    lines = [f"# nThread 1 nGpus 1 minBytes {min_bytes} maxBytes {max_bytes} step: 2(factor) warmup iters: {warmup} "
             f"iters: {iters} agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {os.getpid():6d} on {h:>10} device {r:2d} [0x00] torch.distributed"
              for r, h in enumerate(hosts)]
    lines += ["#", "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    return "\n".join(lines)


def row(size: int, seconds: float, wrong: int, world: int = WORLD) -> str:
    """One all_reduce_perf data row (the in-place columns repeat the out-of-place run: torch has one kind)."""
    algbw = size / seconds / 1e9
    busbw = algbw * 2 * (world - 1) / world
    us = seconds * 1e6
    cols = f"{us:8.1f} {algbw:7.2f} {busbw:7.2f} {wrong:6d}"
    return f"{size:12d} {size // 4:13d} {'float':>9} {'sum':>7} {-1:7d} {cols}  {cols}"


def footer(busbws: list[float], wrong: int) -> str:
    avg = sum(busbws) / len(busbws) if busbws else 0.0
    return f"# Out of bounds values : {wrong} {'OK' if not wrong else 'FAILED'}\n# Avg bus bandwidth    : {avg:.5f} \n#"


def _worker(rank: int, args: argparse.Namespace, port: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD)
    try:
        sizes, size = [], args.min_bytes
        while size <= args.max_bytes:
            sizes.append(size)
            size *= 2
        if rank == 0:
            print(header([os.uname().nodename] * WORLD, args.min_bytes, args.max_bytes, args.iters, args.warmup), flush=True)
        busbws, wrong_total = [], 0
        expected = float(sum(r + 1 for r in range(WORLD)))
        for size in sizes:
            tensor = torch.empty(size // 4, dtype=torch.float32, device="cuda")
            for _ in range(args.warmup):
                tensor.fill_(rank + 1)
                dist.all_reduce(tensor)
            torch.cuda.synchronize()
            spent = 0.0
            wrong = 0
            for _ in range(args.iters):
                tensor.fill_(rank + 1)
                torch.cuda.synchronize()
                started = time.perf_counter()
                dist.all_reduce(tensor)
                torch.cuda.synchronize()
                spent += time.perf_counter() - started
                wrong += int((tensor != expected).sum().item())
            counts = torch.tensor([wrong], device="cuda")
            dist.all_reduce(counts)
            if rank == 0:
                line = row(size, spent / args.iters, int(counts.item()))
                busbws.append(float(line.split()[7]))
                wrong_total += int(counts.item())
                print(line, flush=True)
            del tensor
        if rank == 0:
            print(footer(busbws, wrong_total), flush=True)
    finally:
        dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", type=parse_size, default=8 << 20)
    parser.add_argument("--max-bytes", type=parse_size, default=256 << 20)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rated-gbps", type=float, default=None, help="the link's rated speed, for --judge")
    parser.add_argument("--judge", action="store_true", help="print fleet check's Measurement of this run")
    args = parser.parse_args()
    if args.max_bytes > MAX_BYTES or args.min_bytes < 4 or args.min_bytes > args.max_bytes:
        print(f"--max-bytes at most {MAX_BYTES} (1 GiB: a larger size can exhaust unified memory), and "
              "--min-bytes between 4 and --max-bytes", file=sys.stderr)
        return 2
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("needs torch (with CUDA): pip install torch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.device_count() < WORLD:
        print(f"needs {WORLD} visible CUDA GPUs; this host has {torch.cuda.device_count() if torch.cuda.is_available() else 0}",
              file=sys.stderr)
        return 2
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    if not args.judge:
        mp.spawn(_worker, args=(args, port), nprocs=WORLD, join=True)
        return 0
    import tempfile

    sys.stdout.flush()
    with tempfile.TemporaryFile("w+") as out:  # the spawned workers inherit fd 1: send it to a file, then read it
        saved = os.dup(1)
        os.dup2(out.fileno(), 1)
        try:
            mp.spawn(_worker, args=(args, port), nprocs=WORLD, join=True)
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        text = out.read()
    sys.stdout.write(text)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from sparkdoctor.fleet.measure import from_all_reduce

    found = from_all_reduce(text, os.uname().nodename, f"{WORLD} GPUs of one host", args.rated_gbps,
                            " ".join(sys.argv), tool="nccl_allreduce.py")
    print(json.dumps({"measurement": found.to_dict(), "findings": [f.to_dict() for f in found.findings()]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
