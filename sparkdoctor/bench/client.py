"""One streamed request, timed: what a bench measures, taken from the server-sent-event stream.

The stream styles this accepts (both seen on real servers, see shared/research):
- vLLM: one `data: {...}` per chunk, then a usage chunk with empty `choices`, then `data: [DONE]`;
- transformers serve: `usage` inside the final chunk with the finish reason, no `[DONE]`, plain EOF.
The first token is the first chunk that carries text: `content` OR `reasoning_content`/`reasoning`
(chat), `text` (completions). A harness that waits for `content` alone reports the whole thinking
phase of a reasoning model as its time to first token. Role-only chunks are not tokens.
Token counts come from `usage` when the server sends it; otherwise the count of chunks with text
(said so in `tokens_from`), which is exact only for servers that send one token per chunk. A usage count no stream
can have is not believed either (the chunks are counted): none for a stream that carried text, or more than were
asked for, unless the stream carried more chunks than that (a server that ignores max_tokens). A server's
`completion_tokens: 0` stored a run of 0 tok/s, 2**31 one of 1.9e10 decode tok/s per stream.

Limits of one request, scaled with the tokens it asks for (`limits`; bench/http.py enforces them, and a request
past one fails with that reason, which ends the run as any failed request does: exit 4, one line):
- time: the wait allowed for the first byte (the workload's request_timeout, 60 s by default) + STREAM_BASE_S
  (queueing, prefill) + STREAM_PER_TOKEN_S per token asked: a stream slower than 1 token/s is not measurable;
- bytes: STREAM_BASE_BYTES + STREAM_BYTES_PER_TOKEN per token asked (a vLLM chat chunk is about 250 bytes);
- events: EVENTS_BASE + EVENTS_PER_TOKEN per token asked (a server sends one `data:` line per token, or fewer).
The reading stops at `data: [DONE]`: what a server sends after it is not waited for.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sparkdoctor.bench.http import HttpError, post_lines
from sparkdoctor.inputs import NotJSON, NumberTooLong, json_answer

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
STREAM_BASE_S = 120.0
STREAM_PER_TOKEN_S = 1.0
STREAM_BASE_BYTES = 64 * 2**20
STREAM_BYTES_PER_TOKEN = 1024
EVENTS_BASE = 256
EVENTS_PER_TOKEN = 4
MAX_COUNT = 2**31  # the most tokens a `usage` count is believed for


@dataclass(frozen=True)
class Limits:
    """The most one streamed request may take: seconds in all, bytes of its answer, `data:` lines."""

    seconds: float
    bytes: int
    events: int
    tokens: int  # the output tokens asked for


def limits(max_tokens: int, timeout: float) -> Limits:
    """The limits of a request that asks for `max_tokens` and waits `timeout` for its first byte (module docstring)."""
    return Limits(timeout + STREAM_BASE_S + STREAM_PER_TOKEN_S * max_tokens,
                  STREAM_BASE_BYTES + STREAM_BYTES_PER_TOKEN * max_tokens, EVENTS_BASE + EVENTS_PER_TOKEN * max_tokens,
                  max_tokens)


@dataclass
class Sample:
    """One request as the client saw it. Times in seconds from sending the request."""

    ok: bool
    error: str | None = None
    ttft: float | None = None  # first chunk with text (content or reasoning)
    e2e: float | None = None  # last byte of the stream
    output_tokens: int = 0
    tokens_from: str = "usage"  # usage | chunks
    prompt_tokens: int | None = None
    chunks: int = 0  # chunks that carried text
    ended_by: str = "eof"  # [DONE] | eof
    finish_reason: str | None = None
    first_kind: str | None = None  # content | reasoning | text
    gaps: list[float] = field(default_factory=list)  # seconds between successive text chunks

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first: from the first chunk of text to the last (ttft + the gaps between
        them), over tokens - 1. Not to e2e: what a server sends after its last token (usage, `[DONE]`) is not
        decoding, and `vllm bench serve` ends a request's decode at its last chunk with choices too."""
        if not self.ok or self.ttft is None or self.e2e is None or self.output_tokens < 2:
            return None
        return sum(self.gaps) / (self.output_tokens - 1)

    @property
    def decode_tps(self) -> float | None:
        tpot = self.tpot
        return 1.0 / tpot if tpot else None

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["gaps"] = [round(g, 6) for g in self.gaps]
        return data


def build_payload(api: str, model: str, prompt: str, max_tokens: int, vllm: bool) -> dict[str, object]:
    """The request body. Fields only vLLM accepts (ignore_eos, min_tokens) go to vLLM only:
    other servers reject unknown fields (transformers serve answers 422)."""
    payload: dict[str, object] = {"model": model, "max_tokens": max_tokens, "stream": True, "temperature": 0.0,
                               "stream_options": {"include_usage": True}}
    if api == "chat":
        payload["messages"] = [{"role": "user", "content": prompt}]
    else:
        payload["prompt"] = prompt
    if vllm:
        payload.update(ignore_eos=True, min_tokens=max_tokens)
    return payload


def _kind_of(api: str, choice: dict[str, Any]) -> str | None:
    """The kind of the first non-empty text field of one streamed choice (None: it carries no text)."""
    if api == "completions":
        return "text" if choice.get("text") else None
    delta = choice.get("delta")
    for key, kind in (("content", "content"), ("reasoning_content", "reasoning"), ("reasoning", "reasoning")):
        if isinstance(delta, dict) and delta.get(key):
            return kind
    return None


async def stream_one(base_url: str, api: str, payload: Mapping[str, object], timeout: float) -> Sample:
    """Send one streamed request and time it. Never raises for a server's failure: a failed
    request is a Sample with ok=False and the one-line reason.

    While the stream runs, the client only reads and stamps lines; the JSON is parsed after the
    stream ends, so parsing never delays the arrival time of the next token (or of another stream's).
    """
    sample = Sample(ok=False)
    events: list[tuple[float, bytes]] = []
    asked = payload.get("max_tokens")
    bound = limits(asked if isinstance(asked, int) and asked > 0 else 1, timeout)
    t0 = time.perf_counter()
    end = t0
    try:
        async for at, line in post_lines(base_url, PATHS[api], payload, timeout, prefix=b"data:", total=bound.seconds,
                                         max_bytes=bound.bytes, max_lines=bound.events,
                                         last=lambda line: line[5:].strip() == b"[DONE]"):
            end = at
            data = line[5:].strip()
            if data == b"[DONE]":
                sample.ended_by = "[DONE]"
                break
            events.append((at, data))
    except HttpError as exc:
        sample.error = str(exc)
        return sample
    sample.e2e = end - t0
    return _account(sample, api, events, t0, bound.tokens)


def _count(value: object) -> bool:
    """A token count a server can mean: a whole number, not a bool, from 0 to MAX_COUNT (a 400-digit one overflowed
    the rates' float division, a negative one made a negative rate)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def _possible(count: int, chunks: int, asked: int | None) -> bool:
    """Whether a stream of `chunks` chunks of text, asked for `asked` tokens, can have produced `count` tokens: at least
    one, and no more than asked (or than it streamed chunks, for a server that ignores max_tokens). A count below the
    chunks is believed: a stream that repeats its chunks carries more of them than tokens, and which lies is not known."""
    return 1 <= count <= max(asked if asked is not None else count, chunks)


def _account(sample: Sample, api: str, events: list[tuple[float, bytes]], t0: float, asked: int | None = None) -> Sample:
    """Fill a sample from the stamped events of its stream (`asked`: the output tokens asked for, None: not known)."""
    usage: dict[str, Any] | None = None
    last_text_at: float | None = None
    for at, data in events:
        try:
            event = json_answer(data)
        except NotJSON as exc:
            sample.error = f"the stream carried a line that {exc if isinstance(exc, NumberTooLong) else f'is not JSON: {data[:80]!r}'}"
            return sample
        if not isinstance(event, dict):
            continue
        if event.get("error"):
            err = event["error"]
            sample.error = "the server reported: " + str(err.get("message") if isinstance(err, dict) else err)[:300]
            return sample
        if isinstance(event.get("usage"), dict):
            usage = event["usage"]
        choices = event.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict):
                continue  # a shape no server sends: not a token
            kind = _kind_of(api, choice)
            if choice.get("finish_reason"):
                sample.finish_reason = choice["finish_reason"]
            if kind is None:
                continue
            if sample.ttft is None:
                sample.ttft, sample.first_kind = at - t0, kind
            elif last_text_at is not None:
                sample.gaps.append(at - last_text_at)
            last_text_at = at
            sample.chunks += 1
    usage = usage or {}
    count, prompt_tokens = usage.get("completion_tokens"), usage.get("prompt_tokens")
    if isinstance(count, int) and _count(count) and _possible(count, sample.chunks, asked):
        sample.output_tokens, sample.tokens_from = count, "usage"
        sample.prompt_tokens = prompt_tokens if _count(prompt_tokens) else None
    else:
        sample.output_tokens, sample.tokens_from = sample.chunks, "chunks"
    if sample.ttft is None:
        sample.error = "the stream ended without a single token"
        return sample
    if sample.ended_by != "[DONE]" and sample.finish_reason is None:
        sample.error = "the stream ended before the server said it was done (no finish_reason, no [DONE])"
        return sample
    sample.ok = True
    return sample
