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
        for name in ("max_tokens", "prompt_words", "rounds"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise WorkloadError(f"workload {name} {getattr(self, name)!r}: give a whole number >= 1")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise WorkloadError(f"workload warmup {self.warmup!r}: give a whole number >= 0")
        if not self.concurrency or any(not isinstance(c, int) or c < 1 for c in self.concurrency):
            raise WorkloadError(f"workload concurrency {list(self.concurrency)!r}: give whole numbers >= 1")
        if not self.request_timeout > 0:
            raise WorkloadError(f"workload request_timeout {self.request_timeout!r}: give seconds above 0")

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["concurrency"] = list(self.concurrency)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object], **overrides: Any) -> Workload:
        known = {f for f in cls.__dataclass_fields__}
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
    picked = [source[(start + i) % len(source)] for i in range(words)]
    return INSTRUCTION + " ".join(picked)
