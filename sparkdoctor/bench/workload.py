"""What a bench sends: the API, output length, prompt length, concurrency levels, rounds, warm-up.

Prompts are real public-domain prose shipped with sparkdoctor (texts/public_domain.txt), cut the same
way every time: request i of a run always gets the same prompt, so two runs differ only in the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sparkdoctor.errors import UsageError

_TEXTS = Path(__file__).resolve().parent / "texts" / "public_domain.txt"
INSTRUCTION = "Continue this text in the same style.\n\n"


MAX_TOKENS = 2**20  # output tokens per request: past any model's context
MAX_PROMPT_WORDS = 2**20
MAX_ROUNDS = 10_000
MAX_LEVELS = 64
MAX_CONCURRENCY = 4096  # past vLLM's largest --max-num-seqs default (1024)
MAX_WORDS_IN_FLIGHT = 2**24  # prompt words x the largest level: about 100 MB of prompts at once
MAX_REQUEST_TIMEOUT = 86_400.0


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class WorkloadError(UsageError, ValueError):
    """A workload field has a value the bench cannot use."""

    code = "workload"


@dataclass(frozen=True)
class Workload:
    api: str = "chat"  # chat | completions
    max_tokens: int = 64  # output tokens per request (exact on vLLM: ignore_eos + min_tokens)
    prompt_words: int = 100  # words of prose per prompt
    concurrency: tuple[int, ...] = (1, 4)
    rounds: int = 5  # per level: `rounds` times, `concurrency` requests sent together
    warmup: int = 2  # requests sent first and not counted (the first request pays for compiles)
    request_timeout: float = 60.0  # longest wait for any one read of a stream

    def __post_init__(self) -> None:
        if self.api not in ("chat", "completions"):
            raise WorkloadError(f"workload api {self.api!r}: choose chat or completions")
        # Upper bounds too: a cell or a published result given to --reproduce is someone else's file, and a
        # million-word prompt or a million requests at once would exhaust this machine, not measure it.
        for name, low, high in (("max_tokens", 1, MAX_TOKENS), ("prompt_words", 1, MAX_PROMPT_WORDS),
                                ("rounds", 1, MAX_ROUNDS), ("warmup", 0, MAX_ROUNDS)):
            value = getattr(self, name)
            if not _whole(value) or not low <= value <= high:
                raise WorkloadError(f"workload {name} {value!r}: give a whole number from {low} to {high:,}")
        if (not self.concurrency or len(self.concurrency) > MAX_LEVELS
                or any(not _whole(c) or not 1 <= c <= MAX_CONCURRENCY for c in self.concurrency)):
            raise WorkloadError(f"workload concurrency {list(self.concurrency)[:8]!r}: give 1 to {MAX_LEVELS} whole "
                                f"numbers from 1 to {MAX_CONCURRENCY:,}")
        if self.prompt_words * max(self.concurrency) > MAX_WORDS_IN_FLIGHT:
            raise WorkloadError(f"workload prompt_words {self.prompt_words:,} at concurrency {max(self.concurrency):,}: "
                                f"more than {MAX_WORDS_IN_FLIGHT:,} words of prompts at once")
        if (isinstance(self.request_timeout, bool) or not isinstance(self.request_timeout, (int, float))
                or not 0 < self.request_timeout <= MAX_REQUEST_TIMEOUT):
            raise WorkloadError(f"workload request_timeout {self.request_timeout!r}: give seconds above 0, at most "
                                f"{MAX_REQUEST_TIMEOUT:,}")

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["concurrency"] = list(self.concurrency)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object], **overrides: Any) -> Workload:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise WorkloadError(f"workload: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
        merged = {**data, **{k: v for k, v in overrides.items() if v is not None}}
        if "concurrency" in merged:
            conc = merged["concurrency"]
            merged["concurrency"] = tuple(conc) if isinstance(conc, (list, tuple)) else (conc,)
        return cls(**merged)


# A recipe's [workload] names (recipes/README.md) -> ours. prompt_tokens is taken as words of prose:
# the tokenizer is the server's, unknown here; the stored samples carry the real prompt_tokens.
RECIPE_ALIASES = {"repeats": "rounds", "prompt_tokens": "prompt_words"}


def from_recipe(table: Mapping[str, object], where: str, **overrides: Any) -> Workload:
    """A recipe's workload table (with the command line's options on top); errors name the recipe."""
    known = set(Workload.__dataclass_fields__) | set(RECIPE_ALIASES)  # a typo's error lists the recipe's names too
    unknown = sorted(set(table or {}) - known)
    if unknown:
        raise WorkloadError(f"{where}: workload: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
    data = {RECIPE_ALIASES.get(k, k): v for k, v in (table or {}).items()}
    try:
        return Workload.from_dict(data, **overrides)
    except (WorkloadError, TypeError) as exc:
        raise WorkloadError(f"{where}: {exc}") from None


@lru_cache(maxsize=1)
def passages() -> tuple[tuple[str, ...], ...]:
    text = _TEXTS.read_text(encoding="utf-8")
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return tuple(tuple(p.split()) for p in body.split("\n---\n") if p.strip())


def prompt(index: int, words: int) -> str:
    """The prompt of request `index`: `words` words of one passage, from an offset that moves with the
    index (so requests differ and no prefix cache serves two of them alike)."""
    texts = passages()
    source = texts[index % len(texts)]
    start = (index // len(texts)) * 7 % len(source)
    return INSTRUCTION + " ".join(source[(start + i) % len(source)] for i in range(words))
