"""JSON of the wrong shape from a server is that request's failure with its reason (exit 4, one line) or is not
counted, never an internal error. Before: `{"choices": "x"}`, a delta that is a number, a model id that is a number
and JSON nested past the parser's depth each ended `bench --url` with "internal error" (exit 2); a 400-digit
`completion_tokens` overflowed the rates' float division (internal error), and a negative one was stored as a
negative token count."""

from __future__ import annotations

import asyncio
import json

import pytest

from sparkdoctor.bench import client, correctness
from sparkdoctor.bench.client import Sample
from sparkdoctor.bench.server import detect
from sparkdoctor.exitcodes import EXIT_BENCH_FAILED
from tests.bench.test_hostile_server import (
    HEAD,
    bench,
    hostile,
    models_then,
    one,
    plain,
)

TEXT = b'{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}'
DONE = b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'


def _account(*events: bytes) -> Sample:
    return client._account(Sample(ok=False), "chat", [(0.01 * (i + 1), e) for i, e in enumerate(events)], 0.0)


@pytest.mark.parametrize("event", [b'{"choices": "x"}', b'{"choices": {"a": {"delta": {"content": "x"}}}}',
                                   b'{"choices": 5}', b'{"choices": ["x", 5, null]}', b'{"choices": [{"delta": 5}]}',
                                   b'{"choices": [{"delta": ["content"]}]}', b"[" * 100_000])
def test_a_stream_of_the_wrong_shape_is_a_failed_request_with_its_reason(event):
    sample = _account(event, event)
    assert not sample.ok
    assert sample.error in ("the stream ended without a single token",) or sample.error.startswith(
        "the stream carried a line that is not JSON")


@pytest.mark.parametrize("usage", [{"completion_tokens": 10**400}, {"completion_tokens": -3}, {"completion_tokens": True},
                                   {"completion_tokens": 2.0}, "twelve", [1]])
def test_a_usage_no_server_means_is_not_believed_and_the_chunks_are_counted(usage):
    sample = _account(TEXT, TEXT, DONE, json.dumps({"choices": [], "usage": usage}).encode())
    assert sample.ok and sample.tokens_from == "chunks" and sample.output_tokens == 2


def test_a_good_usage_is_still_believed():
    sample = _account(TEXT, TEXT, DONE, b'{"choices": [], "usage": {"completion_tokens": 7, "prompt_tokens": [1]}}')
    assert sample.ok and (sample.output_tokens, sample.tokens_from, sample.prompt_tokens) == (7, "usage", None)


@pytest.mark.parametrize("body", [{"data": [{"id": 5}, {"id": "m"}, {"id": None}]}, {"data": "x"}, [1]])
def test_model_ids_that_are_not_text_are_not_models(body):
    async def answer(method: str, path: str, writer: asyncio.StreamWriter) -> None:
        plain(writer, 200 if path == "/v1/models" else 404, body if path == "/v1/models" else {})

    with hostile(answer) as (url, _):
        info = asyncio.run(detect(url))
    assert info.models == (["m"] if isinstance(body, dict) and isinstance(body["data"], list) else [])


@pytest.mark.parametrize("event", [b'{"choices": "x"}', b"[" * 100_000])
def test_bench_against_a_stream_of_the_wrong_shape_exits_4_with_one_line(tmp_path, event):
    async def post(method: str, path: str, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD + b"data: " + event + b"\n\ndata: [DONE]\n\n")
        await writer.drain()

    with hostile(models_then(post)) as (url, _):
        out = bench(tmp_path, url)
    assert out.returncode == EXIT_BENCH_FAILED, out.stderr[-2000:]
    assert out.stderr.count("\n") == 1 and "internal error" not in out.stderr


def test_a_correctness_answer_nested_too_deep_is_a_failed_probe_not_an_internal_error():
    async def answer(method: str, path: str, writer: asyncio.StreamWriter) -> None:
        data = b"[" * 100_000
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(data) + data)

    with hostile(answer) as (url, _):
        with pytest.raises(ValueError, match="nested too deep"):
            correctness._post(url, {"model": "m", "prompt": "x"}, 10)



def _streamed(max_tokens: int, *events: bytes) -> Sample:
    """One real streamed request for `max_tokens` to a server that sends `events` (then [DONE])."""
    async def post(method: str, path: str, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD + b"".join(b"data: " + e + b"\n\n" for e in events) + b"data: [DONE]\n\n")
        await writer.drain()

    with hostile(models_then(post)) as (url, _):
        return one(url, max_tokens)


def _usage(count: int) -> bytes:
    return json.dumps({"choices": [], "usage": {"completion_tokens": count}}).encode()


@pytest.mark.parametrize("count", [0, 9, 24, 2**31])
def test_a_usage_count_no_stream_can_have_is_not_believed(count):
    """A usage count of none for a stream that carried text, or above the tokens asked, was believed:
    `completion_tokens: 0` stored a run of 0 output tok/s, 2**31 one of 1.9e10 decode tok/s per stream, exit 0. Such a
    count is not believed and the chunks are counted, as for a count no server means."""
    sample = _streamed(8, TEXT, TEXT, DONE, _usage(count))
    assert sample.ok and (sample.output_tokens, sample.tokens_from) == (2, "chunks"), sample


@pytest.mark.parametrize("count", [1, 2, 5, 8])
def test_a_usage_count_from_one_to_the_tokens_asked_is_believed(count):
    """Below the chunks too (1): a stream that repeats its chunks carries more of them than tokens, and which of the
    two is wrong is not known."""
    sample = _streamed(8, TEXT, TEXT, DONE, _usage(count))
    assert sample.ok and (sample.output_tokens, sample.tokens_from) == (count, "usage"), sample


def test_a_server_that_streams_past_the_tokens_asked_is_counted_by_its_chunks_or_usage():
    """A server that ignores max_tokens (not vLLM, which is asked for exactly that many) streams more chunks than asked:
    a usage count up to those chunks is believed."""
    assert _streamed(8, *[TEXT] * 12, DONE, _usage(12)).output_tokens == 12
    assert _streamed(8, *[TEXT] * 12, DONE, _usage(13)).tokens_from == "chunks"


def test_tpot_ends_at_the_last_token_not_at_what_the_server_sends_after_it():
    """TPOT was (e2e - ttft) / (tokens - 1), e2e the stream's last byte: a server that sends its usage chunk or
    `[DONE]` late had that wait counted as decoding (`vllm bench serve` ends a request's decode at its last chunk with
    choices). Seven chunks of text 0.1 s apart (eight tokens, says usage), then usage 2 s later: TPOT 0.086 s, not
    0.386 s; e2e stays the last byte."""
    events = [(0.1 * (i + 1), TEXT) for i in range(7)] + [(0.8, DONE), (2.8, b'{"choices": [], "usage": '
                                                                         b'{"completion_tokens": 8}}')]
    sample = client._account(Sample(ok=False, e2e=2.8), "chat", events, 0.0, 8)
    assert sample.ok and sample.output_tokens == 8
    assert sample.tpot == pytest.approx(0.6 / 7) and sample.e2e == 2.8
