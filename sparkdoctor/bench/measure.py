"""A whole measurement against one running server: warm-up, then each concurrency level for a number
of rounds, with the server's /metrics scraped before and after each level.

Per level it reports the client's figures (TTFT, TPOT, E2E, decode tok/s per stream, aggregate output
tok/s; medians with bootstrap 95% CIs) beside the server's own (vLLM /metrics). The headline is
single-stream decode tok/s (the number that decides a bandwidth-bound box like the GB10): taken from
the server's inter-token-latency histogram when the server has one, because a client can only time
chunks as they arrive and some servers (vLLM's CPU build) send them in bursts; from the client
otherwise. The client's burst share (gaps under 1 ms) is reported so the reader can see why.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.bench import prometheus
from sparkdoctor.bench.client import Sample, build_payload, stream_one
from sparkdoctor.bench.http import HttpError, run
from sparkdoctor.bench.server import ServerInfo, detect
from sparkdoctor.bench.stats import estimate
from sparkdoctor.bench.workload import Workload, prompt
from sparkdoctor.errors import BenchFailure

BURST_GAP_S = 0.001


class BenchError(BenchFailure, RuntimeError):
    """The measurement could not be completed (a request failed, the server went away)."""

    code = "bench"


@dataclass
class Round:
    concurrency: int
    wall: float  # first request sent -> last stream ended
    samples: list[Sample]

    @property
    def output_tps(self) -> float:
        return sum(s.output_tokens for s in self.samples) / self.wall if self.wall > 0 else 0.0


@dataclass
class Level:
    concurrency: int
    rounds: list[Round] = field(default_factory=list)
    server: dict[str, object] | None = None  # prometheus.window over the level's rounds

    @property
    def samples(self) -> list[Sample]:
        return [s for r in self.rounds for s in r.samples]

    def summary(self) -> dict[str, Any]:
        samples = self.samples
        gaps = [g for s in samples for g in s.gaps]

        def est(values: Iterable[float | None]) -> dict[str, float | int] | None:
            e = estimate([v for v in values if v is not None])
            return e.to_dict() if e else None

        decode = est(s.decode_tps for s in samples)
        client: dict[str, object] = {
            "ttft_s": est(s.ttft for s in samples),
            "tpot_s": est(s.tpot for s in samples),
            "e2e_s": est(s.e2e for s in samples),
            "decode_tps_per_stream": decode,
            "output_tps": est(r.output_tps for r in self.rounds),  # per-round rates (their spread, the CI)
            # the rate: every output token over all rounds' wall time (what `vllm bench serve` reports)
            "output_tps_pooled": (sum(s.output_tokens for s in samples) / sum(r.wall for r in self.rounds)
                                  if self.rounds and sum(r.wall for r in self.rounds) > 0 else None),
            "output_tokens": statistics.median(s.output_tokens for s in samples) if samples else None,
            "tokens_from": sorted({s.tokens_from for s in samples}),
            "burst_share": (sum(g < BURST_GAP_S for g in gaps) / len(gaps)) if gaps else None,
        }
        server_tps = (self.server or {}).get("decode_tps_per_stream")
        client_tps = (decode or {}).get("median")
        headline = ({"decode_tps_per_stream": server_tps, "source": "server /metrics (inter-token latency histogram)"}
                    if server_tps else {"decode_tps_per_stream": client_tps, "source": "client (stream arrival times)"})
        return {"concurrency": self.concurrency, "requests": len(samples), "rounds": len(self.rounds),
                "reconcile": reconcile(samples, self.server),
                "round_output_tps": [r.output_tps for r in self.rounds],
                "round_output_tokens": [sum(s.output_tokens for s in r.samples) for r in self.rounds],
                "round_wall_s": [r.wall for r in self.rounds], "client": client, "server": self.server,
                "headline": headline}


@dataclass
class Measurement:
    base_url: str
    model: str
    server: ServerInfo
    workload: Workload
    levels: list[Level] = field(default_factory=list)
    warmup: list[Sample] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        levels = [lvl.summary() for lvl in self.levels]
        first = next((lvl for lvl in levels if lvl["concurrency"] == 1), levels[0] if levels else None)
        return {"levels": levels, "headline": dict(first["headline"], concurrency=first["concurrency"]) if first else None,
                "seconds": self.seconds}


Progress = Callable[[str], None]


async def _run_level(m: Measurement, level: int, counter: list[int], progress: Progress | None) -> Level:
    w = m.workload
    lvl = Level(level)
    before = await prometheus.scrape(m.base_url) if m.server.metrics else None
    for r in range(w.rounds):
        if progress:
            progress(f"concurrency {level}, round {r + 1}/{w.rounds}")
        start = time.perf_counter()
        payloads = [build_payload(w.api, m.model, prompt(counter[0] + i, w.prompt_words), w.max_tokens, m.server.is_vllm)
                    for i in range(level)]
        counter[0] += level
        samples = await asyncio.gather(*(stream_one(m.base_url, w.api, p, w.request_timeout) for p in payloads))
        wall = time.perf_counter() - start
        failed = [s for s in samples if not s.ok]
        if failed:
            raise BenchError(f"a request at concurrency {level} failed: {failed[0].error}")
        lvl.rounds.append(Round(level, wall, list(samples)))
    after = await prometheus.scrape(m.base_url) if m.server.metrics else None
    lvl.server = prometheus.window(before, after)
    return lvl


async def measure(base_url: str, model: str, server: ServerInfo, workload: Workload,
                  progress: Progress | None = None) -> Measurement:
    """Warm up, then measure every concurrency level. Raises BenchError on the first failed request."""
    m = Measurement(base_url, model, server, workload)
    started = time.perf_counter()
    counter = [0]
    for i in range(workload.warmup):
        if progress:
            progress(f"warm-up {i + 1}/{workload.warmup}")
        payload = build_payload(workload.api, model, prompt(10_000 + i, workload.prompt_words), workload.max_tokens, server.is_vllm)
        sample = await stream_one(base_url, workload.api, payload, workload.request_timeout)
        if not sample.ok:
            raise BenchError(f"the warm-up request failed: {sample.error}")
        m.warmup.append(sample)
    for level in workload.concurrency:
        m.levels.append(await _run_level(m, level, counter, progress))
    m.seconds = time.perf_counter() - started
    return m


def reconcile(samples: list[Sample], server: Mapping[str, object] | None) -> dict[str, object] | None:
    """The run against the server's own counters for the same window: tokens the client counted vs the server's
    generation_tokens delta, and speculative decoding's acceptance over this window only. A mismatch is a finding
    on the run (another client was using the server, or the stream lost tokens)."""
    if not server or "generation_tokens" not in server:
        return None
    client = sum(s.output_tokens for s in samples)
    out: dict[str, object] = {"client_tokens": client, "server_tokens": server["generation_tokens"],
                           "match": client == server["generation_tokens"]}
    draft, accepted = server.get("spec_draft_tokens"), server.get("spec_accepted_tokens")
    if isinstance(draft, int) and draft:
        out["spec_acceptance"] = (accepted if isinstance(accepted, int) else 0) / draft
    if not out["match"]:
        out["why"] = (f"the client counted {client} output tokens, the server generated {server['generation_tokens']} "
                      "in the same window: another client used the server, or the stream lost tokens")
    return out


def measure_url(base_url: str, model: str | None, workload: Workload, progress: Callable[[str], None] | None = None
                ) -> tuple[ServerInfo, Measurement]:
    """Detect the server, pick the model (the only one served when none is named), measure."""

    async def go() -> tuple[ServerInfo, Measurement]:
        try:
            info = await detect(base_url)
        except HttpError as exc:
            raise BenchError(f"{base_url}: {exc}") from None
        name = model
        if name is None:
            if len(info.models) != 1:
                served = ", ".join(info.models) or "none"
                raise BenchError(f"{base_url} serves {len(info.models)} models ({served}): name one with --model")
            name = info.models[0]
        return info, await measure(base_url, name, info, workload, progress)

    return run(go())
