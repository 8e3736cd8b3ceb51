"""A real local OpenAI-style streaming server (asyncio, TCP on 127.0.0.1) for the client's tests and
for benchmarks/bench_client_overhead.py: it speaks both stream styles seen on real servers.

Style knobs: `vllm` (answers /version and vllm:* /metrics, requires nothing else), `usage` ("separate"
chunk with empty choices as vLLM, "last" inside the final chunk as transformers serve, "none"),
`done` (send `data: [DONE]` or end at EOF), `reasoning` (the first N tokens as reasoning_content),
`delay` (seconds between tokens; 0 streams as fast as it can), `chunked` (transfer coding or EOF body),
`reject_vllm_fields` (answer 422 to ignore_eos/min_tokens, as transformers serve does),
`die_after` (close the connection after N tokens, as a crashed server), `answer` (the text of every
non-streamed completion, as the correctness gate's probe requests get; None: those get a stream too),
`completion` (the whole JSON document of every non-streamed completion, before `answer`: a hostile shape),
`server_info`, `cache_config`, `root`, `max_model_len` (what a vLLM server says of its own configuration).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Style:
    vllm: bool = True
    usage: str = "separate"  # separate | last | none
    done: bool = True
    reasoning: int = 0
    delay: float = 0.0
    first_delay: float = 0.0
    chunked: bool = True
    reject_vllm_fields: bool = False
    die_after: int | None = None
    tokens_per_chunk: int = 1
    stamp: bool = False  # put the send time (time.perf_counter(), one clock for all processes here) in each chunk
    model: str = "tiny"
    answer: str | None = None
    completion: Any = None
    server_info: str | None = None  # vLLM's /server_info vllm_config (VLLM_SERVER_DEV_MODE=1); None: 404
    cache_config: dict[str, str] | None = None  # the labels of vllm:cache_config_info on /metrics
    root: str | None = None  # /v1/models' root (vLLM: the path or hub id it loaded) and max_model_len
    max_model_len: int | None = None
    batch_fault: float = 0.0  # > 0: hold a lone non-streamed answer up to this long for company, and shift the
    #                           log-probabilities by -3 of answers that met another (a kernel wrong only at larger batches)
    requests: list[dict[str, Any]] = field(default_factory=list)
    generated: int = 0
    inflight: set[object] = field(default_factory=set)
    crowded: set[object] = field(default_factory=set)
    company: Any = None


def _chunk(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _events(style: Style, body: dict[str, Any]) -> Iterator[bytes]:
    chat = "messages" in body
    n = int(body.get("max_tokens") or 16)
    base = {"id": "x", "model": style.model, "object": "chat.completion.chunk" if chat else "text_completion"}
    if chat:
        yield _chunk({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    sent = 0
    while sent < n:
        k = min(style.tokens_per_chunk, n - sent)
        text = " tok" * k
        if chat:
            delta = {"reasoning_content": text} if sent < style.reasoning else {"content": text}
            choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
        else:
            choice = {"index": 0, "text": text, "finish_reason": None}
        sent += k
        last = sent >= n
        obj = {**base, "choices": [choice]}
        if style.stamp:
            obj["sent"] = time.perf_counter()
        if last:
            choice["finish_reason"] = "length"
            if style.usage == "last":
                obj["usage"] = {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5}
        yield _chunk(obj)
    if style.usage == "separate":
        yield _chunk({**base, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5}})
    if style.done:
        yield b"data: [DONE]\n\n"


class _Handler:
    def __init__(self, style: Style):
        self.style = style

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self.handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def handle(self, reader, writer) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        body = await reader.readexactly(int(headers.get("content-length", 0)))
        s = self.style
        if method == "GET":
            if path == "/v1/models":
                card = {"id": s.model, "object": "model", "root": s.root, "max_model_len": s.max_model_len}
                return self.plain(writer, 200, {"object": "list", "data": [{k: v for k, v in card.items() if v is not None}]})
            if path == "/server_info" and s.vllm and s.server_info is not None:
                return self.plain(writer, 200, {"vllm_config": s.server_info, "vllm_env": {}, "system_env": {}})
            if path == "/version" and s.vllm:
                return self.plain(writer, 200, {"version": "0.32.0"})
            if path == "/metrics" and s.vllm:
                text = (f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{model_name=\"{s.model}\"}} "
                        f"{float(s.generated)}\n")
                if s.cache_config is not None:
                    labels = ",".join(f'{k}="{v}"' for k, v in s.cache_config.items())
                    text += f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{labels}}} 1.0\n"
                return self.plain(writer, 200, text)
            if path == "/health":
                return self.plain(writer, 200, {})
            return self.plain(writer, 404, {"detail": "Not Found"})
        req = json.loads(body)
        s.requests.append(req)
        if s.reject_vllm_fields and ({"ignore_eos", "min_tokens"} & set(req)):
            return self.plain(writer, 422, {"detail": "unknown field ignore_eos"})
        if s.completion is not None and req.get("stream") is False and s.batch_fault:
            return self.plain(writer, 200, await self.batched(s.completion))
        if s.completion is not None and req.get("stream") is False:
            return self.plain(writer, 200, s.completion)
        if s.answer is not None and req.get("stream") is False:
            return self.plain(writer, 200, {"id": "x", "object": "text_completion", "model": s.model,
                                            "choices": [{"index": 0, "text": s.answer, "finish_reason": "length"}]})
        hdr = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        hdr += "Transfer-Encoding: chunked\r\n\r\n" if s.chunked else "Connection: close\r\n\r\n"
        writer.write(hdr.encode())
        if s.first_delay:
            await asyncio.sleep(s.first_delay)
        for i, event in enumerate(_events(s, req)):
            if s.die_after is not None and i > s.die_after:
                writer.transport.abort()
                return
            writer.write(b"%x\r\n%s\r\n" % (len(event), event) if s.chunked else event)
            if event.startswith(b'data: {"id"') and b'"choices":[{' in event:
                s.generated += 1
            if s.delay:
                await writer.drain()
                await asyncio.sleep(s.delay)
            elif i % 64 == 0:
                await writer.drain()
        if s.chunked:
            writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def batched(self, doc: Any) -> Any:
        """Hold a lone answer up to `batch_fault` seconds for company; the moment a second request arrives, every
        answer in flight is crowded and released. A stalled machine only makes the wait longer, never the fault
        unseen: requests sent at once always meet, requests sent one after another never do."""
        s, me = self.style, object()
        if s.inflight:
            s.crowded.update(s.inflight | {me})
            s.company.set()
            s.inflight.clear()
        else:
            s.inflight.add(me)
            s.company = asyncio.Event()
            try:
                await asyncio.wait_for(s.company.wait(), s.batch_fault)
            except asyncio.TimeoutError:
                pass
            s.inflight.discard(me)
        if me not in s.crowded:
            return doc
        s.crowded.discard(me)
        doc = json.loads(json.dumps(doc))
        lp = doc["choices"][0]["logprobs"]
        lp["token_logprobs"] = [v if v is None else v - 3.0 for v in lp["token_logprobs"]]
        return doc

    def plain(self, writer, status: int, obj: Any) -> None:
        data = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(data)}\r\nContent-Type: application/json\r\n\r\n".encode() + data)


@contextlib.contextmanager
def serve(style: Style | None = None) -> Iterator[tuple[str, Style]]:
    """Run the server in a thread; yield (base URL, its Style, which records every request body)."""
    style = style or Style()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        server = await asyncio.start_server(_Handler(style), "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["stop"] = stop = asyncio.Event()
        ready.set()
        async with server:
            await stop.wait()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:  # connections still open: close them while the loop still runs
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        await asyncio.sleep(0.05)

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{box['port']}", style
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        thread.join(5)
        loop.close()


TORCH_DTYPES = {"auto": "bfloat16", "bfloat16": "bfloat16", "float": "float32", "float16": "float16", "float32": "float32",
                "half": "float16"}  # vLLM's --dtype names -> the torch dtype it serves (auto: as for a bf16 checkpoint)


def engine_config(model: str, dtype: str, kv_cache_dtype: str) -> str:
    """The start of vLLM's engine configuration line (VllmConfig.__str__), as /server_info's vllm_config says it."""
    return (f"model={model!r}, speculative_config=None, tokenizer={model!r}, skip_tokenizer_init=False, revision=None, "
            f"trust_remote_code=False, dtype=torch.{TORCH_DTYPES[dtype]}, max_seq_len=4096, tensor_parallel_size=1, "
            f"quantization=None, enforce_eager=False, kv_cache_dtype={kv_cache_dtype}, device_config=cpu")


def main(argv: list[str]) -> None:
    """Run as a server process (what a test recipe's command starts):
    sse_server.py [--host H] [--port P] [--delay S] [--generic] [--model NAME] [--exit-after N] [--completion FILE]
    --exit-after N: the whole process exits (status 7) when request N+1 arrives, as a crashing server.
    --hold-mib N: the first request makes it take N MiB more (written, so resident) and keep them, as a server
    whose memory grows under load."""
    import argparse
    import os
    import sys

    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--generic", action="store_true")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--exit-after", type=int, default=None)
    ap.add_argument("--stamp", action="store_true")
    ap.add_argument("--hold-mib", type=int, default=0)
    ap.add_argument("--completion", default=None)  # a JSON file: the answer to every non-streamed completion (Style.completion)
    ap.add_argument("--kv-cache-dtype", default="auto")  # accepted and ignored, as recipes for vLLM pass it (bench roofline tests)
    ap.add_argument("--config", default=None)  # a file that must exist, opened from the working folder as vLLM does
    ap.add_argument("--dtype", default="auto", choices=sorted(TORCH_DTYPES))  # vLLM's names; said at /server_info as it does
    args = ap.parse_args(argv)
    if args.config is not None and not os.path.isfile(args.config):
        sys.exit(f"sse_server: --config {args.config}: no such file in {os.getcwd()}")
    style = Style(vllm=not args.generic, usage="last" if args.generic else "separate", done=not args.generic,
                  delay=args.delay, model=args.model, stamp=args.stamp,
                  cache_config={"cache_dtype": args.kv_cache_dtype} if args.kv_cache_dtype != "auto" else None,
                  server_info=engine_config(args.model, args.dtype, args.kv_cache_dtype)
                  if os.environ.get("VLLM_SERVER_DEV_MODE") == "1" else None,
                  completion=json.loads(open(args.completion).read()) if args.completion else None)
    handler = _Handler(style)
    if args.exit_after is not None:
        original = handler.handle

        async def handle(reader, writer):
            if len(style.requests) >= args.exit_after:
                print("sse_server: exiting on purpose mid-bench", file=sys.stderr, flush=True)
                os._exit(7)
            await original(reader, writer)

        handler.handle = handle
    if args.hold_mib:
        held: list[bytes] = []
        before_hold = handler.handle

        async def hold(reader, writer):
            if not held:
                held.append(b"\x01" * (args.hold_mib * 2**20))
            await before_hold(reader, writer)

        handler.handle = hold

    async def serve_forever() -> None:
        server = await asyncio.start_server(handler, args.host, args.port)
        print(f"sse_server listening on {args.host}:{args.port} delay={args.delay}", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(serve_forever())


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
