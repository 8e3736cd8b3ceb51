"""bench's correctness gate against what it reads: a named reference file that is missing, damaged, empty or made
for other probes, and server answers of the wrong shape, without usage or with NaN. Each of these once turned the
gate off (exit 0, `unchecked`), lost the measured run (an internal error after the timed window), let an empty
answer through, or printed NaN under `--format json`."""

from __future__ import annotations

import io
import json
import math

import pytest

from sparkdoctor.bench import correctness as c
from sparkdoctor.bench import references
from sparkdoctor.exitcodes import EXIT_USAGE
from tests.bench.sse_server import Style, serve
from tests.inproc import invoke

QUICK = ["--rounds", "1", "--concurrency", "1", "--max-tokens", "4", "--warmup", "0"]
NOWHERE = "http://127.0.0.1:9"  # nothing listens: a usage error must come before any request


def _env(tmp_path) -> dict[str, str | None]:
    return {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}


def _good(prompt: str) -> dict[str, object]:
    return {"prompt": prompt, "text": " words", "prompt_ids": [1, 2], "ids": [3, 4], "logprobs": [-1.0, -2.0],
            "scored": None, "error": None, "margins": [1.0, 1.5]}


@pytest.mark.parametrize("content, words", [
    (None, "no such file (to make one, bench a known-good server with --reference"),
    ("[1, 2]", "unreadable reference (a JSON list, not an object)"),
    ('{"reference_version": 1, "answers": []}', "nothing to score for this probe set (it holds no answers)"),
    (json.dumps({"reference_version": 1, "answers": [_good(p + " ") for p in c.PROBES]}),
     f"no answer for {len(c.PROBES)} of its {len(c.PROBES)} prompts: made for other probes"),
    (json.dumps({"reference_version": 1, "answers": [_good(p) for p in c.PROBES[1:]]}),
     f"no answer for 1 of its {len(c.PROBES)} prompts"),
    (json.dumps({"reference_version": 1, "answers": [{**_good(p), "margins": [math.nan, 1.0]} for p in c.PROBES]}),
     "unreadable reference (answer value NaN is not a finite number)"),
    (json.dumps({"reference_version": 1, "answers": [{**_good(p), "logprobs": [-math.inf, 1.0]} for p in c.PROBES]}),
     "unreadable reference (answer value -Infinity is not a finite number)"),
])
def test_a_named_reference_that_cannot_judge_is_a_usage_error_before_anything_runs(tmp_path, content, words):
    """A missing, unreadable, empty or stale --reference-file turned the gate off: the run measured, `unchecked`,
    exit 0. Read (not written with --reference), the named file must hold an answer for every probe: exit 2,
    one line naming the file and what is wrong, before a server is reached (nothing listens at NOWHERE)."""
    path = tmp_path / "ref.json"
    if content is not None:
        path.write_text(content)
    code, _, err = invoke("bench", "--url", NOWHERE, *QUICK, "--no-store", "--reference-file", path,
                          env=_env(tmp_path))
    assert code == EXIT_USAGE and f"--reference-file {path}" in err and words in err and "\n" not in err, (code, err)


def test_a_named_reference_that_judges_and_one_to_write_still_pass(tmp_path):
    path = tmp_path / "ref.json"
    path.write_text(json.dumps({"reference_version": 1, "answers": [_good(p) for p in c.PROBES]}))
    answers, why = references.check_path(path, write=False, prompts=c.PROBES)
    assert why is None and [a.prompt for a in answers or []] == list(c.PROBES)
    assert references.check_path(tmp_path / "new.json", write=True, prompts=c.PROBES) == (None, None)  # --reference writes it


def test_a_stale_reference_at_the_default_place_is_unchecked_with_its_reason(tmp_path, monkeypatch):
    """The default place without a reference stays `unchecked` (docs/correctness.md); one made for other probes
    says why instead of reading as no reference at all."""
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    key = references.key_of({}, "tiny")
    references.save(references.folder() / f"{key}.json", [references.Answer("another probe", "w")], {})
    with serve(Style(answer="a plain answer")) as (url, _):
        checked = c.step(url, "tiny", False, {}, c.Options())
    assert checked["verdict"] == c.Verdict.UNCHECKED
    assert any("nothing to score for this probe set" in w for w in checked["why"]), checked["why"]  # type: ignore[union-attr]


HOSTILE = [
    ({"choices": ["x"]}, "choices[0] is a JSON str, not an object"),
    ({"choices": [{"text": 5}]}, "choices[0].text is a JSON int, not text"),
    ({"choices": [{"text": "ok fine", "logprobs": [1]}]}, "choices[0].logprobs is a JSON list, not an object"),
    ({"choices": [{"text": "ok", "logprobs": {"tokens": ["token_id:1", "token_id:2"], "token_logprobs": [None, -1]}}],
      "usage": [1]}, "usage is a JSON list, not an object"),
    ({"choices": {"0": {"text": "x"}}}, "choices is a JSON dict, not a list"),
    ({"choices": []}, "no choices"),
]


@pytest.mark.parametrize("doc, words", HOSTILE)
def test_an_answer_of_the_wrong_shape_is_that_probes_error(doc, words):
    """`{"choices": ["x"]}` and its kind raised AttributeError out of the gate after the timed window: exit 2, the
    measured run lost. A shape that is not the completions API's is that probe's error, its reason named."""
    with serve(Style(completion=doc)) as (url, _):
        answer = c.ask(url, "tiny", c.PROBES[0], True)
    assert answer.error == f"ValueError: the answer could not be read: {words}", answer


def test_a_hostile_answer_keeps_the_measured_run(tmp_path):
    ledger = tmp_path / "l.sqlite"
    with serve(Style(completion={"choices": ["x"]})) as (url, _):
        code, out, err = invoke("bench", "--url", url, *QUICK, "--ledger", ledger, "--format", "json",
                                env=_env(tmp_path))
    doc = json.loads(out)
    assert code == 0 and doc["run_id"] == 1, (code, err)
    assert doc["correctness"]["verdict"] == c.Verdict.UNCHECKED
    assert "the answer could not be read: choices[0] is a JSON str" in doc["correctness"]["why"][0]


def test_an_echoed_prompt_with_no_answer_is_empty_without_usage():
    """The echoed prompt was taken off only when `usage` came with the answer: without it, the prompt alone read
    as an answer and the empty-answer detector never fired."""
    prompt = c.PROBES[0]
    doc = {"choices": [{"text": prompt, "logprobs": {"tokens": ["token_id:1", "token_id:2"], "token_logprobs": [None, -1.0]}}]}
    with serve(Style(completion=doc)) as (url, _):
        answer = c.ask(url, "tiny", prompt, True)
    assert answer.text == "" and c.garbage(answer) == "empty answer"


def _nan_answer(prompt: str) -> str:
    return ('{"choices": [{"text": ' + json.dumps(prompt + " a b") + ', "logprobs": {"tokens": ["token_id:1", '
            '"token_id:2", "token_id:3"], "token_logprobs": [null, NaN, -Infinity]}}], "usage": {"completion_tokens": 2}}')


def test_a_servers_nan_is_garbage_and_never_printed(tmp_path):
    """A server's NaN log-probabilities reached `--format json` as NaN (not JSON). They are judged garbage as
    before, stored and printed as null, and never stored as a reference."""
    with serve(Style(completion=_nan_answer(c.PROBES[0]))) as (url, _):
        checked = c.step(url, "tiny", True, {}, c.Options(reference_file=str(tmp_path / "none.json")))
        marked = c.step(url, "tiny", True, {}, c.Options(mark_reference=True, reference_file=str(tmp_path / "r.json")))
    json.dumps(checked, allow_nan=False)  # ValueError on the code before
    assert checked["verdict"] == c.Verdict.SUSPECT and "NaN or infinite" in str(checked["why"])
    assert checked["answers"][0]["logprobs"] == [None, None]  # type: ignore[index]
    assert marked["verdict"] == c.Verdict.UNCHECKED and not (tmp_path / "r.json").exists()
    json.dumps(marked, allow_nan=False)


@pytest.mark.parametrize("echo", [" {p}", "{P}", "\uff2f{rest}", "{p} "])  # \uff2f: the fullwidth O (NFKC: O)
def test_an_echo_that_is_not_the_prompt_verbatim_does_not_hide_an_empty_answer(echo):
    """The echoed prompt was taken off only when the answer began with it verbatim: a server that echoed it with a
    space more, in other case or another normal form and generated nothing (`completion_tokens: 0`) had the echo
    read as its answer, and the empty-answer detector never fired. The server's own count of generated tokens says
    the answer is empty."""
    prompt = c.PROBES[3]
    assert prompt.startswith("O")
    text = echo.format(p=prompt, P=prompt.upper(), rest=prompt[1:])
    doc = {"choices": [{"text": text, "logprobs": {"tokens": ["token_id:1", "token_id:2"], "token_logprobs": [None, -1.0]}}],
           "usage": {"completion_tokens": 0}}
    with serve(Style(completion=doc)) as (url, _):
        answer = c.ask(url, "tiny", prompt, True)
    assert not answer.text.strip() and c.garbage(answer) == "empty answer", answer


@pytest.mark.parametrize("allow", [False, True])
def test_sarif_of_a_run_whose_answers_are_wrong_says_so(tmp_path, allow):
    """`bench --format sarif` of a run judged wrong exited 1 with a log of no results: a CI that uploads it to code
    scanning saw a clean analysis of a server that answers wrong. The log has a `wrong-answers` result (an error), with
    the judgement's reasons; with --allow-wrong (exit 0) none, as the exit code says."""
    from tests.test_sarif import valid

    reference = tmp_path / "reference.json"
    references.save(reference, [c.Answer(p, "a plain answer in words") for p in c.PROBES], {"model": "tiny"})
    with serve(Style(answer="")) as (url, _):  # every probe answered with nothing: garbage the reference lacks
        code, out, _ = invoke("bench", "--url", url, *QUICK, "--no-store", "--reference-file", reference,
                              "--format", "sarif", *(["--allow-wrong"] if allow else []), env=_env(tmp_path))
    log = valid(out)
    results = log["runs"][0]["results"]
    assert code == (0 if allow else 1) == log["runs"][0]["invocations"][0]["exitCode"]
    if allow:
        assert results == []
        return
    [result] = results
    assert (result["ruleId"], result["level"]) == ("wrong-answers", "error"), result
    assert "the answers are wrong" in result["message"]["text"] and "empty answer" in result["message"]["text"]


def test_sarif_of_an_ab_with_a_wrong_arm_names_the_arms():
    """The same for an A/B: the comparison's `wrong-answers` error is a result, each arm's verdict its evidence."""
    from sparkdoctor.bench.document import ComparisonDocument
    from sparkdoctor.errors import WrongAnswers
    from sparkdoctor.result import Result
    from sparkdoctor.sink import Sink
    from sparkdoctor.views.bench import _sarif
    from tests.test_sarif import valid

    doc = ComparisonDocument(None, "a", "b", ["A", "B"], [1, 2], "output_tps", 0.02, [], "no difference", {},
                             {"A": "correct", "B": "wrong", "wrong": ["B"]}, {}, None)
    result = Result("bench", "bench", doc).fail(WrongAnswers("arm B gave wrong answers (measured and stored; "
                                                             "--allow-wrong to exit 0)"))
    log = valid(_sarif(result, Sink(io.StringIO())))
    [found] = log["runs"][0]["results"]
    assert found["ruleId"] == "wrong-answers" and "arm B: wrong" in found["message"]["text"], found


def test_a_reference_that_cannot_be_written_keeps_the_measured_run(tmp_path):
    """`bench --reference` with a state folder that takes no file (a read-only HOME) measured the whole run, then
    ended with a line naming no file ("no file can be made beside it in ... renamed over FILE"), exit 2, nothing
    stored. The run is stored now, its answers `unchecked` with the reason and the file, exit 3 (README)."""
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "references").write_text("")  # a file where the folder goes: no reference can be made
    with serve(Style(answer=" Paris, a large city in Europe with many museums and parks.")) as (url, _):
        code, out, err = invoke("bench", "--url", url, *QUICK, "--reference", "--format", "json", env=_env(tmp_path))
    doc = json.loads(out)
    assert code == 3 and doc["run_id"] == 1 and doc["correctness"]["verdict"] == "unchecked", (code, err)
    assert any(w.startswith(f"not stored as a reference: {tmp_path / 'state' / 'references'}/")
               for w in doc["correctness"]["why"]), doc["correctness"]["why"]
