"""Benchmark an OpenAI-compatible server honestly: stream, time, repeat, compare.

Modules, one job each: http (the wire), client (one timed streamed request), server (what is
behind the URL), prometheus (the server's own figures), workload (what is sent), measure (a whole
measurement: warm-up, concurrency levels, rounds), stats (medians, CIs, the A/B verdict), ab (the
interleaved comparison). The ledger (sparkdoctor/ledger/) stores the result; sparkdoctor/views/ draws it.
"""

# The measurement method's version: stored with every run; runs of different versions are not
# compared (a change in how a number is taken is a change in the number). Bump it when the
# client, the workload's prompts or the statistics change what a figure means.
BENCH_VERSION = 1
RESULT_SCHEMA = 1  # the shape of every bench/history answer (envelope)


def envelope(kind: str, data: dict[str, object]) -> dict[str, object]:
    """The one JSON shape every bench/history answer has: {"schema", "bench_version", "kind", ...}."""
    return {"schema": RESULT_SCHEMA, "bench_version": BENCH_VERSION, "kind": kind, **data}


def body(answer: dict[str, object]) -> dict[str, object]:
    """An answer without its envelope's keys: what the ledger stores of it, or another answer nests."""
    return {k: v for k, v in answer.items() if k not in ("schema", "bench_version", "kind")}
