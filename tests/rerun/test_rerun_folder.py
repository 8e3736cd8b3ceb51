"""A recipe's model named relative to the working folder (`model = "tiny"` with a ./tiny folder there, or
`--set model=./models/tiny`) is found where bench ran. A conclusion recorded there is listed and re-measured from
any other folder (cron, CI, another shell) on that same checkpoint: before, the listing said `model checkpoint
changed (... -> unknown)` and rerun launched the server on a model that was not there. Real CLI, the stand-in server
of test_rerun_fast.py, the real ledger."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.rerun.test_rerun_fast import _recipe, _run


@pytest.mark.alone  # its verdicts compare real token timings
def test_a_conclusion_on_a_relative_model_folder_is_judged_and_re_measured_from_another_folder(tmp_path):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    for folder, size in ((work / "tiny", 64), (work / "models" / "tiny", 32)):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": size}))
    elsewhere.mkdir()
    eager, compiled = _recipe(work, "eager", False), _recipe(work, "compiled", True)
    for path in (eager, compiled):  # the stand-in is told its model as vLLM is: the folder it loads
        path.write_text(path.read_text().replace('"--fast"', '"--model", "{model}", "--fast"'))
    ledger = tmp_path / "l.sqlite"
    for name, sets in (("plain", []), ("set", ["--set", "model=./models/tiny"])):
        ab = _run(work, "bench", eager, "--vs", compiled, "--pairs", "1", "--min-effect", "0.3", "--conclude", name,
                  *sets, "--allow-load-difference", "--ledger", ledger, "--format", "json", patch=True)
        assert ab.returncode == 0, ab.stderr
    listing = json.loads(_run(elsewhere, "conclusions", "--ledger", ledger, "--format", "json", patch=True).stdout)
    assert [(c["status"], c["changes"]) for c in listing["conclusions"]] == [("fresh", [])] * 2, listing
    # the patch is gone: stale for that alone, and re-measured from elsewhere on the same checkpoints (a relative
    # --ledger and -o are still this folder's)
    done = _run(elsewhere, "rerun", "--allow-load-difference", "--ledger", "../l.sqlite", "--format", "json",
                "-o", "out.json", patch=False)
    assert done.returncode == 0, done.stderr
    results = json.loads((elsewhere / "out.json").read_text())["results"]
    assert [[c["text"] for c in r["changes"]] for r in results] == [["env VLLM_SDTEST_PATCH unset (was 1)"]] * 2
    assert "not re-run" not in [r["outcome"] for r in results], results
    with sqlite3.connect(ledger) as db:
        runs = [(json.loads(s)["models"], json.loads(f)["recipe"]["model"]["identity"]["sha256"])
                for s, f in db.execute("SELECT server_json, facts_json FROM runs ORDER BY id")]
    served = [[str(work / "tiny")]] * 2 + [[str(work / "models" / "tiny")]] * 2
    assert [m for m, _ in runs] == served * 2, runs  # recorded, then re-measured: the same folders
    assert [sha for _, sha in runs[4:]] == [sha for _, sha in runs[:4]] and runs[0][1] != runs[2][1]
