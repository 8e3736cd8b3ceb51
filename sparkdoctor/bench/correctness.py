"""Fast and wrong never wins: deterministic probe requests beside every bench run, compared with a reference.

Each run sends, outside its timed window, a small fixed set of greedy requests (temperature 0, fixed seed) and
keeps what came back: the text, the token ids and their log-probabilities where the server gives them (vLLM's
completions API: `logprobs`, `echo`, `return_tokens_as_token_ids`). A reference per model identity is the first
run the user marks as good (`--reference`), or a file shipped with a recipe.

A later run is compared with the reference in two ways:
- **scored**: the reference's own tokens are sent back as the prompt (`echo`, one new token) and the server's
  log-probability of each of them is compared with the reference's. This is teacher forcing: it measures how
  differently the model under test judges the same text, and it does not cascade the way free-running greedy
  text does (one near-tie flipped by rounding changes every later token; the scores barely move).
- **greedy**: the matching prefix of the run's own greedy tokens (shown, not gated on: see above).
Plain garbage detectors gate too: an empty answer, one token repeated, text that is not text, NaN/inf.

The tolerance (`TOLERANCE`) is the largest mean absolute log-probability difference per token a correct
configuration may show; it is measured, not guessed: docs/evidence/correctness.md.

A verdict knows its power. The scores can only tell a run from its reference where the reference's own greedy
tokens won clearly: a run that ranks the runner-up first moves that token's score by about its margin. A model whose
next-token distributions are near-uniform (a tiny random one scores every token at about -6.5) wins each token by a
hair, so a damaged copy that picks other tokens from the second one on still scores the reference's tokens within
tolerance. The reference keeps each greedy token's margin over the runner-up (vLLM's `logprobs=2`); a prompt whose
mean margin is at or below the tolerance cannot be judged (`decisive: false` in its row), and a run whose scored
prompts are all such is `indecisive`, never `correct`. A difference the scores do see is `wrong` all the same.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypedDict

from sparkdoctor.bench import references
from sparkdoctor.bench.answers import floats, read
from sparkdoctor.bench.http import HttpError, post_json, run
from sparkdoctor.bench.references import Answer
from sparkdoctor.errors import seconds_from_env
from sparkdoctor.inputs import NotJSON, json_answer

__all__ = ["Answer"]  # the stored unit of an answer lives with the storage (bench/references.py); judged here

PROBES = (
    "The capital of France is",
    "1, 2, 3, 4, 5,",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea,",
)
MAX_TOKENS = 16
SEED = 1234
TIMEOUT = 60.0  # the whole of one probe request (bench/http.py: connect, answer, body), never followed to a redirect
MAX_ANSWER_BYTES = 16 * 2**20  # one probe's answer: 16 tokens with log-probabilities, echo included, is a few KB
TOLERANCE = 0.25  # mean |Δ logprob| per reference token (nats); docs/evidence/correctness.md
REPEAT_SHARE = 0.9  # a single token this share of an answer of >= 8 tokens is garbage
NON_TEXT_SHARE = 0.2


class Verdict:
    REFERENCE = "reference"   # this run is the reference
    CORRECT = "correct"       # within tolerance of the reference, no garbage
    WRONG = "wrong"           # outside tolerance, or garbage the reference does not show: whatever its speed
    SUSPECT = "suspect"       # garbage, but no reference to judge it by (an A/B weighs it against the other arm)
    UNCHECKED = "unchecked"   # no reference for this model yet, or the probe requests could not run
    UNSCORED = "unscored"     # the server gives no log-probabilities: only the garbage detectors ran
    INDECISIVE = "indecisive"  # within tolerance, but the reference's tokens win by less than the tolerance can see


class PromptRow(TypedDict):
    """One probe prompt judged against the reference."""

    prompt: str
    greedy_prefix: int | None  # how many of the reference's greedy tokens the run repeated
    tokens: int | None  # the reference's greedy tokens
    mean_abs_dlogprob: float | None  # None: not scored
    margin: float | None  # prompt_margin of the reference
    decisive: bool | None


@dataclass
class Judgement:
    verdict: str
    why: list[str] = field(default_factory=list)
    per_prompt: list[PromptRow] = field(default_factory=list)
    tolerance: float = TOLERANCE
    reference: str | None = None  # the reference's identity / run id, in words


# ---- talking to the server ----------------------------------------------------------------------------------
def _post(base_url: str, payload: Mapping[str, object], timeout: float) -> dict[str, Any]:
    """POST to /v1/completions and read the whole answer within `timeout` and MAX_ANSWER_BYTES; HttpError past
    either, on a redirect or an error status."""
    return parse(*run(post_json(base_url, "/v1/completions", payload, timeout, MAX_ANSWER_BYTES)))


def parse(status: int, body: bytes) -> dict[str, object]:
    """A completion's answer as a JSON object; HttpError on an error status, ValueError on anything else."""
    if status != 200:
        raise HttpError(f"POST /v1/completions answered HTTP {status}: {body[:300].decode('utf-8', 'replace').strip()}")
    try:
        doc = json_answer(body.decode("utf-8", "replace"))
    except NotJSON as exc:
        raise ValueError(f"the answer {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("the answer is not a JSON object")
    return doc


def prompt_margin(reference: Answer | None) -> float | None:
    """The mean margin of a reference answer's greedy tokens over their runner-ups (None: not known)."""
    margins = (reference.margins or []) if reference else []
    return sum(margins) / len(margins) if margins else None


def undecisive(reference: list[Answer], tolerance: float = TOLERANCE) -> list[str]:
    """The reference's prompts whose tokens win by no more than the tolerance can see."""
    return [r.prompt for r in reference if (m := prompt_margin(r)) is not None and m <= tolerance]


def ask_payload(model: str, prompt: str, vllm: bool) -> dict[str, object]:
    """The request of one probe: greedy, with ids and log-probabilities where the server is vLLM."""
    payload: dict[str, object] = {"model": model, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
                                  "seed": SEED, "stream": False}
    if vllm:
        payload.update(logprobs=2, echo=True, return_tokens_as_token_ids=True, ignore_eos=False)
    return payload


def probe_timeout() -> float:
    """Seconds one probe request may take: TIMEOUT, or $SPARKDOCTOR_CORRECTNESS_TIMEOUT (a box so loaded, or a model so
    large, that a short answer takes longer); a bad value is one line naming it (bench checks it before a launch)."""
    return seconds_from_env("SPARKDOCTOR_CORRECTNESS_TIMEOUT", TIMEOUT)


def ask(base_url: str, model: str, prompt: str, vllm: bool, timeout: float | None = None) -> Answer:
    """The greedy answer to one probe (with ids and log-probabilities where the server is vLLM)."""
    return answer_of(prompt, vllm, lambda: _post(base_url, ask_payload(model, prompt, vllm), timeout or probe_timeout()))


def answer_of(prompt: str, vllm: bool, got: Callable[[], Mapping[str, object]]) -> Answer:
    """The Answer read from what `got` returns, or the request's failure as its error."""
    try:
        return read(got(), prompt, vllm)
    except HttpError as exc:
        return Answer(prompt, error=str(exc)[:300])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return Answer(prompt, error=f"{type(exc).__name__}: {str(exc)[:200]}")


def score(base_url: str, model: str, prompt_ids: list[int], ids: list[int], timeout: float | None = None) -> list[float] | None:
    """Teacher forcing: the server's log-probability of each of `ids` after `prompt_ids`. None: the server answers
    without log-probabilities (it offers none). A request that fails raises HttpError, an answer that cannot be read
    ValueError: neither says the server offers none (both read `unscored`, "no log-probabilities", before)."""
    return scores_of(_post(base_url, score_payload(model, prompt_ids, ids), timeout or probe_timeout()), prompt_ids, ids)


def score_payload(model: str, prompt_ids: list[int], ids: list[int]) -> dict[str, object]:
    return {"model": model, "prompt": prompt_ids + ids, "max_tokens": 1, "temperature": 0, "seed": SEED,
            "logprobs": 1, "echo": True, "return_tokens_as_token_ids": True, "stream": False}


def scores_of(doc: Mapping[str, object], prompt_ids: list[int], ids: list[int]) -> list[float] | None:
    """The log-probabilities of `ids` in a scoring answer (see score)."""
    try:
        choices = doc.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            raise ValueError("no choices[0] object")
        logprobs = choice.get("logprobs")
        if logprobs is None:
            return None
        values = floats(logprobs["token_logprobs"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ValueError(f"the answer could not be read: {type(exc).__name__}: {str(exc)[:200]}") from None
    want = len(prompt_ids) + len(ids)
    if len(values) < want:
        raise ValueError(f"the answer could not be read: {len(values)} log-probabilities for {want} tokens")
    return values[len(prompt_ids):want]


def scored_by(answer: Answer, scores: Callable[[], list[float] | None]) -> Answer:
    """`answer` with the server's scores of the reference's tokens (`scores()`), or the reason scoring them failed."""
    try:
        return replace(answer, scored=scores())
    except (HttpError, ValueError) as exc:
        return replace(answer, scoring_error=f"scoring the reference's tokens: {str(exc)[:300]}")


def probe(base_url: str, model: str, vllm: bool, reference: list[Answer] | None) -> list[Answer]:
    """Every probe request, plus (on vLLM, with a reference) the scoring of the reference's tokens. After a failed
    request the others are not sent (the run is unchecked all the same, and a server that hangs costs one TIMEOUT)."""
    answers: list[Answer] = []
    for prompt in PROBES:
        if answers and answers[-1].error:
            answers.append(Answer(prompt, error="not sent: an earlier probe request failed"))
        else:
            answers.append(ask(base_url, model, prompt, vllm))
    if any(a.error for a in answers):
        return answers
    if vllm and reference:  # after a failed scoring request the others are not sent either
        by_prompt = {r.prompt: r for r in reference}
        for i, answer in enumerate(answers):
            ref = by_prompt.get(answer.prompt)
            if any(a.scoring_error for a in answers[:i]):
                answers[i] = replace(answer, scoring_error="not scored: an earlier scoring request failed")
            elif ref and ref.prompt_ids is not None and ref.ids:
                answers[i] = scored_by(answer, partial(score, base_url, model, ref.prompt_ids, ref.ids))
    return answers


# ---- judging ------------------------------------------------------------------------------------------------
def garbage(answer: Answer) -> str | None:
    """Why an answer is plainly not a model's output, or None."""
    if answer.error:
        return f"the request failed: {answer.error}"
    if not answer.text.strip():
        return "empty answer"
    if answer.logprobs and any(not math.isfinite(v) for v in answer.logprobs):
        return "NaN or infinite log-probabilities"
    if answer.ids and len(answer.ids) >= 8:
        top = max(answer.ids.count(i) for i in set(answer.ids))
        if top / len(answer.ids) >= REPEAT_SHARE:
            return f"one token repeated ({top} of {len(answer.ids)})"
    odd = sum(1 for ch in answer.text if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\n\t\r"))
    if answer.text and odd / len(answer.text) > NON_TEXT_SHARE:
        return f"not text ({odd} of {len(answer.text)} characters are control or replacement characters)"
    return None


def _prefix(a: list[int] | None, b: list[int] | None) -> int | None:
    if a is None or b is None:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def judge(answers: list[Answer], reference: list[Answer] | None, tolerance: float = TOLERANCE) -> Judgement:
    """The run's verdict against its reference (see the module's docstring)."""
    by_prompt = {r.prompt: r for r in reference or []}

    def excused(answer: Answer) -> bool:
        """The reference (a run the user marked good) trips the same detector on this prompt: a tiny or odd model
        may repeat a token; what counts then is whether the run judges the reference's tokens alike."""
        ref = by_prompt.get(answer.prompt)
        return answer.error is None and ref is not None and ref.error is None and garbage(ref) is not None

    failed = [f"{a.prompt!r}: the probe request failed: {a.error}" for a in answers if a.error]
    if failed:  # a server that does not answer the probes is not judged: nothing says its answers are wrong
        return Judgement(Verdict.UNCHECKED, failed)
    why = [f"{a.prompt!r}: {g}" for a in answers if (g := garbage(a)) and not excused(a)]
    if reference is None:
        if why:
            return Judgement(Verdict.SUSPECT, [*why, "no reference to judge by: mark a known-good run with --reference"])
        return Judgement(Verdict.UNCHECKED, ["no reference for this model yet (mark a known-good run with --reference)"])
    rows, scored_any = [], False
    for answer in answers:
        ref = by_prompt.get(answer.prompt)
        margin = prompt_margin(ref)
        row: PromptRow = {"prompt": answer.prompt, "greedy_prefix": _prefix(answer.ids, ref.ids if ref else None),
                               "tokens": len(ref.ids) if ref and ref.ids else None, "mean_abs_dlogprob": None,
                               "margin": margin, "decisive": None if margin is None else margin > tolerance}
        if ref and ref.logprobs and answer.scored and len(answer.scored) == len(ref.logprobs):
            pairs = [(x, y) for x, y in zip(answer.scored, ref.logprobs, strict=True) if math.isfinite(y)]
            if pairs:
                scored_any = True
                bad = [x for x, _ in pairs if not math.isfinite(x)]
                dist = math.inf if bad else sum(abs(x - y) for x, y in pairs) / len(pairs)
                row["mean_abs_dlogprob"] = dist if math.isfinite(dist) else None
                if dist > tolerance:
                    why.append(f"{answer.prompt!r}: the reference's tokens score {dist:.3f} nats/token away "
                               f"(tolerance {tolerance})" if math.isfinite(dist) else f"{answer.prompt!r}: NaN/inf scores")
        rows.append(row)
    unscored = [f"{a.prompt!r}: {a.scoring_error}" for a in answers if a.scoring_error]
    if why:  # what the scores did see stands, whatever failed after it
        return Judgement(Verdict.WRONG, why + unscored, rows, tolerance)
    if unscored:  # a server that does not answer the scoring is not judged, as one that does not answer the probes
        return Judgement(Verdict.UNCHECKED, unscored, rows, tolerance)
    if not scored_any:
        return Judgement(Verdict.UNSCORED, ["the server gives no log-probabilities: only the garbage detectors ran"],
                         rows, tolerance)
    judged = [r for r in rows if r["mean_abs_dlogprob"] is not None]
    if judged and all(r["decisive"] is False for r in judged):
        worst = max(r["margin"] or 0.0 for r in judged)  # not decisive: a margin is known
        return Judgement(Verdict.INDECISIVE, [
            f"the answers cannot be judged with this model: the reference's tokens beat their runner-ups by a mean "
            f"{worst:.3f} nats or less per prompt, within the tolerance ({tolerance}), so other answers would score "
            f"alike; use a model whose answers are decisive (a trained one) to judge correctness"], rows, tolerance)
    return Judgement(Verdict.CORRECT, [], rows, tolerance)


# ---- one run's step -----------------------------------------------------------------------------------------
@dataclass
class Options:
    """What the user asked of the correctness gate for a bench run."""

    enabled: bool = True
    mark_reference: bool = False       # --reference: this run becomes the reference for its model
    reference_file: str | None = None  # --reference-file: compare with (or, with --reference, write) this file
    reference: list[Answer] | None = None  # --reference-file's answers, read once and checked before the run
    against: list[Answer] | None = None  # an A/B's B run: arm A's answers, scored here when there is no reference


def step(base_url: str, model: str, vllm: bool, toolchain_facts: Mapping[str, object], options: Options,
         at_once: Callable[[list[Answer] | None], list[Answer]] | None = None) -> dict[str, object]:
    """Probe a served model after its timed window and judge it against its reference: the run's `correctness`.
    `at_once(reference)`: the probes sent as many at once as the run's top concurrency (bench/batched.py)."""

    started = time.monotonic()
    key = references.key_of(toolchain_facts, model)
    path = Path(options.reference_file) if options.reference_file else references.folder() / f"{key}.json"
    reference, problem = (None, None) if options.mark_reference else (options.reference, None) \
        if options.reference is not None else references.load(path, PROBES)
    answers = probe(base_url, model, vllm, reference)
    wave = at_once(reference) if at_once is not None and not any(a.error for a in answers) else None
    together, batch = (None, 1) if wave is None else (judge(wave, reference), len(wave))
    if options.mark_reference:
        verdict = Judgement(Verdict.REFERENCE, [f"stored as the reference for {model}"])
        tripped = [f"{a.prompt!r}: {g}" for a in answers if (g := garbage(a))]
        if any(a.error for a in answers):
            verdict = Judgement(Verdict.UNCHECKED, tripped + ["a probe request failed: not stored as a reference"])
        elif any(not math.isfinite(v) for a in answers for v in (a.logprobs or []) + (a.margins or [])):
            verdict = Judgement(Verdict.UNCHECKED, tripped + ["NaN or infinite log-probabilities: not stored as a "
                                                              "reference"])
        elif odd := [f"{a.prompt!r}: {g}" for a in wave or [] if (g := garbage(a)) and
                     not garbage(next(b for b in answers if b.prompt == a.prompt))]:
            verdict = Judgement(Verdict.UNCHECKED, tripped + [f"at concurrency {batch} (the probes sent at once): "
                                                              f"{w}" for w in odd] + ["not stored as a reference"])
        elif why := references.save(path, answers, {"model": model, "key": key, "taken_at": time.time()}):
            verdict = Judgement(Verdict.UNCHECKED, tripped + [f"not stored as a reference: {path}: {why}"])
        else:
            verdict.why += [f"note: the reference itself trips {t}" for t in tripped]
            weak = undecisive(answers)
            if weak and len(weak) == len(answers):
                verdict.why.append(f"note: this model's answers are not decisive (on every prompt its tokens beat their "
                                   f"runner-ups by no more than the tolerance {TOLERANCE}): later runs against this "
                                   f"reference will be 'indecisive', never 'correct'")
            elif weak:
                verdict.why.append(f"note: {len(weak)} of {len(answers)} prompts are not decisive with this model "
                                   f"({', '.join(repr(w) for w in weak)}): only the others can tell a wrong run")
    else:
        verdict = judge(answers, reference)
        if together is not None and worst([verdict.verdict, together.verdict]) != verdict.verdict:  # the worse stands
            verdict = replace(verdict, verdict=together.verdict, why=verdict.why + [
                f"at concurrency {batch} (the probes sent at once): {w}" for w in together.why])
        if problem:
            verdict.why.append(problem)
    verdict.reference = str(path)
    other = against(base_url, model, answers, options.against) if reference is None and options.against else {}
    # a reference named, found for this model (even one that cannot judge) or being marked: answers not judged
    # against it fail closed (exit 3, commands/bench.py); only "no reference for this model yet" passes unjudged
    expected = options.mark_reference or reference is not None or problem is not None
    at_batch = None if together is None else {"concurrency": batch, "verdict": together.verdict, "why": together.why,
                                              "per_prompt": together.per_prompt}
    return {**asdict(verdict), **other, "key": key, "reference_expected": expected, "batched": at_batch,
            "seconds": round(time.monotonic() - started, 3), "answers": [_json_safe(a) for a in answers]}


SAME, DIFFER = "same", "differ"  # B's answers against A's: within the tolerance of A's, or not
_AS_OTHER_ARM = {Verdict.CORRECT: SAME, Verdict.WRONG: DIFFER}


def against(base_url: str, model: str, answers: list[Answer], theirs: list[Answer]) -> dict[str, object]:
    """An A/B without a reference: how far this arm's answers are from the other arm's, scored as a reference is
    (its greedy tokens teacher-forced here, within TOLERANCE), so an A/B that changes the answers is seen. Which arm
    is right is not known: `same` or `differ`, never `wrong`. A prompt the arms tokenize differently (other
    tokenizers) is not compared. {"against_a": judgement} (bench/ab.py sums it up over B's runs)."""
    if any(a.error for a in answers):  # unchecked: this arm's probe requests failed, nothing to score on it
        return {"against_a": asdict(judge(answers, theirs)) | {"reference": "arm A's answers"}}
    mine = {a.prompt: a for a in answers}
    scored, skipped = [], []
    for ref in theirs:
        answer = mine.get(ref.prompt)
        if answer is None or ref.error or not ref.ids or ref.prompt_ids is None:
            continue
        if answer.prompt_ids is not None and answer.prompt_ids != ref.prompt_ids:
            skipped.append(ref.prompt)
            continue
        scored.append(scored_by(answer, partial(score, base_url, model, ref.prompt_ids, ref.ids)))
    if not scored:
        judged = Judgement(Verdict.UNSCORED, ["arm A's answers carry no token ids to score (not vLLM, or its probes "
                                              "failed), or the arms tokenize every prompt differently"])
    else:
        judged = judge(scored, [r for r in theirs if r.prompt in {a.prompt for a in scored}])
    judged.verdict = _AS_OTHER_ARM.get(judged.verdict, judged.verdict)
    judged.why = [w.replace("the reference's tokens", "arm A's tokens").replace("the reference", "arm A")
                  for w in judged.why] + [f"{p!r}: the arms tokenize it differently: not compared" for p in skipped]
    judged.reference = "arm A's answers (greedy, the same probes)"
    return {"against_a": asdict(judged)}


def _json_safe(answer: Answer) -> dict[str, object]:
    """An answer as the run stores and prints it: a server's NaN or infinite number is null (JSON has no NaN;
    `--format json` printed it), judged before this as garbage all the same."""
    return {k: [None if isinstance(x, float) and not math.isfinite(x) else x for x in v] if isinstance(v, list) else v
            for k, v in answer.__dict__.items()}


def worst(verdicts: list[str | None]) -> str | None:
    """An arm's verdict over its runs: wrong if any run was wrong."""
    order = [Verdict.WRONG, Verdict.SUSPECT, Verdict.UNCHECKED, Verdict.UNSCORED, Verdict.INDECISIVE, Verdict.CORRECT,
             Verdict.REFERENCE]
    present = [v for v in verdicts if v]
    return next((v for v in order if v in present), None)
