"""The correctness gate's rules, exactly (synthetic answers), and its requests against a real local HTTP server
that answers vLLM's completions API (logprobs, echo, token ids) from a tiny deterministic "model"."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sparkdoctor.bench import answers
from sparkdoctor.bench import correctness as c
from sparkdoctor.bench.correctness import Answer, Verdict


def answer(prompt: str = "p", ids: list[int] | None = None, lps: list[float] | None = None, text: str = "some words",
           scored: list[float] | None = None) -> Answer:
    ids = ids if ids is not None else [5, 6, 7, 8]
    return Answer(prompt, text, [1, 2], ids, lps if lps is not None else [-0.5] * len(ids), scored)


# ---- garbage ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, words", [
    (Answer("p", "", error="URLError: refused"), "request failed"),
    (Answer("p", "   "), "empty"),
    (answer(ids=[9] * 16, lps=[-0.1] * 16), "one token repeated (16 of 16)"),
    (answer(text="\x00\x01\x02\ufffd\ufffdab"), "not text"),
    (answer(lps=[-0.5, float("nan"), -0.5, -0.5]), "NaN"),
    (answer(lps=[-0.5, -math.inf, -0.5, -0.5]), "NaN or infinite"),
])
def test_garbage_is_named_and_without_a_reference_suspect(bad, words):
    assert words in (c.garbage(bad) or "")
    verdict = c.judge([bad], None)
    expected = Verdict.UNCHECKED if bad.error else Verdict.SUSPECT  # a failed request says nothing about answers
    assert verdict.verdict == expected and words in verdict.why[0]
    ref = [answer(bad.prompt)]
    assert c.judge([bad], ref).verdict == (Verdict.UNCHECKED if bad.error else Verdict.WRONG)


def test_plain_text_with_a_repeat_or_two_is_not_garbage():
    assert c.garbage(answer(ids=[1, 1, 1, 2, 3, 4, 5, 6, 7, 8], lps=[-1.0] * 10)) is None


# ---- judging against a reference --------------------------------------------------------------------------------
def test_no_reference_is_unchecked():
    assert c.judge([answer()], None).verdict == Verdict.UNCHECKED


def test_the_same_scores_are_correct_and_the_prefix_is_reported():
    ref = [answer(lps=[-0.5, -1.0, -0.2, -0.3])]
    run = [answer(ids=[5, 6, 9, 9], scored=[-0.52, -0.98, -0.2, -0.31])]
    verdict = c.judge(run, ref)
    assert verdict.verdict == Verdict.CORRECT
    assert verdict.per_prompt[0]["greedy_prefix"] == 2
    assert verdict.per_prompt[0]["mean_abs_dlogprob"] == pytest.approx(0.0125)


def test_scores_beyond_the_tolerance_are_wrong_whatever_the_text():
    ref = [answer(lps=[-0.5, -1.0, -0.2, -0.3])]
    run = [answer(scored=[-2.5, -3.0, -1.2, -0.3])]  # same greedy tokens, judged very differently
    verdict = c.judge(run, ref)
    assert verdict.verdict == Verdict.WRONG and "nats/token" in verdict.why[0]
    assert c.judge(run, ref, tolerance=2.0).verdict == Verdict.CORRECT


def test_without_log_probabilities_only_the_detectors_run():
    ref = [Answer("p", "some words")]
    assert c.judge([Answer("p", "other words")], ref).verdict == Verdict.UNSCORED


def test_an_answer_survives_the_ledger_round_trip():
    a = answer(scored=[-0.1, -0.2, -0.3, -0.4])
    assert Answer.from_dict(json.loads(json.dumps(a.__dict__))) == a


# ---- against a real HTTP server -------------------------------------------------------------------------------
def fake_model(ids: list[int], damage: float) -> list[float]:
    """A deterministic 'model': the log-probability of each token given the tokens before it."""
    return [-((i * 7 + t) % 5) / 10 - damage for i, t in enumerate(ids)]


def tokenize(prompt: str) -> list[int]:
    return [100 + (ord(ch) % 50) for ch in prompt][:8]


def _fails(state: dict) -> str | None:
    """How the fixture fails this scoring request (state["scoring"]: ok, 500, drop, short, none, or "after1": the
    first one answered, the others dropped)."""
    state["scored"] += 1
    how = state["scoring"]
    if how == "after1":
        how = "drop" if state["scored"] > 1 else "ok"
    return how if how in ("500", "drop") else None


@pytest.fixture
def server() -> Iterator[tuple[str, dict]]:
    state = {"damage": 0.0, "calls": [], "margin": None, "scoring": "ok", "scored": 0, "delay": 0.0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _fail(self, how: str) -> None:
            if how == "500":
                self.send_error(500, "scoring crashed")
            elif how == "drop":
                self.close_connection = True
                self.connection.shutdown(2)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["calls"].append(body)
            threading.Event().wait(state["delay"])  # a slow answer: what the probe's limit is for
            prompt = body["prompt"]
            if isinstance(prompt, list) and (how := _fails(state)):  # a scoring request: the reference's tokens
                return self._fail(how)
            prompt_ids = prompt if isinstance(prompt, list) else tokenize(prompt)
            new = [(sum(prompt_ids) + k) % 40 + 3 for k in range(body["max_tokens"])]
            all_ids = prompt_ids + new
            lps = fake_model(all_ids, state["damage"])
            lps[0] = None
            if isinstance(prompt, list) and state["scoring"] == "short":
                lps = lps[:3]
            logprobs = {"tokens": [f"token_id:{t}" for t in all_ids], "token_logprobs": lps}
            if state["margin"] is not None and body.get("logprobs", 0) >= 2:  # vLLM's top_logprobs: chosen + runner-up
                logprobs["top_logprobs"] = [None] + [{f"token_id:{t}": lp, f"token_id:{t + 1000}": lp - state["margin"]}
                                                     for t, lp in zip(all_ids[1:], lps[1:], strict=True)]
            doc = {"choices": [{"text": (prompt if body.get("echo") and isinstance(prompt, str) else "")
                                + " ".join(f"w{t}" for t in new),
                                "logprobs": None if isinstance(prompt, list) and state["scoring"] == "none" else logprobs}],
                   "usage": {"completion_tokens": len(new)}}
            data = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    finally:
        httpd.shutdown()


def test_probe_reads_ids_and_scores_the_reference(server):
    url, state = server
    reference = c.probe(url, "m", True, None)
    assert all(a.ids and len(a.ids) == c.MAX_TOKENS and a.prompt_ids for a in reference)
    assert all(call["temperature"] == 0 and call["seed"] == c.SEED for call in state["calls"])
    same = c.probe(url, "m", True, reference)
    assert c.judge(same, reference).verdict == Verdict.CORRECT
    # the scoring request sends the reference's own token ids back as the prompt
    scoring = [call for call in state["calls"] if isinstance(call["prompt"], list)]
    assert len(scoring) == len(c.PROBES) and all(call["max_tokens"] == 1 and call["echo"] for call in scoring)
    state["damage"] = 1.0
    assert c.judge(c.probe(url, "m", True, reference), reference).verdict == Verdict.WRONG


@pytest.mark.parametrize("margin, verdict", [(2.0, Verdict.CORRECT), (0.05, Verdict.INDECISIVE)])
def test_a_reference_whose_tokens_barely_win_cannot_call_a_run_correct(server, margin, verdict):
    """A near-uniform model (a tiny random one) ranks its runner-up a hair below its choice: a run whose scores
    stay within tolerance is then `indecisive`, never `correct`; a visible difference is still `wrong`."""
    url, state = server
    state["margin"] = margin
    reference = c.probe(url, "m", True, None)
    assert all(a.margins and len(a.margins) == c.MAX_TOKENS for a in reference)
    assert all(c.prompt_margin(a) == pytest.approx(margin) for a in reference)
    assert c.undecisive(reference) == ([] if margin > c.TOLERANCE else [a.prompt for a in reference])
    assert all(call["logprobs"] == 2 for call in state["calls"] if isinstance(call["prompt"], str))
    state["damage"] = 0.1  # within the tolerance: what a damaged copy of a flat model looks like
    judged = c.judge(c.probe(url, "m", True, reference), reference)
    assert judged.verdict == verdict
    assert ("cannot be judged with this model" in " ".join(judged.why)) == (verdict == Verdict.INDECISIVE)
    state["damage"] = 1.0
    assert c.judge(c.probe(url, "m", True, reference), reference).verdict == Verdict.WRONG


def test_a_reference_without_margins_is_judged_as_before():
    """References stored before margins were kept (or from a server that gives no top_logprobs) still judge."""
    ref = [answer(lps=[-0.5, -1.0, -0.2, -0.3])]
    assert ref[0].margins is None and c.prompt_margin(ref[0]) is None
    assert c.judge([answer(scored=[-0.5, -1.0, -0.2, -0.3])], ref).verdict == Verdict.CORRECT


def test_one_decisive_prompt_is_enough_to_judge_and_each_row_says_which_are():
    """A tiny test model's tokenizer may turn whole prompts into <unk> (every margin 0): those rows are not decisive,
    and the run is judged on the prompts that are."""
    decisive, flat = answer("a", lps=[-0.5] * 4), answer("b", lps=[-6.5] * 4)
    decisive.margins, flat.margins = [1.0, 0.8, 0.5, 0.9], [0.0, 0.01, 0.0, 0.02]
    run = [answer("a", scored=[-0.5] * 4), answer("b", scored=[-6.5] * 4)]
    judged = c.judge(run, [decisive, flat])
    assert judged.verdict == Verdict.CORRECT
    assert [r["decisive"] for r in judged.per_prompt] == [True, False]
    assert c.judge(run[1:], [flat]).verdict == Verdict.INDECISIVE
    assert c.judge([answer("b", scored=[-9.0] * 4)], [flat]).verdict == Verdict.WRONG  # a visible difference is wrong


def test_margins_come_only_from_a_whole_top_logprobs_list():
    assert answers._margins(["token_id:5", "token_id:6"], [{"token_id:5": -0.1, "token_id:7": -0.6},
                                                     {"token_id:6": -1.0, "token_id:8": -1.5}]) == pytest.approx([0.5, 0.5])
    assert answers._margins(["token_id:5"], [{"token_id:5": -0.1}]) is None           # no runner-up given
    assert answers._margins(["token_id:5"], [None]) is None
    assert answers._margins(["token_id:5", "token_id:6"], [{"token_id:5": -0.1, "x": -1}]) is None  # not one per token
    assert answers._margins(["token_id:5"], [{"token_id:5": "nan", "x": -1}]) is None


def test_a_server_that_cannot_be_reached_is_unchecked_not_a_crash():
    answers = c.probe("http://127.0.0.1:9", "m", True, None)
    assert all(a.error for a in answers)
    assert c.judge(answers, None).verdict == Verdict.UNCHECKED


@pytest.mark.parametrize("batch", [1, 4])
def test_a_probe_waits_as_long_as_the_correctness_timeout_says(server, monkeypatch, batch):
    """A probe answered after 1.5 s is lost at a limit of 0.3 s (unchecked, the request's timeout named) and judged at
    SPARKDOCTOR_CORRECTNESS_TIMEOUT=60: a loaded box or a big model's slow first answer need not leave a run unchecked."""
    from sparkdoctor.bench.batched import probe as probe_at_once

    url, state = server
    state["delay"] = 1.5
    ask = (lambda: c.probe(url, "m", False, None)) if batch == 1 else (lambda: probe_at_once(url, "m", False, None, batch))
    monkeypatch.setenv("SPARKDOCTOR_CORRECTNESS_TIMEOUT", "0.3")
    lost = ask()
    assert lost[0].error and c.judge(lost, None).verdict == Verdict.UNCHECKED, lost
    monkeypatch.setenv("SPARKDOCTOR_CORRECTNESS_TIMEOUT", "60")
    answered = ask()
    assert not any(a.error for a in answered) and all(a.text for a in answered), answered


def test_a_detector_the_reference_trips_too_is_excused():
    """A tiny model may repeat a token; the reference (marked good) does the same, so the scores decide."""
    looping = answer(ids=[9] * 16, lps=[-0.1] * 16)
    ref = [answer(ids=[9] * 16, lps=[-0.1] * 16)]
    run = [answer(ids=[9] * 16, lps=[-0.1] * 16, scored=[-0.1] * 16)]
    assert c.garbage(looping) and c.judge(run, ref).verdict == Verdict.CORRECT
    assert c.judge([answer(ids=[9] * 16, scored=[-3.0] * 16)], ref).verdict == Verdict.WRONG


# ---- an A/B never calls a wrong arm faster; rerun calls such a conclusion broken ------------------------------
def _level(verdict: str) -> dict:
    return {"concurrency": 1, "ratio": {"verdict": verdict, "ratio": 1.5, "ci_low": 1.3, "ci_high": 1.7}}


@pytest.mark.parametrize("faster_arm, verdict", [("B", "faster"), ("A", "slower")])
def test_a_faster_arm_that_is_wrong_is_not_called_faster(faster_arm, verdict):
    from sparkdoctor.bench import ab

    good, bad = [{"correctness": {"verdict": "correct"}}], [{"correctness": {"verdict": "wrong"}}]
    runs = {"A": bad if faster_arm == "A" else good, "B": bad if faster_arm == "B" else good}
    levels = [_level(verdict)]
    doc = ab.correctness_check(runs["A"], runs["B"], levels)
    assert levels[0]["ratio"]["verdict"] == ab.WRONG_ARM and doc["wrong"] == [faster_arm]
    slower_wrong = [_level(verdict)]
    other = {"A": good, "B": bad} if faster_arm == "A" else {"A": bad, "B": good}
    ab.correctness_check(other["A"], other["B"], slower_wrong)
    assert slower_wrong[0]["ratio"]["verdict"] == verdict  # the slower arm being wrong does not change who is faster


def test_rerun_calls_a_conclusion_whose_faster_arm_became_wrong_broken():
    from sparkdoctor.conclusions.outcome import compare_levels

    old = [_level("faster")]
    new = [_level("wrong arm")]
    assert compare_levels(old, new)["outcome"] == "broken"


def test_the_run_is_reconciled_with_the_servers_counters():
    from sparkdoctor.bench.client import Sample
    from sparkdoctor.bench.measure import reconcile

    samples = [Sample(ok=True, output_tokens=16), Sample(ok=True, output_tokens=16)]
    assert reconcile(samples, {"generation_tokens": 32})["match"] is True
    off = reconcile(samples, {"generation_tokens": 40, "spec_draft_tokens": 20, "spec_accepted_tokens": 15})
    assert off["match"] is False and "32" in off["why"] and "40" in off["why"]
    assert off["spec_acceptance"] == 0.75  # this window's delta, not the server's lifetime
    assert reconcile(samples, None) is None


def test_suspect_arms_weigh_against_each_other():
    """No reference: garbage in one arm only makes that arm wrong; the same garbage in both says nothing."""
    from sparkdoctor.bench import ab

    suspect, fine = [{"correctness": {"verdict": "suspect"}}], [{"correctness": {"verdict": "unchecked"}}]
    one = [_level("faster")]
    assert ab.correctness_check(fine, suspect, one)["wrong"] == ["B"] and one[0]["ratio"]["verdict"] == ab.WRONG_ARM
    both = [_level("faster")]
    assert ab.correctness_check(suspect, suspect, both)["wrong"] == [] and both[0]["ratio"]["verdict"] == "faster"


@pytest.mark.parametrize("field, value", [
    ("logprobs", ["x"] * 4), ("margins", ["x"] * 4), ("ids", "abcd"), ("prompt_ids", [1.5, 2]), ("ids", [True] * 4),
    ("prompt_ids", list(range(70_000))), ("text", 5), ("prompt", {"x": 1}),
])
def test_a_hostile_reference_file_is_one_reason_not_a_crash_or_a_verdict(tmp_path, field, value):
    """--reference-file is someone else's file: strings for log-probabilities or margins ended the run after its
    measurement in a TypeError, and ids given as a string were judged `correct`. A field of the wrong shape makes
    the file unreadable (one reason, the run unchecked), as a deep file does (it raised RecursionError)."""
    from sparkdoctor.bench import references

    good = {"prompt": "p", "text": "w1 w2", "prompt_ids": [1, 2], "ids": [3, 4, 5, 6], "logprobs": [-1.0, -2.0, -1.5, -1.0],
            "scored": None, "error": None, "margins": [0.5, 0.6, 0.7, 0.8]}
    path = tmp_path / "ref.json"
    path.write_text(json.dumps({"reference_version": 1, "answers": [{**good, field: value}]}))
    loaded, problem = references.load(path)
    assert loaded is None and problem and field in problem, problem
    path.write_text("[" * 100_000 + "]" * 100_000)
    loaded, problem = references.load(path)
    assert loaded is None and "unreadable reference (RecursionError)" in (problem or "")
    path.write_text(json.dumps({"reference_version": 1, "answers": [good]}))  # the right shape still loads
    assert references.load(path) == ([references.Answer.from_dict(good)], None)


@pytest.mark.parametrize("scoring, words", [
    ("500", "answered HTTP 500"),
    ("drop", "scoring the reference's tokens:"),
    ("short", "scoring the reference's tokens: the answer could not be read: 3 log-probabilities for"),
    ("after1", "'1, 2, 3, 4, 5,': scoring the reference's tokens:"),
])
def test_a_scoring_request_that_fails_leaves_the_run_unchecked_with_its_reason(server, scoring, words):
    """A server whose probe answers carry log-probabilities but whose scoring requests failed (an error status, a
    dropped connection, too few log-probabilities) was `unscored`, "the server gives no log-probabilities", whatever
    its answers; with one prompt scored before the others failed, `correct` on that prompt alone. A failed scoring
    request is that probe's failure, as a failed probe request is: `unchecked`, its reason named."""
    url, state = server
    reference = c.probe(url, "m", True, None)
    state["scoring"] = scoring
    got = c.judge(c.probe(url, "m", True, reference), reference)
    assert got.verdict == Verdict.UNCHECKED and words in " ".join(got.why), got
    scoring_calls = sum(isinstance(call["prompt"], list) for call in state["calls"])
    assert scoring_calls == (2 if scoring == "after1" else 1)  # after a failed scoring request no other is sent


def test_a_difference_the_scores_saw_stays_wrong_when_later_scoring_fails(server):
    url, state = server
    reference = c.probe(url, "m", True, None)
    state["damage"], state["scoring"] = 3.0, "after1"
    got = c.judge(c.probe(url, "m", True, reference), reference)
    assert got.verdict == Verdict.WRONG and "3.000 nats/token away" in got.why[0], got
    assert "not scored: an earlier scoring request failed" in got.why[-1]


def test_a_server_that_offers_no_log_probabilities_when_scoring_is_still_unscored(server):
    url, state = server
    reference = c.probe(url, "m", True, None)
    state["scoring"] = "none"
    got = c.judge(c.probe(url, "m", True, reference), reference)
    assert got.verdict == Verdict.UNSCORED, got


@pytest.mark.parametrize("scoring, shown", [("drop", None), ("ok", "largest mean |Δ logprob| 0.000")])
def test_the_answers_line_gives_a_largest_difference_only_when_a_prompt_was_scored(server, tmp_path, scoring, shown):
    """The console's answers line printed "largest mean |Δ logprob| 0.000" for a run none of whose prompts was scored:
    a difference of zero that was never measured."""
    import io

    from rich.console import Console

    from sparkdoctor.views.bench import _answers_line

    url, state = server
    ref = tmp_path / "ref.json"
    c.step(url, "m", True, {}, c.Options(mark_reference=True, reference_file=str(ref)))
    state["scoring"] = scoring
    checked = c.step(url, "m", True, {}, c.Options(reference_file=str(ref)))
    console = Console(file=io.StringIO(), width=200)
    _answers_line(console, checked)
    line = console.file.getvalue().splitlines()[0]
    assert (shown in line) if shown else ("largest" not in line and "unchecked" in line), line


def test_the_answers_line_names_no_reference_file_when_there_is_none(server, tmp_path):
    """With no reference for the model the line said "(reference PATH, ...)" and then "no reference to judge by":
    PATH did not exist. It says where --reference would store one instead."""
    import io

    from rich.console import Console

    from sparkdoctor.views.bench import _answers_line

    url, _ = server
    missing = tmp_path / "none.json"
    checked = c.step(url, "m", True, {}, c.Options(reference_file=str(missing)))
    assert checked["reference_expected"] is False and not missing.exists()
    console = Console(file=io.StringIO(), width=300)
    _answers_line(console, checked)
    line = console.file.getvalue().splitlines()[0]
    assert "(reference " not in line and f"no reference yet: --reference stores one at {missing}" in line, line
