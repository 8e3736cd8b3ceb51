"""Fast and wrong never wins in `rerun` either: an A/B arm whose answers are wrong decides a workaround's advice and a
conclusion's outcome before any speed does. Real ledgers, A/B documents built by bench's own ab.compare and
ab.correctness_check from run summaries with correctness verdicts; only the launch (`_measure`) is replaced by the
A/B it would have stored. No server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkdoctor.bench import BENCH_VERSION, ab
from sparkdoctor.bench.run import resolved_recipe
from sparkdoctor.conclusions import rerun as pipeline
from sparkdoctor.conclusions import staleness, store
from sparkdoctor.conclusions.documents import RerunDocument, RerunDone, RerunPlan
from sparkdoctor.conclusions.model import Arm
from sparkdoctor.conclusions.toolchain import Toolchains
from sparkdoctor.facts import Facts
from sparkdoctor.ledger import Ledger, RunRecord
from sparkdoctor.matrix import load as load_matrix
from sparkdoctor.recipes import load
from tests.rerun.ledgerdata import add_ab, older, write_recipe

FLAG = "VLLM_NVFP4_GEMM_BACKEND=marlin"
FAST, SLOW, SAME = [100.0, 99.0, 101.0], [40.0, 41.0, 40.5], [40.2, 40.6, 40.9]


def _stored_ab(led: Ledger, paths: dict[str, Path], facts: dict[str, Any], tps: dict[str, list[float]],
               answers: dict[str, str], not_called: bool = False) -> dict[str, Any]:
    """One finished A/B in the ledger, its document as bench's flow builds it (levels, load, correctness)."""
    fingerprint = Facts.from_dict(facts, source="test").fingerprint()
    cid = led.begin_comparison(str(paths["A"]), str(paths["B"]))
    summaries = {}
    for arm in ("A", "B"):
        summary = {"levels": [{"concurrency": 1, "round_output_tps": tps[arm], "headline": {"decode_tps_per_stream": tps[arm][0]}}],
                   "headline": {"decode_tps_per_stream": tps[arm][0]}, "correctness": {"verdict": answers[arm]}}
        summaries[arm] = summary
        led.add_run(RunRecord(recipe=resolved_recipe(load(str(paths[arm]))), base_url="http://127.0.0.1:1", model="m",
                              server={"kind": "vllm"}, facts=facts, fingerprint=fingerprint, bench_version=BENCH_VERSION,
                              tool_version="test", workload={"max_tokens": 8, "concurrency": [1], "rounds": 3},
                              summary=summary, comparison_id=cid, arm=arm))
    levels = ab.compare([summaries["A"]], [summaries["B"]], 0.02)
    if not_called:  # what ab.load_check does when the arms ran under clearly different load
        for lvl in levels:
            lvl["ratio"]["verdict"] = ab.NOT_CALLED
    correctness = ab.correctness_check([summaries["A"]], [summaries["B"]], levels)
    doc = {"comparison_id": cid, "a": paths["A"].stem, "b": paths["B"].stem, "levels": levels, "verdict": ab.overall(levels),
           "metric": ab.METRIC, "min_effect": 0.02, "correctness": correctness, "findings": []}
    led.finish_comparison(cid, "complete", doc)
    return doc


def _workaround(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = write_recipe(tmp_path, "marlin")
    item = {"recipe": str(path), "label": "marlin", "workaround": FLAG, "key": "env:VLLM_NVFP4_GEMM_BACKEND",
            "python": None, "sets": {}, "local": False, "measured_by": None}
    return path, item


# (with, without) tok/s, (with, without) answers, what the advice must start with, what it must never say
CASES = {
    "faster without it, wrong without it": ((SLOW, FAST), ("correct", "wrong"), f"keep {FLAG}: answers are wrong without it"),
    "no difference, wrong without it": ((SLOW, SAME), ("correct", "wrong"), f"keep {FLAG}: answers are wrong without it"),
    "slower without it, wrong without it": ((FAST, SLOW), ("correct", "wrong"), f"keep {FLAG}: answers are wrong without it"),
    "not called, wrong without it": ((SLOW, SAME), ("correct", "wrong"), f"keep {FLAG}: answers are wrong without it"),
    "faster without it, wrong with it": ((SLOW, FAST), ("wrong", "correct"), f"remove {FLAG}: answers are wrong with it"),
    "slower without it, wrong with it": ((FAST, SLOW), ("wrong", "correct"), f"remove {FLAG}: answers are wrong with it"),
    "wrong both ways": ((SLOW, FAST), ("wrong", "wrong"), f"{FLAG}: answers are wrong with it and without it"),
    "not called, right both ways": ((SLOW, SAME), ("correct", "correct"), f"{FLAG}: not called (1.00x without it)"),
    "no difference, right both ways": ((SLOW, SAME), ("correct", "correct"), f"{FLAG} buys nothing measurable here"),
    "faster without it, right both ways": ((SLOW, FAST), ("correct", "correct"), f"remove {FLAG}: without it the server is"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_workaround_is_never_advised_away_when_answers_are_wrong_without_it(tmp_path, here_facts, monkeypatch, case):
    """Before: `... buys nothing measurable here (1.40x without it): remove it` for a faster arm without the workaround
    that was wrong (its verdict `wrong arm` fell through to the fallback), and the same for no difference."""
    (with_tps, without_tps), (with_ok, without_ok), advice = CASES[case]
    path, item = _workaround(tmp_path)
    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:
        doc = _stored_ab(led, {"A": path, "B": path}, here_facts, {"A": with_tps, "B": without_tps},
                         {"A": with_ok, "B": without_ok}, not_called=case.startswith("not called"))
        monkeypatch.setattr(pipeline, "_measure", lambda arms, data, opts: doc)
        measured = pipeline.measure_workaround(led, item, {}, pipeline.Options(ledger=ledger, matrix=None))
        stored = store.latest(led, f"workaround:marlin:{item['key']}")
    assert measured["advice"].startswith(advice), measured["advice"]
    if without_ok == "wrong":
        assert "remove" not in measured["advice"]
    assert measured["wrong"] == [side for side, ok in (("with", with_ok), ("without", without_ok)) if ok == "wrong"]
    assert stored and stored[0].data["correctness"]["wrong"] == doc["correctness"]["wrong"]  # the next rerun can read it


def test_a_workaround_measured_by_an_existing_conclusion_reads_its_answers_too(tmp_path, here_facts):
    """The conclusion that already measures the pair is the evidence (no launch): its wrong arm counts as a new A/B's;
    a conclusion stored before correctness was kept still names the faster arm of its `wrong arm` levels."""
    path, item = _workaround(tmp_path)
    ledger = tmp_path / "l.sqlite"
    for kept in (True, False):
        with Ledger(ledger) as led:
            doc = _stored_ab(led, {"A": path, "B": path}, here_facts, {"A": SLOW, "B": FAST}, {"A": "correct", "B": "wrong"})
            assert doc["levels"][0]["ratio"]["verdict"] == ab.WRONG_ARM
            name = f"pair-{kept}"
            store.record(led, name, doc if kept else {k: v for k, v in doc.items() if k != "correctness"},
                         {"A": Arm(str(path), "with"), "B": Arm(str(path), "without", (item["key"],))}, None)
            (status,) = [staleness.judge(c, led, Toolchains()) for c in store.latest(led, name)]
            assert status.state == "fresh"
            ref = {**item, "measured_by": {"conclusion": name, "with": "A", "without": "B"}}
            done = pipeline.execute(led, RerunPlan([status], [ref]), pipeline.Options(ledger=ledger, matrix=None))
        (measured,) = done.workarounds
        assert measured["source"] == f"conclusion {name}"
        assert measured["advice"] == f"keep {FLAG}: answers are wrong without it", (kept, measured["advice"])


@pytest.mark.parametrize(("old_tps", "new_tps", "answers"), [
    ({"A": SLOW, "B": FAST}, {"A": SLOW, "B": FAST}, {"A": "wrong", "B": "correct"}),  # the slower arm is wrong now
    ({"A": SLOW, "B": SAME}, {"A": SLOW, "B": SAME}, {"A": "correct", "B": "wrong"}),  # no difference, B wrong now
    ({"A": SLOW, "B": FAST}, {"A": SLOW, "B": FAST}, {"A": "correct", "B": "wrong"}),  # the faster arm (as before)
])
def test_a_conclusion_with_either_arm_wrong_now_is_broken_and_fails_the_gate(tmp_path, here_facts, monkeypatch,
                                                                              old_tps, new_tps, answers):
    """Before: only a wrong FASTER arm made `broken`; a wrong slower arm, or a wrong arm of a no-difference
    conclusion, held, and `rerun --fail-on flipped` passed."""
    paths = {"A": write_recipe(tmp_path, "one-seq", ', "--max-num-seqs", "1"'), "B": write_recipe(tmp_path, "default")}
    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:
        add_ab(led, paths, older(here_facts, vllm="0.31.0"), old_tps, "pair")
        (status,) = [staleness.judge(c, led, Toolchains()) for c in store.latest(led, "pair")]
        assert status.state == "stale" and status.rerunnable
        doc = _stored_ab(led, paths, here_facts, new_tps, answers)
        monkeypatch.setattr(pipeline, "_measure", lambda arms, data, opts: doc)
        done = pipeline.execute(led, RerunPlan([status], []), pipeline.Options(ledger=ledger, matrix=None))
        (row,) = store.latest(led, "pair")
    (res,) = done.results
    wrong = sorted(arm for arm, ok in answers.items() if ok == "wrong")
    assert res["outcome"] == "broken" and res["wrong"] == wrong, res
    assert [lvl["outcome"] for lvl in res["levels"]] == ["broken"]
    assert row.outcome == "broken"  # stored as such: `conclusions` lists it broken
    report = RerunDocument(str(ledger), RerunPlan([status], []), RerunDone(done.results, []))
    report.failed = report.happened({"flipped"})
    assert report.failed == ["flipped"] and report.exit_code == 1
    assert RerunDocument(str(ledger), RerunPlan([status], []), RerunDone(done.results, [])).exit_code == 0  # no gate asked


def test_a_conclusion_whose_arms_are_both_right_still_holds(tmp_path, here_facts, monkeypatch):
    """The other side of the rule: right answers leave the speed comparison as it was."""
    paths = {"A": write_recipe(tmp_path, "one-seq", ', "--max-num-seqs", "1"'), "B": write_recipe(tmp_path, "default")}
    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:
        add_ab(led, paths, older(here_facts, vllm="0.31.0"), {"A": SLOW, "B": FAST}, "pair")
        (status,) = [staleness.judge(c, led, Toolchains()) for c in store.latest(led, "pair")]
        doc = _stored_ab(led, paths, here_facts, {"A": SLOW, "B": FAST}, {"A": "correct", "B": "correct"})
        monkeypatch.setattr(pipeline, "_measure", lambda arms, data, opts: doc)
        done = pipeline.execute(led, RerunPlan([status], []), pipeline.Options(ledger=ledger, matrix=None))
    (res,) = done.results
    assert res["outcome"] == "holds" and res["wrong"] == [], res


def test_the_wrong_arms_of_a_stored_row_are_read_as_someone_elses():
    """A ledger row is read as someone else's: a field of the wrong shape names no arm, never an exception."""
    wrong = {"verdict": ab.WRONG_ARM}
    assert pipeline.wrong_arms({"correctness": {"wrong": ["B", "C", {"x": 1}, None]}}) == ["B"]
    assert pipeline.wrong_arms({"levels": [{"ratio": {**wrong, "ratio": 2.0}}, {"ratio": {**wrong, "ratio": 0.5}}]}) == ["A", "B"]
    for junk in ({"correctness": "wrong"}, {"correctness": {"wrong": "B"}, "levels": "x"}, {"levels": [1, None, {"ratio": 3}]},
                 {"levels": [{"ratio": {**wrong, "ratio": "big"}}, {"ratio": {**wrong, "ratio": True}}, {"ratio": wrong}]}):
        assert pipeline.wrong_arms(junk) == [], junk


STALE_EAGER = '''component = "test"

[[entry]]
id = "test-eager-while-absent-package"
title = "t"
severity = "warn"
action = "rebench"
summary = "s"
remedy = "r"
justifies = ["--enforce-eager"]
when.packages = { "no-such-package-here" = "*" }
refs = ["https://example.org/b"]
'''


def test_the_dry_run_says_what_the_rerun_does_when_the_measuring_conclusion_cannot_be_rerun(tmp_path, here_facts,
                                                                                            monkeypatch):
    """A stale workaround whose pair a stale conclusion measures, that conclusion's other recipe now bad TOML: the
    dry run said "measured by conclusion X" while the rerun (X cannot be re-run, so it has no new numbers) measured
    the workaround with an A/B of its own. Both now come from one decision: an A/B of its own."""
    paths = {"A": write_recipe(tmp_path, "eager", ', "--enforce-eager"'), "B": write_recipe(tmp_path, "compiled")}
    ledger, matrix = tmp_path / "l.sqlite", tmp_path / "m.toml"
    matrix.write_text(STALE_EAGER)
    with Ledger(ledger) as led:
        add_ab(led, paths, older(here_facts, vllm="0.31.0"), {"A": SLOW, "B": FAST}, "compile-vs-eager")
    planned = pipeline.plan(Ledger(ledger), load_matrix(matrix), Toolchains())
    assert planned.workarounds[0]["measured_by"] == {"conclusion": "compile-vs-eager", "with": "A", "without": "B"}
    paths["B"].write_text("schema = 1\nname = [\n")  # no longer TOML: the conclusion cannot be re-run
    env = dict(os.environ, COLUMNS="200")
    shown = subprocess.run([sys.executable, "-m", "sparkdoctor", "rerun", "--dry-run", "--ledger", str(ledger), "--matrix",
                            str(matrix)], capture_output=True, text=True, timeout=300, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "rerun will measure it: an A/B with and without it" in shown.stdout, shown.stdout
    assert "measured by conclusion" not in shown.stdout
    with Ledger(ledger) as led:
        planned = pipeline.plan(led, load_matrix(matrix), Toolchains())
        (status,), (item,) = planned.conclusions, planned.workarounds
        assert status.state == "stale" and not status.rerunnable and item["measured_by"] is None
        launched: list[dict[str, Arm]] = []

        def measure(arms: dict[str, Arm], data: dict[str, Any], opts: pipeline.Options) -> dict[str, Any]:
            launched.append(arms)
            return _stored_ab(led, {"A": paths["A"], "B": paths["A"]}, here_facts, {"A": SLOW, "B": FAST},
                              {"A": "correct", "B": "correct"})

        monkeypatch.setattr(pipeline, "_measure", measure)
        done = pipeline.execute(led, planned, pipeline.Options(ledger=ledger, matrix=matrix))
    assert [sorted(a) for a in launched] == [["A", "B"]] and done.workarounds[0]["source"].startswith("conclusion workaround:")
