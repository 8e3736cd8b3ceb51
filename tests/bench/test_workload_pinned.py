"""What a rerun of a stored run needs and does not find in its cell: the prompts. A run records its workload (api,
lengths, concurrency, rounds, warm-up) and its bench version, not the prompts it sent: they are cut from the prose
shipped in sparkdoctor/bench/texts/ by workload.prompt, and the correctness probes are the constants of
bench/correctness.py. Two cells of one bench version with the same config hash must have sent the same prompts, so
these are pinned here: changing the texts, the cut or the probes fails this test until BENCH_VERSION is raised
(which keeps `history --compare` and `--reproduce` from setting the old numbers beside the new ones as alike)."""

from __future__ import annotations

import hashlib
import json

from sparkdoctor.bench import BENCH_VERSION
from sparkdoctor.bench import correctness as c
from sparkdoctor.bench.workload import prompt

PINNED = {1: ("f696689ce8fcfc8f", "5381a9032d1de7c9")}  # bench version: (timed prompts, correctness probes)


def _prompts_digest() -> str:
    h = hashlib.sha256()
    for words in (1, 100, 1000):
        for index in [*range(64), 10_000, 10_001]:  # the timed requests' indices, and the warm-up's (measure.py)
            h.update(prompt(index, words).encode() + b"\0")
    return h.hexdigest()[:16]


def test_the_prompts_a_bench_version_sends_are_pinned():
    probes = hashlib.sha256(json.dumps([c.PROBES, c.MAX_TOKENS, c.SEED]).encode()).hexdigest()[:16]
    assert BENCH_VERSION in PINNED, f"bench version {BENCH_VERSION}: pin its prompts here"
    assert (_prompts_digest(), probes) == PINNED[BENCH_VERSION], (
        "the prompts or probes changed: raise BENCH_VERSION (sparkdoctor/bench/__init__.py) and pin the new digests")
