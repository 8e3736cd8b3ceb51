"""The server's own view of a measurement: vLLM's Prometheus /metrics read before and after.

On the CPU build of vLLM the stream reaches the client in bursts (30+ chunks in one millisecond), so
the client cannot time single tokens there; the server's histograms (time to first token, inter-token
latency) are taken where each token is produced and stay true. The difference of two scrapes covers
exactly the requests in between (the bench sends nothing else). A value that is not a finite number (`+Inf`, `NaN`:
valid exposition text) is not read, and a counter or histogram that went down between the scrapes (the server
restarted) says nothing of the window: neither is reported.
"""

from __future__ import annotations

import math
import re

from sparkdoctor.bench.http import HttpError, get

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

# name in the report -> histogram series (newest vLLM name first)
HISTOGRAMS = {
    "ttft_s": ("vllm:time_to_first_token_seconds",),
    "itl_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e_s": ("vllm:e2e_request_latency_seconds",),
}
COUNTERS = {"generation_tokens": "vllm:generation_tokens_total", "prompt_tokens": "vllm:prompt_tokens_total",
            "requests": "vllm:request_success_total",
            # speculative decoding, scoped to the window (a delta, never the server's lifetime totals)
            "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
            "spec_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total"}

Scrape = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse(text: str) -> Scrape:
    """Prometheus text exposition -> {series name: {sorted labels: value}}."""
    out: Scrape = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if not math.isfinite(value):  # +Inf or NaN: no count or duration a window can be taken from
            continue
        labels = tuple(sorted(_LABEL.findall(m.group(2) or "")))
        out.setdefault(m.group(1), {})[labels] = value
    return out


async def scrape(url: str, timeout: float = 5.0) -> Scrape | None:
    try:
        status, body = await get(url, "/metrics", timeout)
    except HttpError:
        return None
    return parse(body.decode("utf-8", "replace")) if status == 200 else None


def _total(scrape: Scrape, name: str) -> float:
    return sum(scrape.get(name, {}).values())


def _buckets(scrape: Scrape, name: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for labels, value in scrape.get(name + "_bucket", {}).items():
        le = dict(labels).get("le")
        if le is None:
            continue
        bound = float("inf") if le in ("+Inf", "inf") else float(le)
        out[bound] = out.get(bound, 0.0) + value
    return out


def _median_from_buckets(before: dict[float, float], after: dict[float, float]) -> float | None:
    delta = sorted((b, after.get(b, 0.0) - before.get(b, 0.0)) for b in after)
    if not delta or delta[-1][1] <= 0:
        return None
    half = delta[-1][1] / 2
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in delta:
        if count >= half:
            if bound == float("inf"):
                return prev_bound
            span = count - prev_count
            return prev_bound + (bound - prev_bound) * ((half - prev_count) / span if span else 1.0)
        prev_bound, prev_count = bound, count
    return None


def window(before: Scrape | None, after: Scrape | None) -> dict[str, object] | None:
    """The server's figures for the requests between two scrapes: mean and bucket-median of each
    histogram, counter deltas, and decode tok/s per stream from the mean inter-token latency."""
    if before is None or after is None:
        return None
    out: dict[str, object] = {}
    for key, names in HISTOGRAMS.items():
        name = next((n for n in names if n + "_count" in after), None)
        if name is None:
            continue
        count = _total(after, name + "_count") - _total(before, name + "_count")
        total = _total(after, name + "_sum") - _total(before, name + "_sum")
        if count <= 0 or total < 0:
            continue
        out[key] = {"mean": total / count, "median": _median_from_buckets(_buckets(before, name), _buckets(after, name)),
                    "count": int(count), "series": name}
    for key, name in COUNTERS.items():
        if name in after and (delta := _total(after, name) - _total(before, name)) >= 0:
            out[key] = int(delta)
    itl = out.get("itl_s")
    if isinstance(itl, dict) and itl["mean"] > 0:
        out["decode_tps_per_stream"] = 1.0 / itl["mean"]
    return out or None
