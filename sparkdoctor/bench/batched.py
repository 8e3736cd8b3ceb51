"""The correctness probes again at the run's top concurrency: a fault only larger batches show (a kernel wrong at
batch 4, a CUDA graph captured for one batch size) answered the four sequential probes (batch 1) right, and the gate
passed. Here the probes, and the scoring of the reference's tokens, are sent `batch` at once (the probe prompts in
turn), each answer judged as the sequential ones are (bench/correctness.py `step`); the worse verdict stands."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from functools import partial

from sparkdoctor.bench.correctness import (
    PROBES,
    Answer,
    answer_of,
    ask_payload,
    parse,
    probe_timeout,
    score_payload,
    scored_by,
    scores_of,
)
from sparkdoctor.bench.http import post_json, run

MAX_BATCH = 64  # requests in flight at once: a sweep's top level above it is probed at 64
MAX_WAVE_ANSWER_BYTES = 2**20  # each answer of a wave (a few KB on vLLM): 64 MiB held at most, not 64 x 16 MiB


def _settled(result: object) -> dict[str, object]:
    """One request's answer read (correctness.parse), or its failure raised: HttpError and ValueError are the
    request's (that probe's error); anything else is sparkdoctor's own and goes on up."""
    if isinstance(result, BaseException):
        raise result
    assert isinstance(result, tuple)
    return parse(*result)


def _wave(base_url: str, payloads: list[dict[str, object]]) -> list[Callable[[], dict[str, object]]]:
    """Every payload POSTed at once (each within probe_timeout() and MAX_WAVE_ANSWER_BYTES): what each answered, to be
    read."""
    timeout = probe_timeout()

    async def main() -> list[object]:
        calls: list[Coroutine[object, object, tuple[int, bytes]]] = [
            post_json(base_url, "/v1/completions", p, timeout, MAX_WAVE_ANSWER_BYTES) for p in payloads]
        return list(await asyncio.gather(*calls, return_exceptions=True))

    return [partial(_settled, r) for r in run(main())]


def _scores(got: Callable[[], dict[str, object]], ref: Answer) -> list[float] | None:
    return scores_of(got(), ref.prompt_ids or [], ref.ids or [])


def probe(base_url: str, model: str, vllm: bool, reference: list[Answer] | None, batch: int) -> list[Answer]:
    """`batch` probe requests at once, then (on vLLM, with a reference) `batch` scoring requests at once."""
    prompts = [PROBES[i % len(PROBES)] for i in range(min(batch, MAX_BATCH))]
    got = _wave(base_url, [ask_payload(model, p, vllm) for p in prompts])
    answers = [answer_of(p, vllm, g) for p, g in zip(prompts, got, strict=True)]
    if any(a.error for a in answers) or not (vllm and reference):
        return answers
    by_prompt = {r.prompt: r for r in reference}
    refs = [(i, ref) for i, p in enumerate(prompts) if (ref := by_prompt.get(p)) and ref.prompt_ids is not None and ref.ids]
    scored = _wave(base_url, [score_payload(model, ref.prompt_ids or [], ref.ids or []) for _, ref in refs])
    for (i, ref), g in zip(refs, scored, strict=True):
        answers[i] = scored_by(answers[i], partial(_scores, g, ref))
    return answers
