"""The streaming client against a real local SSE server, in both stream styles real servers use."""

import asyncio

import pytest

from sparkdoctor.bench.client import build_payload, stream_one
from sparkdoctor.bench.measure import BenchError, measure
from sparkdoctor.bench.server import detect
from sparkdoctor.bench.workload import Workload
from tests.bench.sse_server import Style, serve


def one(url, api="chat", vllm=True, max_tokens=16, timeout=10.0):
    payload = build_payload(api, "tiny", "hello world", max_tokens, vllm)
    return asyncio.run(stream_one(url, api, payload, timeout))


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_vllm_style_usage_chunk_then_done(api):
    with serve(Style(usage="separate", done=True)) as (url, style):
        s = one(url, api)
    assert s.ok, s.error
    assert (s.output_tokens, s.tokens_from, s.ended_by, s.finish_reason) == (16, "usage", "[DONE]", "length")
    assert s.chunks == 16 and len(s.gaps) == 15
    assert s.first_kind == ("content" if api == "chat" else "text")
    assert 0 < s.ttft <= s.e2e


def test_transformers_style_usage_in_last_chunk_and_plain_eof():
    with serve(Style(vllm=False, usage="last", done=False, chunked=False)) as (url, _):
        s = one(url, vllm=False)
    assert s.ok, s.error
    assert (s.output_tokens, s.tokens_from, s.ended_by) == (16, "usage", "eof")


def test_usage_counts_tokens_when_chunks_carry_several():
    with serve(Style(tokens_per_chunk=4)) as (url, _):
        s = one(url, max_tokens=32)
    assert s.ok and s.output_tokens == 32 and s.chunks == 8 and s.tokens_from == "usage"


def test_without_usage_the_count_is_the_chunks_and_says_so():
    with serve(Style(usage="none")) as (url, _):
        s = one(url)
    assert s.ok and (s.output_tokens, s.tokens_from) == (16, "chunks")


def test_ttft_is_the_first_reasoning_token_not_the_first_content():
    # 10 reasoning tokens 20 ms apart before any content: content-only TTFT would be >= 200 ms.
    with serve(Style(reasoning=10, delay=0.02)) as (url, _):
        s = one(url, max_tokens=12)
    assert s.ok and s.first_kind == "reasoning"
    assert s.ttft < 0.15 < s.e2e


def test_vllm_only_fields_go_to_vllm_only():
    with serve(Style(vllm=True)) as (url, style):
        one(url, vllm=True)
    assert style.requests[0]["ignore_eos"] is True and style.requests[0]["min_tokens"] == 16
    with serve(Style(vllm=False, reject_vllm_fields=True)) as (url, style):
        info = asyncio.run(detect(url))
        assert info.kind == "generic"
        m = asyncio.run(measure(url, "tiny", info, Workload(concurrency=(1,), rounds=1, warmup=0, max_tokens=8)))
    assert "ignore_eos" not in style.requests[0] and m.levels[0].samples[0].ok


def test_a_rejected_request_is_a_failed_sample_with_the_servers_words():
    with serve(Style(vllm=False, reject_vllm_fields=True)) as (url, _):
        s = one(url, vllm=True)
    assert not s.ok and "HTTP 422" in s.error and "ignore_eos" in s.error


@pytest.mark.parametrize("chunked", [True, False])
def test_a_server_that_dies_mid_stream_is_a_failure_not_a_short_success(chunked):
    with serve(Style(die_after=5, chunked=chunked, done=chunked)) as (url, _):
        s = one(url)
    assert not s.ok
    assert "closed" in s.error or "ended before" in s.error or "broke" in s.error


def test_detect_tells_vllm_from_generic():
    with serve(Style(vllm=True)) as (url, _):
        info = asyncio.run(detect(url))
    assert (info.kind, info.version, info.metrics, info.models) == ("vllm", "0.32.0", True, ["tiny"])


def test_measure_warms_up_then_runs_each_level_and_round():
    wl = Workload(concurrency=(1, 3), rounds=2, warmup=2, max_tokens=8)
    with serve(Style()) as (url, style):
        info = asyncio.run(detect(url))
        m = asyncio.run(measure(url, "tiny", info, wl))
    assert len(style.requests) == 2 + 1 * 2 + 3 * 2
    assert [len(lvl.rounds) for lvl in m.levels] == [2, 2]
    assert [len(r.samples) for r in m.levels[1].rounds] == [3, 3]
    summary = m.summary()
    assert summary["headline"]["concurrency"] == 1
    lvl = summary["levels"][1]
    assert lvl["requests"] == 6 and lvl["client"]["output_tokens"] == 8
    assert lvl["client"]["output_tps"]["n"] == 2
    # prompts differ between requests and repeat identically between runs
    prompts = [r["messages"][0]["content"] for r in style.requests[2:]]
    assert len(set(prompts)) == len(prompts)


def test_a_failed_request_stops_the_measurement_with_one_line():
    with serve(Style(die_after=3)) as (url, _):
        info = asyncio.run(detect(url))
        with pytest.raises(BenchError, match="warm-up request failed"):
            asyncio.run(measure(url, "tiny", info, Workload(concurrency=(1,), rounds=1)))


def _raw_server_run(reply: bytes, timeout: float, hold: float = 120.0):
    """One stream_one against a raw socket server that sends `reply` and then holds the connection open (long past
    any bound the tests put on the client: a bound only has to tell the client's limit from the server's close)."""

    async def main():
        async def handler(reader, writer):
            await reader.read(1 << 16)
            writer.write(reply)
            await writer.drain()
            await asyncio.sleep(hold)
            writer.close()

        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            payload = build_payload("chat", "tiny", "hi", 8, True)
            t0 = asyncio.get_running_loop().time()
            sample = await stream_one(f"http://127.0.0.1:{port}", "chat", payload, timeout)
            return sample, asyncio.get_running_loop().time() - t0
        finally:
            server.close()

    return asyncio.run(main())


def test_a_stream_that_goes_silent_is_a_stall_after_the_timeout_not_a_hang():
    chunk = b'data: {"choices":[{"index":0,"delta":{"content":" tok"}}]}\n\n'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    sample, took = _raw_server_run(head + b"%x\r\n" % len(chunk) + chunk + b"\r\n", timeout=0.5)
    assert not sample.ok and sample.error == "POST /v1/chat/completions: the stream stalled for 0.5s"
    assert took < 30  # its 0.5 s limit, not the server's 120 s hold; room for a loaded machine


def test_a_server_that_never_answers_and_one_that_is_not_http():
    sample, took = _raw_server_run(b"", timeout=0.5)
    assert not sample.ok and sample.error == "POST /v1/chat/completions: no answer within 0.5s" and took < 30
    sample, _ = _raw_server_run(b"SSH-2.0-OpenSSH_9.6\r\n\r\n", timeout=2, hold=0)
    assert not sample.ok and sample.error.startswith("not an HTTP answer")
