"""An A/B without a reference scores B's answers against A's (bench/correctness.py `against`, bench/ab.py b_vs_a):
both arms answer the same greedy probes, so B's server is asked to score A's greedy tokens, as a reference's are.
Before, an A/B whose B changed the answers showed both arms `unchecked` and nothing else."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sparkdoctor.bench import ab
from sparkdoctor.bench import correctness as c
from tests.bench.sse_server import Style, serve
from tests.inproc import invoke

REPO = Path(__file__).resolve().parents[2]
QUICK = ["--rounds", "1", "--concurrency", "1", "--max-tokens", "4", "--warmup", "0"]


def completion(logprobs: list[float], prompt_ids: tuple[int, ...] = (1, 2)) -> dict:
    """A vLLM completions answer (echo, token ids): the prompt's tokens, then four greedy ones with `logprobs`."""
    ids = [*prompt_ids, 3, 4, 5, 6]
    return {"choices": [{"text": " a b c d", "logprobs": {"tokens": [f"token_id:{i}" for i in ids],
                                                        "token_logprobs": [None] * (len(prompt_ids) - 1) + [-1.0, *logprobs]}}],
            "usage": {"completion_tokens": 4}}


A = [-0.5, -0.7, -0.2, -0.9]
FAR = [-2.5, -0.7, -2.2, -0.9]  # 1.0 nats/token away on average: past the tolerance


def _a_answers(tmp_path) -> list[c.Answer]:
    with serve(Style(completion=completion(A))) as (url, _):
        done = c.step(url, "tiny", True, {}, c.Options(reference_file=str(tmp_path / "none.json")))
    assert done["verdict"] == c.Verdict.UNCHECKED and "against_a" not in done  # no reference, no other arm: as before
    return [c.Answer.from_dict(a) for a in done["answers"]]  # type: ignore[union-attr]


def _b(tmp_path, doc: dict, theirs: list[c.Answer]) -> dict:
    with serve(Style(completion=doc)) as (url, _):
        return c.step(url, "tiny", True, {}, c.Options(reference_file=str(tmp_path / "none.json"), against=theirs))


def test_b_answering_as_a_is_the_same(tmp_path):
    checked = _b(tmp_path, completion(A), _a_answers(tmp_path))
    other = checked["against_a"]
    assert checked["verdict"] == c.Verdict.UNCHECKED  # the run's own verdict is unchanged: no reference
    assert other["verdict"] == c.SAME and {r["mean_abs_dlogprob"] for r in other["per_prompt"]} == {0.0}, other


def test_b_answering_otherwise_differs(tmp_path):
    other = _b(tmp_path, completion(FAR), _a_answers(tmp_path))["against_a"]
    assert other["verdict"] == c.DIFFER, other
    assert all(r["mean_abs_dlogprob"] == 1.0 for r in other["per_prompt"])
    assert "arm A's tokens score 1.000 nats/token away (tolerance 0.25)" in other["why"][0]


def test_prompts_the_arms_tokenize_otherwise_are_not_compared(tmp_path):
    other = _b(tmp_path, completion(A, prompt_ids=(7, 8)), _a_answers(tmp_path))["against_a"]
    assert other["verdict"] == c.Verdict.UNSCORED and "tokenize it differently" in other["why"][-1], other


def test_b_whose_probes_fail_is_unchecked_and_scores_nothing(tmp_path):
    theirs = _a_answers(tmp_path)
    with serve(Style(completion={"choices": ["x"]})) as (url, style):
        other = c.step(url, "tiny", True, {}, c.Options(reference_file=str(tmp_path / "none.json"), against=theirs))
    assert other["against_a"]["verdict"] == c.Verdict.UNCHECKED, other["against_a"]
    assert not any(isinstance(r.get("prompt"), list) for r in style.requests)  # no scoring request was sent


def test_with_a_reference_b_is_judged_by_it_alone(tmp_path):
    theirs = _a_answers(tmp_path)
    ref = tmp_path / "ref.json"
    with serve(Style(completion=completion(A))) as (url, _):
        c.step(url, "tiny", True, {}, c.Options(mark_reference=True, reference_file=str(ref)))
        checked = c.step(url, "tiny", True, {}, c.Options(reference_file=str(ref), against=theirs))
    assert checked["verdict"] == c.Verdict.CORRECT and "against_a" not in checked


def test_the_ab_sums_b_up_and_a_run_a_cannot_be_read_back_from_is_skipped():
    same = {"verdict": c.SAME, "per_prompt": [{"mean_abs_dlogprob": 0.01}], "tolerance": 0.25, "why": []}
    differ = {"verdict": c.DIFFER, "per_prompt": [{"mean_abs_dlogprob": 0.9}], "tolerance": 0.25, "why": ["far"]}
    runs = [{"correctness": {"against_a": same}}, {"correctness": {"against_a": differ}}]
    assert ab.b_vs_a(runs) == {"verdict": c.DIFFER, "runs": [c.SAME, c.DIFFER], "largest_mean_abs_dlogprob": 0.9,
                               "tolerance": 0.25, "why": ["far"]}
    assert ab.b_vs_a(runs[:1])["verdict"] == c.SAME and ab.b_vs_a([{"correctness": None}]) is None  # type: ignore[index]
    nan = [{"correctness": {"answers": [{"prompt": "p", "logprobs": [None]}]}}]  # a NaN stored as null
    assert ab.against_a(None, "B", nan) is None and ab.against_a(None, "A", nan) is None


def _recipe(tmp_path: Path, name: str, doc: dict) -> Path:
    answer = tmp_path / f"{name}-answer.json"
    answer.write_text(json.dumps(doc))
    argv = [sys.executable, str(REPO / "tests" / "bench" / "sse_server.py"), "--host", "0.0.0.0", "--port", "8000",
            "--completion", str(answer)]
    path = tmp_path / f"{name}.toml"
    path.write_text(f'schema = 1\nname = "{name}"\nmodel = "tiny"\nserved_model_name = "tiny"\ncommand = {json.dumps(argv)}\n'
                    f'readiness_path = "/v1/models"\n[env]\nPYTHONPATH = "{REPO}"\n')
    return path


def test_an_ab_that_changes_the_answers_says_so(tmp_path, monkeypatch):
    """Two launched stand-in servers, no reference: B's answers are 1.0 nats/token from A's."""
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    a, b = _recipe(tmp_path, "a", completion(A)), _recipe(tmp_path, "b", completion(FAR))
    common = ["--vs", b, "--pairs", "1", *QUICK, "--no-store", "--allow-load-difference"]
    code, out, err = invoke("bench", a, *common, "--format", "json", cpu_seconds=120)
    assert code == 0, err
    other = json.loads(out)["correctness"]["b_vs_a"]
    assert other["verdict"] == c.DIFFER and other["largest_mean_abs_dlogprob"] == 1.0, other
    code, out, err = invoke("bench", a, *common, cpu_seconds=120)
    assert code == 0 and "answers of B against A's" in out and "differ; largest mean |Δ logprob| 1.000" in out, out
