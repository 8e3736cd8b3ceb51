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
        return ComparisonDocument(None, "a", "b", ["A", "B"], [1, 2], "output_tps", 0.02, [], "no difference", {},
                                  {"A": a, "B": b, "wrong": []}, {}, None)

    assert unjudged_answers(doc("correct", "unscored")) == "the answers of arm B unscored could not be judged"
    assert unjudged_answers(doc("unchecked", "unchecked")) == \
        "the answers of arm A unchecked and B unchecked could not be judged"
    assert unjudged_answers(doc("correct", "indecisive")) is None
