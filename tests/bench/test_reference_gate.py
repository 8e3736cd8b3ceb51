"""`bench --reference-file` is a gate on answers: when they could not be judged against the file (`unchecked`: the
probe or scoring requests failed; `unscored`: no log-probabilities) it exited 0, so a CI job that asked for a
correctness check passed without one. It exits 3 now (as `check` does for a target it cannot probe), in every
format; `--allow-wrong` passes it, and a run without --reference-file is unchanged."""

from __future__ import annotations

import json

import pytest

from sparkdoctor.bench import correctness as c
from sparkdoctor.exitcodes import EXIT_BENCH_UNCHECKED
from tests.bench.sse_server import Style, serve
from tests.inproc import invoke

QUICK = ["--rounds", "1", "--concurrency", "1", "--max-tokens", "4", "--warmup", "0", "--no-store"]
STYLES = {  # no log-probabilities in the answers; a probe answer of the wrong shape (that probe's error)
    "unscored": Style(answer="a plain answer in words"),
    "unchecked": Style(completion={"choices": ["x"]}),
}


def _env(tmp_path) -> dict[str, str | None]:
    return {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}


def _reference(tmp_path):
    path = tmp_path / "reference.json"
    path.write_text(json.dumps({"reference_version": 1, "answers": [
        {"prompt": p, "text": " words", "prompt_ids": [1, 2], "ids": [3, 4], "logprobs": [-1.0, -2.0],
         "scored": None, "error": None, "margins": [1.0, 1.5]} for p in c.PROBES]}))
    return path


@pytest.mark.parametrize("verdict", sorted(STYLES))
def test_answers_not_judged_against_a_named_reference_fail_closed(tmp_path, verdict):
    reference = _reference(tmp_path)
    with serve(STYLES[verdict]) as (url, _):
        code, out, _ = invoke("bench", "--url", url, *QUICK, "--reference-file", reference, "--format", "json",
                              env=_env(tmp_path))
        console, _, _ = invoke("bench", "--url", url, *QUICK, "--reference-file", reference, env=_env(tmp_path))
        allowed, _, _ = invoke("bench", "--url", url, *QUICK, "--reference-file", reference, "--allow-wrong",
                               env=_env(tmp_path))
        default, _, _ = invoke("bench", "--url", url, *QUICK, env=_env(tmp_path))  # no reference named: as before
    doc = json.loads(out)
    assert doc["correctness"]["verdict"] == verdict, doc["correctness"]
    [error] = doc["errors"]
    assert code == doc["exit_code"] == EXIT_BENCH_UNCHECKED and error["code"] == "answers-unchecked", doc["errors"]
    assert f"could not be judged ({verdict})" in error["message"] and "not stored" in error["message"], error
    assert "\n" not in error["message"] and "--allow-wrong" in error["message"], error
    assert console == EXIT_BENCH_UNCHECKED
    assert (allowed, default) == (0, 0)


def test_sarif_of_answers_not_judged_has_a_result(tmp_path):
    """The SARIF log of such a run says so: a clean analysis of answers nobody checked is what the exit code fixes."""
    from tests.test_sarif import valid

    with serve(STYLES["unscored"]) as (url, _):
        code, out, _ = invoke("bench", "--url", url, *QUICK, "--reference-file", _reference(tmp_path),
                              "--format", "sarif", env=_env(tmp_path))
    log = valid(out)
    [result] = log["runs"][0]["results"]
    assert code == EXIT_BENCH_UNCHECKED == log["runs"][0]["invocations"][0]["exitCode"]
    assert (result["ruleId"], result["level"]) == ("answers-unchecked", "error"), result


def test_an_ab_arm_not_judged_fails_closed_and_a_judged_one_does_not():
    from sparkdoctor.bench.document import ComparisonDocument
    from sparkdoctor.commands.bench import unjudged_answers

    def doc(a, b):
        unjudged = [arm for arm, v in (("A", a), ("B", b)) if v in ("unchecked", "unscored")]
        return ComparisonDocument(None, "a", "b", ["A", "B"], [1, 2], "output_tps", 0.02, [], "no difference", {},
                                  {"A": a, "B": b, "wrong": [], "unjudged": unjudged}, {}, None)

    assert unjudged_answers(doc("correct", "unscored")) == "the answers of arm B unscored could not be judged"
    assert unjudged_answers(doc("unchecked", "unchecked")) == \
        "the answers of arm A unchecked and B unchecked could not be judged"
    assert unjudged_answers(doc("correct", "indecisive")) is None


def _vllm_answer() -> dict[str, object]:
    """A vLLM completion with echo, token ids and log-probabilities (every probe gets it: a reference can be marked)."""
    tokens = [f"token_id:{i}" for i in (11, 12, 21, 22, 23, 24, 25, 26, 27, 28)]
    values = [None, -1.0, -0.5, -0.4, -0.3, -0.6, -0.2, -0.1, -0.7, -0.3]
    tops = [None] + [{t: v, "token_id:99": v - 2.0} for t, v in zip(tokens[1:], values[1:], strict=True)]
    return {"id": "x", "object": "text_completion", "model": "tiny", "usage": {"prompt_tokens": 2, "completion_tokens": 8},
            "choices": [{"index": 0, "text": " Paris is a city in France of", "finish_reason": "length",
                         "logprobs": {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops}}]}


@pytest.mark.parametrize("verdict", sorted(STYLES))
def test_a_stored_reference_that_cannot_judge_fails_closed(tmp_path, verdict):
    """Without --reference-file, a model with a reference stored (`--reference`) whose answers could not be judged
    against it exited 0: a server that stopped answering the probes passed the gate it had passed before. Only a
    model with no reference yet passes unjudged, and says so."""
    env = _env(tmp_path)
    with serve(Style(completion=_vllm_answer())) as (url, _):
        fresh, first, _ = invoke("bench", "--url", url, *QUICK, "--format", "json", env=env)
        marked, _, _ = invoke("bench", "--url", url, *QUICK, "--reference", env=env)
        judged, _, _ = invoke("bench", "--url", url, *QUICK, env=env)
    with serve(STYLES[verdict]) as (url, _):  # the same model name: the reference stored for it is found
        code, out, _ = invoke("bench", "--url", url, *QUICK, "--format", "json", env=env)
        allowed, _, _ = invoke("bench", "--url", url, *QUICK, "--allow-wrong", env=env)
    assert (fresh, marked, judged) == (0, 0, 0)
    checked = json.loads(first)["correctness"]
    assert (checked["verdict"], checked["reference_expected"]) == ("unchecked", False), checked
    doc = json.loads(out)
    assert doc["correctness"]["verdict"] == verdict and doc["correctness"]["reference_expected"], doc["correctness"]
    [error] = doc["errors"]
    assert code == doc["exit_code"] == EXIT_BENCH_UNCHECKED and error["code"] == "answers-unchecked", doc["errors"]
    assert "against the reference stored for its model" in error["message"], error
    assert allowed == 0


def test_marking_a_reference_that_could_not_be_stored_fails_closed(tmp_path):
    """`bench --reference` on a server whose probe answers cannot be read stores nothing: it exited 0."""
    with serve(STYLES["unchecked"]) as (url, _):
        code, out, _ = invoke("bench", "--url", url, *QUICK, "--reference", "--format", "json", env=_env(tmp_path))
    doc = json.loads(out)
    assert doc["correctness"]["verdict"] == "unchecked", doc["correctness"]
    assert code == doc["exit_code"] == EXIT_BENCH_UNCHECKED, doc["errors"]
    assert "the reference being marked (--reference)" in doc["errors"][0]["message"]


def test_a_fault_only_at_larger_batches_fails_the_gate(tmp_path):
    """The probes were four sequential requests (batch 1): a server wrong only when requests share a batch (here:
    its log-probabilities off by 3 nats whenever another request is in flight) was `correct` after a sweep at
    concurrency 4. The probes and the scoring are now sent as many at once as the run's top concurrency too."""
    env = _env(tmp_path)
    with serve(Style(completion=_vllm_answer(), batch_fault=1.0)) as (url, _):
        marked, _, _ = invoke("bench", "--url", url, *QUICK, "--reference", env=env)
        alone, _, _ = invoke("bench", "--url", url, *QUICK, env=env)
        code, out, _ = invoke("bench", "--url", url, *QUICK[:3], "1,4", *QUICK[4:], "--format", "json", env=env)
    assert (marked, alone) == (0, 0)
    checked = json.loads(out)["correctness"]
    assert checked["verdict"] == "wrong" and checked["batched"]["concurrency"] == 4, checked
    assert any(w.startswith("at concurrency 4 (the probes sent at once): ") for w in checked["why"]), checked["why"]
    assert code == 1
