"""A server that misbehaves on purpose (endless or trickling streams and bodies, lines without end, redirects to
another server) against the bench's HTTP (bench/http.py), its streaming client, the correctness probes and the
whole `bench --url` command: each is that request's failure with one clear reason, never a hang, a memory blow-up
or a traceback. The limits are lowered through their module constants, so each case takes a fraction of a second;
what the tests assert is what ended the request (its reason), never how long it took. The servers are raw asyncio
sockets on 127.0.0.1 (port 0), in a thread of the test process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkdoctor.bench import client, correctness, http
from sparkdoctor.bench.client import build_payload, stream_one
from sparkdoctor.bench.http import HttpError, get
from sparkdoctor.bench.server import detect
from sparkdoctor.exitcodes import EXIT_BENCH_FAILED

REPO = Path(__file__).resolve().parents[2]
SAFETY_S = 60  # only so that a regression fails instead of hanging the suite; no test comes near it
CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"

Handler = Callable[[str, str, asyncio.StreamWriter], Awaitable[None]]


@contextlib.contextmanager
def hostile(handler: Handler) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """Serve `handler(method, path, writer)` on 127.0.0.1 in a thread; yield (base URL, the requests seen)."""
    seen: list[tuple[str, str]] = []
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            await reader.readexactly(int(headers.get("content-length", 0)))
            seen.append((method, path))
            await handler(method, path, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(connection, "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["stop"] = stop = asyncio.Event()
        ready.set()
        async with server:
            await stop.wait()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{box['port']}", seen
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        thread.join(5)
        loop.close()


def plain(writer: asyncio.StreamWriter, status: int, obj: object, extra: str = "") -> None:
    data = json.dumps(obj).encode()
    writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(data)}\r\nContent-Type: application/json\r\n{extra}\r\n"
                 .encode() + data)


async def endless(writer: asyncio.StreamWriter, piece: bytes, pause: float = 0.0, most: int = 128 * 2**20) -> None:
    """Send `piece` again and again (up to `most` bytes, so a client without limits still ends one day)."""
    sent = 0
    while sent < most:
        writer.write(piece)
        await writer.drain()
        sent += len(piece)
        await asyncio.sleep(pause)


def models_then(post: Handler) -> Handler:
    """A server that lists one model, has no /version or /metrics, and answers POSTs with `post`."""

    async def handle(method: str, path: str, writer: asyncio.StreamWriter) -> None:
        if method == "GET":
            if path == "/v1/models":
                return plain(writer, 200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})
            return plain(writer, 404, {"detail": "Not Found"})
        await post(method, path, writer)

    return handle


def one(url: str, max_tokens: int = 8, timeout: float = 10.0) -> client.Sample:
    payload = build_payload("chat", "tiny", "hello", max_tokens, True)
    return asyncio.run(asyncio.wait_for(stream_one(url, "chat", payload, timeout), SAFETY_S))


# ---- the stream of one request --------------------------------------------------------------------------------
async def endless_events(method: str, path: str, writer: asyncio.StreamWriter) -> None:
    writer.write(HEAD)
    await endless(writer, CHUNK * 16)


def test_an_endless_stream_stops_well_past_the_tokens_asked():
    with hostile(endless_events) as (url, _):
        s = one(url, max_tokens=8)
    assert not s.ok
    assert s.error == ("POST /v1/chat/completions: the stream sent more than 288 lines, far more than the request "
                       "asked for (a stream that does not end is not measurable)")


def test_a_stream_past_its_byte_cap_fails_with_that_reason(monkeypatch):
    monkeypatch.setattr(client, "STREAM_BASE_BYTES", 64 * 1024)
    monkeypatch.setattr(client, "STREAM_BYTES_PER_TOKEN", 0)
    big = b"data: " + json.dumps({"choices": [], "pad": "x" * 16_000}).encode() + b"\n\n"  # 2 events per 32 KB

    async def handle(method, path, writer):
        writer.write(HEAD)
        await endless(writer, big)

    with hostile(handle) as (url, _):
        s = one(url)
    assert not s.ok and s.error == ("POST /v1/chat/completions: the response stream passed 65,536 bytes, the most "
                                    "bench reads of one answer")


def test_a_line_that_never_ends_fails_at_the_longest_line(monkeypatch):
    monkeypatch.setattr(http, "MAX_LINE_BYTES", 4096)

    async def handle(method, path, writer):
        writer.write(HEAD + b"data: ")
        await endless(writer, b"x" * 1000)

    with hostile(handle) as (url, _):
        s = one(url)
    assert not s.ok and s.error == "POST /v1/chat/completions: a line of the stream passed 4,096 bytes without ending"


def test_a_trickling_stream_ends_at_the_requests_time_limit(monkeypatch):
    """One byte at a time, never silent for the 10 s a read may wait: only the total limit can end it."""
    monkeypatch.setattr(client, "STREAM_BASE_S", 0.3)
    monkeypatch.setattr(client, "STREAM_PER_TOKEN_S", 0.025)

    async def handle(method, path, writer):
        writer.write(HEAD)
        await endless(writer, b"d", pause=0.01)

    with hostile(handle) as (url, _):
        s = one(url, max_tokens=8, timeout=0.5)
    assert client.limits(8, 0.5).seconds == pytest.approx(1.0)
    assert not s.ok and s.error == ("POST /v1/chat/completions: the request did not finish in 1s, the most bench "
                                    "waits for this answer")


def test_what_follows_done_is_not_waited_for():
    done = CHUNK.replace(b"null", b'"length"') + b"data: [DONE]\n\n"

    async def handle(method, path, writer):
        writer.write(HEAD + CHUNK * 7 + done)
        await endless(writer, b": keep-alive comment\n", pause=0.01)

    with hostile(handle) as (url, _):
        s = one(url)
    assert s.ok, s.error
    assert (s.ended_by, s.chunks, s.finish_reason) == ("[DONE]", 8, "length")


# ---- whole bodies: GET and the correctness probes --------------------------------------------------------------
async def endless_body(method: str, path: str, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
    await endless(writer, b"vllm:x 1\n" * 8000)


def test_a_get_past_its_cap_fails_and_a_declared_length_is_refused_unread(monkeypatch):
    monkeypatch.setattr(http, "MAX_BODY_BYTES", 2**20)
    with hostile(endless_body) as (url, _):
        with pytest.raises(HttpError, match=r"^GET /metrics: the answer passed 1 MiB, the most bench reads of one$"):
            asyncio.run(get(url, "/metrics", timeout=30))

    async def declared(method, path, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n")
        await asyncio.sleep(30)

    with hostile(declared) as (url, _):
        with pytest.raises(HttpError, match="the answer passed 1 MiB"):
            asyncio.run(get(url, "/version", timeout=30))


def test_an_endless_model_list_is_a_clear_failure_of_detect(monkeypatch):
    monkeypatch.setattr(http, "MAX_BODY_BYTES", 2**20)
    with hostile(endless_body) as (url, _):
        with pytest.raises(HttpError, match="GET /v1/models: the answer passed 1 MiB"):
            asyncio.run(detect(url, timeout=30))


def in_thread(call: Callable[[], Any]) -> Any:
    """`call()` in a daemon thread, so that a regression that blocks fails the test instead of hanging it."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(call()), daemon=True)
    thread.start()
    thread.join(SAFETY_S)
    assert box, "still waiting: the call did not end"
    return box[0]


def test_an_endless_probe_answer_is_a_failed_probe(monkeypatch):
    monkeypatch.setattr(correctness, "MAX_ANSWER_BYTES", 2**20)
    with hostile(endless_body) as (url, seen):
        answers = in_thread(lambda: correctness.probe(url, "tiny", True, None))
    assert answers[0].error == "POST /v1/completions: the answer passed 1 MiB, the most bench reads of one"
    assert all(a.error == "not sent: an earlier probe request failed" for a in answers[1:])
    assert len(seen) == 1  # one failed probe is enough to leave the run unchecked
    assert correctness.judge(answers, None).verdict == correctness.Verdict.UNCHECKED


def test_the_probes_sent_at_once_each_stop_at_a_smaller_cap():
    """The probes at the run's top concurrency (bench/batched.py) hold every answer at once: at 16 MiB each, 64 of a
    hostile server's endless answers were 1 GiB. Each stops at 1 MiB (a vLLM answer is a few KB), and each is that
    probe's failure: the run is unchecked, never an internal error."""
    from sparkdoctor.bench import batched

    with hostile(endless_body) as (url, seen):
        answers = in_thread(lambda: batched.probe(url, "tiny", True, None, 8))
    assert [a.error for a in answers] == ["POST /v1/completions: the answer passed 1 MiB, the most bench reads of one"] * 8
    assert len(seen) == 8
    assert correctness.judge(answers, None).verdict == correctness.Verdict.UNCHECKED


def test_a_trickling_probe_answer_ends_at_its_time_limit():
    async def handle(method, path, writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{")
        await endless(writer, b" ", pause=0.01)

    with hostile(handle) as (url, _):
        answer = in_thread(lambda: correctness.ask(url, "tiny", "hi", True, timeout=0.5))
    assert answer.error == "POST /v1/completions got no full answer within 0.5s"


# ---- redirects ------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def redirecting() -> Iterator[tuple[str, str, list[tuple[str, str]]]]:
    """A server whose every answer is a redirect to a second, working one; yield (its URL, the target's, the
    target's requests)."""

    async def target(method, path, writer):
        if method == "GET":
            return plain(writer, 200, {"object": "list", "data": [{"id": "tiny"}]})
        writer.write(HEAD + CHUNK.replace(b"null", b'"length"') + b"data: [DONE]\n\n")

    with hostile(target) as (there, seen):
        async def handle(method, path, writer):
            plain(writer, 302 if method == "GET" else 307, {}, f"Location: {there}{path}\r\n")

        with hostile(handle) as (url, _):
            yield url, there, seen


def test_a_redirect_is_never_followed_and_names_where_it_pointed():
    with redirecting() as (url, there, seen):
        s = one(url)
        with pytest.raises(HttpError) as got:
            asyncio.run(detect(url))
        answer = correctness.ask(url, "tiny", "hi", True)
    assert not s.ok and s.error == (f"POST /v1/chat/completions answered HTTP 307, a redirect to "
                                    f"'{there}/v1/chat/completions': bench does not follow redirects (give the URL of "
                                    f"the server itself)")
    assert str(got.value).startswith(f"GET /v1/models answered HTTP 302, a redirect to '{there}/v1/models'")
    assert answer.error and f"a redirect to '{there}/v1/completions'" in answer.error
    assert seen == []  # the other server got nothing: no prompt, no numbers filed under the URL given


# ---- the whole command ------------------------------------------------------------------------------------------
def bench(tmp_path: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
               SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="160")
    argv = [sys.executable, "-m", "sparkdoctor", "bench", "--url", url, "--no-store", "--concurrency", "1", "--rounds",
            "1", "--max-tokens", "8", "--warmup", "0", "--no-correctness"]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SAFETY_S * 2)


def test_bench_against_an_endless_stream_exits_4_with_one_line(tmp_path):
    with hostile(models_then(endless_events)) as (url, _):
        out = bench(tmp_path, url)
    assert out.returncode == EXIT_BENCH_FAILED, out.stderr[-2000:]
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "the stream sent more than 288 lines" in out.stderr


def test_bench_against_a_redirect_exits_4_with_one_line_naming_it(tmp_path):
    with redirecting() as (url, there, seen):
        out = bench(tmp_path, url)
    assert out.returncode == EXIT_BENCH_FAILED, out.stderr[-2000:]
    assert out.stderr.count("\n") == 1 and f"a redirect to '{there}/v1/models'" in out.stderr
    assert seen == []
