"""Conclusions without a server: real ledgers (tests/rerun/ledgerdata.py), real Facts of this interpreter,
the CLI end to end. Staleness says exactly what changed; deleted runs, a newer ledger and a changed
recipe are refused in one line or reported, never compared."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass

from sparkdoctor.conclusions import outcome, staleness, store
from sparkdoctor.conclusions.model import Conclusion
from sparkdoctor.conclusions.toolchain import Toolchains, what_changed
from sparkdoctor.exitcodes import EXIT_LEDGER
from sparkdoctor.ledger import Ledger
from tests.rerun.ledgerdata import add_ab, older, write_recipe


@dataclass
class Done:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stderr + self.stdout


class runner:  # noqa: N801 (reads like typer's CliRunner, but runs the real command)
    @staticmethod
    def invoke(_app, args):
        env = dict(os.environ, COLUMNS="200")
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], env=env, capture_output=True,
                           text=True, timeout=300)
        return Done(p.returncode, p.stdout, p.stderr)


app = None


def _ledger(tmp_path, here_facts, facts=None, tps=None, recipes=None):
    paths = recipes or {"A": write_recipe(tmp_path, "one-seq", ', "--max-num-seqs", "1"'), "B": write_recipe(tmp_path, "default")}
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        add_ab(led, paths, facts or here_facts, tps or {"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]}, "default-vs-one-seq")
    return path, paths


def _json(args):
    result = runner.invoke(app, args)
    return result, (json.loads(result.stdout) if result.stdout.strip().startswith("{") else None)


def test_a_conclusion_measured_on_this_toolchain_is_fresh_and_names_its_evidence(tmp_path, here_facts):
    path, _ = _ledger(tmp_path, here_facts)
    result, doc = _json(["conclusions", "--ledger", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    (item,) = doc["conclusions"]
    assert item["status"] == "fresh" and item["changes"] == [] and doc["schema"] == 1
    c = item["conclusion"]
    assert c["verdict"] == "faster" and c["runs"] == {"A": [1], "B": [2]} and c["comparison_id"] == 1
    assert c["statement"].startswith("default is faster than one-seq: 2.4")


def test_after_an_upgrade_it_is_stale_and_says_exactly_what_changed(tmp_path, here_facts):
    path, _ = _ledger(tmp_path, here_facts, facts=older(here_facts, **{"vllm": "0.31.0", "nvidia-cutlass-dsl": "4.4.2"}))
    result, doc = _json(["conclusions", "--ledger", str(path), "--format", "json"])
    (item,) = doc["conclusions"]
    assert item["status"] == "stale" and item["rerunnable"]
    texts = {c["text"] for c in item["changes"]}
    assert texts == {"vllm 0.31.0 removed", "nvidia-cutlass-dsl 4.4.2 removed"}
    console = runner.invoke(app, ["conclusions", "--ledger", str(path)]).output
    assert "stale" in console and "changed: vllm 0.31.0 removed" in console


def test_what_changed_names_versions_files_env_and_driver():
    old = {"packages": {"vllm": ["0.31.0", ["vllm/__init__.py"], None], "torch": ["2.12.0", [], "13.0"]},
           "env": {"VLLM_X": "1"}, "driver": "580.95", "arch": "sm_121a"}
    new = {"packages": {"vllm": ["0.32.0", [], None], "flashinfer-python": ["0.6.11", [], None]},
           "env": {"VLLM_Y": "2"}, "driver": "590.44", "arch": "sm_121a"}
    texts = [r["text"] for r in what_changed(old, new)]
    assert texts == ["flashinfer-python 0.6.11 installed", "torch 2.12.0 removed", "vllm 0.31.0 -> 0.32.0",
                     "vllm: modified file gone (back to its RECORD): vllm/__init__.py",
                     "env VLLM_X unset (was 1)", "env VLLM_Y set to 2", "driver 580.95 -> 590.44"]


def test_a_conclusion_whose_runs_were_deleted_is_broken_not_compared(tmp_path, here_facts):
    path, _ = _ledger(tmp_path, here_facts)
    db = sqlite3.connect(path)
    db.execute("DELETE FROM runs WHERE id = 2")
    db.commit()
    db.close()
    result, doc = _json(["conclusions", "--ledger", str(path), "--format", "json"])
    (item,) = doc["conclusions"]
    assert item["status"] == "broken" and not item["rerunnable"]
    assert item["reasons"] == ["run 2 is gone from the ledger: nothing left to compare with; record it again"]
    plan, doc = _json(["rerun", "--dry-run", "--ledger", str(path), "--format", "json"])
    assert plan.exit_code == 0 and doc["conclusions"][0]["state"] == "broken"


def test_a_recipe_that_changed_since_is_incomparable_and_not_rerun(tmp_path, here_facts):
    path, paths = _ledger(tmp_path, here_facts, facts=older(here_facts, vllm="0.31.0"))
    paths["B"].write_text(paths["B"].read_text().replace('"1024"', '"2048"'))
    result, doc = _json(["conclusions", "--ledger", str(path), "--format", "json"])
    (item,) = doc["conclusions"]
    assert item["status"] == "incomparable" and not item["rerunnable"]
    assert any("recipe B" in r and "changed since the conclusion" in r for r in item["reasons"])
    done = runner.invoke(app, ["rerun", "--ledger", str(path), "--format", "json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["results"] == []  # nothing measured: apples to pears


def test_a_ledger_from_a_newer_sparkdoctor_is_refused_in_one_line(tmp_path):
    path = tmp_path / "new.sqlite"
    Ledger(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    for args in (["conclusions"], ["rerun", "--dry-run"]):
        result = runner.invoke(app, [*args, "--ledger", str(path)])
        assert result.exit_code == 5
        assert "schema 99 was written by a newer sparkdoctor" in result.output and result.output.count("\n") == 1


def test_a_missing_ledger_is_refused_in_one_line_and_never_created(tmp_path):
    """A mistyped --ledger must not read as "nothing here" (and leave an empty ledger behind)."""
    typo = tmp_path / "ledgr.sqlite"
    for command in (["conclusions"], ["rerun"], ["rerun", "--dry-run"], ["history"]):
        r = runner.invoke(app, [*command, "--ledger", str(typo)])
        assert r.exit_code == EXIT_LEDGER and r.stderr.count("\n") == 1 and f"ledger {typo}: no such file" in r.stderr, (command, r.output)
    assert not typo.exists()


def test_an_empty_file_is_not_a_ledger_and_is_left_empty(tmp_path):
    """`touch ledger.sqlite` (or a failed copy) is no ledger: the reading commands used to write a schema into it
    and pass on "nothing here"."""
    empty = tmp_path / "ledger.sqlite"
    empty.touch()
    for command in (["conclusions"], ["rerun"], ["rerun", "--dry-run"], ["history"]):
        r = runner.invoke(app, [*command, "--ledger", str(empty)])
        assert r.exit_code == EXIT_LEDGER and r.stderr.count("\n") == 1 and f"ledger {empty}: an empty file" in r.stderr, (command, r.output)
    assert empty.stat().st_size == 0


def test_rerun_with_nothing_stale_says_so(tmp_path, here_facts):
    path, _ = _ledger(tmp_path, here_facts)
    r = runner.invoke(app, ["rerun", "--ledger", str(path)])
    text = " ".join(r.stdout.split())  # a piped console wraps at 160 columns, and the tmp path is long
    assert r.exit_code == 0 and f"Nothing to re-measure in {path}: no stale conclusion or workaround (1 conclusion(s), 1 fresh)." in text, r.output


def test_rerun_refuses_bad_options_and_unknown_names(tmp_path, here_facts):
    path, _ = _ledger(tmp_path, here_facts)
    bad = runner.invoke(app, ["rerun", "--fail-on", "slower", "--ledger", str(path)])
    assert bad.exit_code == 2 and "choose flipped or regression" in bad.output
    missing = runner.invoke(app, ["rerun", "nope", "--dry-run", "--ledger", str(path)])
    assert missing.exit_code == 2 and "no conclusion named 'nope'" in missing.output
    conclude = runner.invoke(app, ["bench", "a.toml", "--conclude", "x", "--ledger", str(path)])
    assert conclude.exit_code == 2 and "--conclude NAME needs" in conclude.output


def test_an_empty_fail_on_is_refused_never_a_gate_that_passes_everything(tmp_path, here_facts):
    """`rerun --fail-on "$FAIL_ON"` with the variable unset (or `,`) read as no gate at all: exit 0 whatever flipped,
    while check, whatif, recipe check and fleet check refuse an empty --fail-on. One line, exit 2, as for a bad word."""
    path, _ = _ledger(tmp_path, here_facts)
    for value in ("", ",", " , "):
        bad = runner.invoke(app, ["rerun", "--dry-run", "--fail-on", value, "--ledger", str(path), "-f", "json"])
        assert bad.exit_code == 2 and bad.stderr.count("\n") == 1, (value, bad.output)
        assert "--fail-on" in bad.stderr and "choose flipped or regression" in bad.stderr, bad.stderr
        assert json.loads(bad.stdout)["errors"][0]["code"] == "usage"
    ok = runner.invoke(app, ["rerun", "--dry-run", "--fail-on", "flipped,", "--ledger", str(path)])
    assert ok.exit_code == 0, ok.output


def test_a_second_rerun_waits_for_the_one_re_measuring_the_ledger(tmp_path, here_facts, monkeypatch):
    """Two `rerun`s at once on one ledger both re-measured the same stale conclusion (their A/Bs competing for the
    cores) and recorded it twice. A rerun holds LEDGER.rerun-lock while it plans and re-measures; another waits
    ($SPARKDOCTOR_LOCK_WAIT), then one line naming the holder, exit 2. A --dry-run only reads: it never waits."""
    path, _ = _ledger(tmp_path, here_facts)
    monkeypatch.setenv("SPARKDOCTOR_LOCK_WAIT", "0.5")
    fd = os.open(f"{path}.rerun-lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another rerun is re-measuring
        busy, doc = _json(["rerun", "--ledger", str(path), "--format", "json"])
        assert busy.exit_code == 2 and doc is not None and doc["exit_code"] == 2, busy.output
        assert f"rerun: {path} is locked by pid {os.getpid()}" in busy.stderr.splitlines()[-1], busy.stderr
        assert runner.invoke(app, ["rerun", "--dry-run", "--ledger", str(path)]).exit_code == 0
    finally:
        os.close(fd)
    assert runner.invoke(app, ["rerun", "--ledger", str(path)]).exit_code == 0


def test_a_relative_python_is_recorded_absolute_so_rerun_finds_it_from_any_folder(tmp_path, here_facts, monkeypatch):
    """`bench A --vs B --python ../venv --conclude X` recorded `../venv`: `rerun` from another folder said
    `--python ../venv: no such interpreter` (exit 4), or re-measured whatever venv that names there. A bare name
    (`python3`, looked up on PATH) is kept as given."""
    path, paths = _ledger(tmp_path, here_facts)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    doc = {"comparison_id": 1, "a": "one-seq", "b": "default", "levels": [], "verdict": "faster", "min_effect": 0.02}
    for given, stored in (("../venv", str(tmp_path / "venv")), ("python3", "python3"), (None, None)):
        assert store.conclude(f"rel-{given}", doc, paths["A"], paths["B"], given, path)["python"] == stored


def test_outcomes_hold_flip_or_change_by_verdict_and_ci():
    def level(r, lo, hi, verdict):
        return [{"concurrency": 1, "ratio": {"ratio": r, "ci_low": lo, "ci_high": hi, "verdict": verdict}}]

    assert outcome.compare_levels(level(1.0, 0.97, 1.03, "no difference"), level(2.4, 2.2, 2.6, "faster"))["outcome"] == "flipped"
    assert outcome.compare_levels(level(1.5, 1.4, 1.6, "faster"), level(2.4, 2.2, 2.6, "faster"))["outcome"] == "changed"
    assert outcome.compare_levels(level(2.3, 2.1, 2.5, "faster"), level(2.4, 2.2, 2.6, "faster"))["outcome"] == "holds"


def test_a_rerun_row_points_to_the_one_it_remeasured(tmp_path, here_facts):
    path, paths = _ledger(tmp_path, here_facts)
    with Ledger(path) as led:
        first = store.latest(led)[0]
        second = add_ab(led, paths, here_facts, {"A": [40.0, 40.0, 41.0], "B": [40.0, 41.0, 40.5]}, "default-vs-one-seq")
        assert [c.id for c in store.history(led, "default-vs-one-seq")] == [first.id, second.id]
        (now,) = store.latest(led)
        assert now.id == second.id and now.data["verdict"] == "no difference"
        status = staleness.judge(now, led, Toolchains())
        assert status.state == "fresh" and isinstance(status.conclusion, Conclusion)


def test_a_recipe_measurably_slower_on_the_new_toolchain_is_a_regression(tmp_path, here_facts):
    path, paths = _ledger(tmp_path, here_facts, tps={"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]})
    with Ledger(path) as led:
        old = store.latest(led)[0]
        new = add_ab(led, paths, here_facts, {"A": [40.2, 40.6, 40.9], "B": [60.0, 61.0, 59.5]}, "default-vs-one-seq")
        rows = {arm: outcome.arm_change(led, old.data["runs"][arm], new.data["runs"][arm], 0.02) for arm in ("A", "B")}
    assert [r["regression"] for r in rows["A"]] == [False]  # same speed: no difference, no regression
    (b,) = rows["B"]
    assert b["regression"] and b["ratio"]["verdict"] == "slower" and b["old_median"] == 100.0 and b["new_median"] == 60.0


def test_a_stale_conclusion_that_cannot_be_rerun_says_why_and_stays_stale(tmp_path, here_facts):
    path, paths = _ledger(tmp_path, here_facts, facts=older(here_facts, vllm="0.31.0"))
    paths["A"].unlink()
    result, doc = _json(["rerun", "--ledger", str(path), "--format", "json"])
    assert result.exit_code == 4, result.output
    (res,) = doc["results"]
    assert res["outcome"] == "not re-run" and res["reasons"][0].startswith(f"arm A cannot be re-run: recipe {paths['A']}")
    listing = _json(["conclusions", "--ledger", str(path), "--format", "json"])[1]
    assert listing["conclusions"][0]["status"] == "stale"  # nothing was stored: still stale, still saying why


def test_rerun_names_a_broken_conclusion_and_why_instead_of_nothing_to_re_measure(tmp_path, here_facts):
    """A ledger whose only conclusion has a damaged row: `conclusions` said broken, `rerun` only "Nothing to
    re-measure", and `rerun --fail-on flipped` (a CI gate) passed on a conclusion it can no longer judge."""
    path, _ = _ledger(tmp_path, here_facts)
    db = sqlite3.connect(path)
    db.execute("UPDATE conclusions SET data_json = '{not json'")
    db.commit()
    db.close()
    result = runner.invoke(app, ["rerun", "--ledger", str(path)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.stdout.split())  # rich wraps long lines
    assert said.startswith("broken default-vs-one-seq not re-run: its ledger row is damaged (data_json is not JSON"), said
    assert "1 broken (above)" in said
    gate, doc = _json(["rerun", "--ledger", str(path), "--fail-on", "flipped", "--format", "json"])
    assert gate.exit_code == 1 and doc["failed"] == ["flipped"] and doc["conclusions"][0]["state"] == "broken"


def test_a_conclusion_recorded_before_bench_kept_its_folder_says_where_its_relative_paths_are_read(tmp_path, here_facts):
    """A row without `folder` (recorded before bench stored it) was judged and re-run from the current folder in
    silence: a recipe's model named ./models/tiny there may be another checkpoint, or none. Now the document and the
    console say it, once for the conclusion; one that recorded its folder says nothing."""
    old, _ = _ledger(tmp_path, here_facts)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (["conclusions"], ["rerun", "--dry-run"]):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", *args, "--ledger", str(old), "--format", "json"],
                              cwd=elsewhere, env=dict(os.environ, COLUMNS="200"), capture_output=True, text=True, timeout=300)
        (item,) = json.loads(done.stdout)["conclusions"]
        assert item["notes"] == ["recorded before bench kept the folder it ran in: relative paths in its recipes (a model "
                                 f"named ./models/tiny) are read from the current folder, {elsewhere}"], item
        console = subprocess.run([sys.executable, "-m", "sparkdoctor", *args, "--ledger", str(old)], cwd=elsewhere,
                                 env=dict(os.environ, COLUMNS="200"), capture_output=True, text=True, timeout=300).stdout
        assert console.count("note:") == 1 and f"note: {item['notes'][0]}" in " ".join(console.split()), console
    kept = tmp_path / "kept"
    kept.mkdir()
    with Ledger(kept / "l.sqlite") as led:
        add_ab(led, {"A": write_recipe(kept, "a"), "B": write_recipe(kept, "b")}, here_facts,
               {"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]}, "kept", extra={"folder": str(kept)})
    result, doc = _json(["conclusions", "--ledger", str(kept / "l.sqlite"), "--format", "json"])
    assert doc["conclusions"][0]["notes"] == [], doc
    assert "note:" not in runner.invoke(app, ["conclusions", "--ledger", str(kept / "l.sqlite")]).output
