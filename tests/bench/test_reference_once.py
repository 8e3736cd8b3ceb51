"""A `--reference-file` is read once: the content validated before anything runs is the content the run is judged
against. It was read a second time when scoring, so a file replaced in between was scored unvalidated."""

from __future__ import annotations

import json

from sparkdoctor.bench import correctness as c
from sparkdoctor.bench import flow
from tests.bench.sse_server import Style, serve
from tests.inproc import invoke

QUICK = ["--rounds", "1", "--concurrency", "1", "--max-tokens", "4", "--warmup", "0"]


def _good(prompt: str) -> dict[str, object]:
    return {"prompt": prompt, "text": " words", "prompt_ids": [1, 2], "ids": [3, 4], "logprobs": [-1.0, -2.0],
            "scored": None, "error": None, "margins": [1.0, 1.5]}


def test_a_reference_file_replaced_after_validation_is_not_read_again(tmp_path, monkeypatch):
    path = tmp_path / "ref.json"
    path.write_text(json.dumps({"reference_version": 1, "answers": [_good(p) for p in c.PROBES]}))
    measure = flow.measure_url

    def replaced_then_measured(*args, **kwargs):  # between the validation and the scoring
        path.write_text("[1, 2]")  # never validated: read again, it turns the verdict into `unchecked`
        return measure(*args, **kwargs)

    monkeypatch.setattr(flow, "measure_url", replaced_then_measured)
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    with serve(Style(answer="a plain answer")) as (url, style):
        code, out, err = invoke("bench", "--url", url, *QUICK, "--no-store", "--format", "json",
                                "--reference-file", path, env=env)
    checked = json.loads(out)["correctness"]
    assert code == 3, err  # unscored (no log-probabilities) against a named reference: not judged, fails closed
    assert path.read_text() == "[1, 2]"  # the file was replaced
    # judged against the validated reference: its tokens were sent to be scored, and nothing says "unreadable"
    assert checked["verdict"] == c.Verdict.UNSCORED, checked
    assert not any("unreadable" in w for w in checked["why"]), checked["why"]
    assert any(r.get("prompt") == [1, 2, 3, 4] for r in style.requests), "the reference's tokens were not scored"
