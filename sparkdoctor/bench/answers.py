"""A server's answer to one probe request (vLLM's completions API) read into an Answer, as someone else's: its
shapes checked, a ValueError naming what could not be read (bench/correctness.py makes it that probe's error)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

from sparkdoctor.bench.references import Answer

T = TypeVar("T")


def _ids(tokens: list[object]) -> list[int] | None:
    """vLLM's `return_tokens_as_token_ids` gives "token_id:123"; anything else: no ids."""
    if not all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        return None
    try:
        return [int(str(t).split(":", 1)[1]) for t in tokens]
    except ValueError:
        return None


def _margins(tokens: list[object], tops: list[object]) -> list[float] | None:
    """Each chosen token's log-probability minus the best other one's, from vLLM's `top_logprobs` (None: not given)."""
    if len(tops) != len(tokens):
        return None
    out = []
    for token, top in zip(tokens, tops, strict=True):
        if not isinstance(top, dict) or token not in top or len(top) < 2:
            return None
        try:
            chosen = float(top[token])
            other = max(float(v) for k, v in top.items() if k != token)
        except (TypeError, ValueError):
            return None
        if not (math.isfinite(chosen) and math.isfinite(other)):
            return None
        out.append(chosen - other)
    return out


def floats(values: list[object]) -> list[float]:
    """Log-probabilities as numbers, JSON null as NaN; a value that is no number raises (TypeError, ValueError)."""
    out = []
    for v in values:
        if v is not None and not isinstance(v, (int, float, str)):
            raise TypeError(f"a log-probability is a JSON {type(v).__name__}")
        out.append(float("nan") if v is None else float(v))
    return out


def _shaped(value: object, kind: type[T], what: str) -> T | None:
    """`value` when it is a `kind` or None (JSON null: absent); a ValueError naming `what` otherwise: a server's
    answer is read as someone else's (`{"choices": ["x"]}` crashed bench after its measurement)."""
    if value is not None and not isinstance(value, kind):
        raise ValueError(f"the answer could not be read: {what} is a JSON {type(value).__name__}, not "
                         f"{'an object' if kind is dict else 'a list' if kind is list else 'text'}")
    return value


def read(doc: Mapping[str, object], prompt: str, vllm: bool) -> Answer:
    """One probe's Answer from the server's answer, its shape checked; a ValueError when it cannot be read."""
    choices = _shaped(doc.get("choices"), list, "choices")
    if not choices:
        raise ValueError("the answer could not be read: no choices")
    choice = _shaped(choices[0], dict, "choices[0]")
    if choice is None:
        raise ValueError("the answer could not be read: choices[0] is null")
    text = _shaped(choice.get("text"), str, "choices[0].text") or ""
    lp = _shaped(choice.get("logprobs"), dict, "choices[0].logprobs") or {}
    usage = _shaped(doc.get("usage"), dict, "usage") or {}
    answer = Answer(prompt, text)
    generated = usage.get("completion_tokens")
    if vllm and text.startswith(prompt):  # echo was asked for: the answer is what follows the prompt, with usage or not
        answer.text = text[len(prompt):]
    elif vllm and generated == 0 and not isinstance(generated, bool):  # the server generated nothing: all it sent
        answer.text = ""  # back is the echo, not verbatim (a space more, other case or normal form): not an answer
    tokens = _shaped(lp.get("tokens"), list, "choices[0].logprobs.tokens")
    if not (vllm and tokens):
        return answer
    ids = _ids(tokens)
    values = floats(_shaped(lp.get("token_logprobs"), list, "choices[0].logprobs.token_logprobs") or [])
    if ids is None or not isinstance(generated, int) or isinstance(generated, bool):
        return answer
    if 0 < generated <= len(ids) == len(values):
        answer.prompt_ids, answer.ids = ids[:-generated], ids[-generated:]
        answer.logprobs = values[-generated:]
        tops = _shaped(lp.get("top_logprobs"), list, "choices[0].logprobs.top_logprobs") or []
        answer.margins = _margins(tokens[-generated:], tops[-generated:])
    return answer
