"""fix, bench, history, conclusions and rerun called as `run(options) -> Result`, without typer: each once
succeeding (its document a dataclass whose to_json() has the keys the JSON always had) and once failing (an
error class carrying its exit code, never an exit code picked by hand); `-o FILE` writes the document atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.commands import bench, conclusions, fix, history, rerun
from sparkdoctor.emit import emit
from sparkdoctor.errors import LedgerFailure, SparkdoctorError, UsageError
from sparkdoctor.exitcodes import EXIT_BENCH_FAILED, EXIT_LEDGER, EXIT_USAGE
from sparkdoctor.fix.interface import NoSuchJournal, StepKind
from sparkdoctor.result import Format
from tests.bench.sse_server import Style, serve
from tests.contract.ledger_samples import QUICK, empty_ledger

REPO = Path(__file__).resolve().parents[2]


def test_fix_history_and_prune_run_without_typer():
    listed = fix.run(fix.FixCommand(history=True))
    assert (listed.command, listed.kind, listed.exit_code) == ("fix", "fix", 0)
    assert listed.data.to_json() == {"fix_version": 1, "mode": "history", "result": []}
    pruned = fix.run(fix.FixCommand(prune=True, keep=0)).data.to_json()
    assert pruned == {"fix_version": 1, "mode": "prune", "result": {"removed": [], "kept_unsettled": [], "freed_bytes": 0}}


@pytest.mark.parametrize(("options", "message"), [
    (fix.FixCommand(yes=True, rollback=True), "do not go together"),
    (fix.FixCommand(keep=3), "--keep and --older-than go with --prune"),
    (fix.FixCommand(journal="x"), "a journal id goes with --rollback"),
    (fix.FixCommand(prune=True), "--prune needs --keep N and/or --older-than AGE"),
    (fix.FixCommand(prune=True, keep=-1), "--keep -1: give a number of journals"),
    (fix.FixCommand(prune=True, older_than="soon"), "--older-than 'soon': give an age like 30d"),
    (fix.FixCommand(fmt=Format.sarif), "--format sarif: choose one of console, json"),
])
def test_fix_refuses_bad_option_combinations_before_anything_runs(options, message):
    with pytest.raises(UsageError, match=message) as info:
        fix.run(options)
    assert info.value.exit_code == EXIT_USAGE


def test_fix_rollback_of_no_such_journal_is_a_usage_error_not_a_failed_apply():
    with pytest.raises(NoSuchJournal) as info:
        fix.run(fix.FixCommand(rollback=True, journal="NOSUCH"))
    assert info.value.exit_code == EXIT_USAGE and info.value.code == "fix-no-such-journal"


def test_fix_older_than_reads_every_unit():
    assert [fix.age_seconds(t) for t in ("45s", "90m", "12h", "30d", "2w", " 1.5 h ")] == [45, 5400, 43200, 2592000, 1209600, 5400]


def test_step_kinds_are_the_plan_json_words_and_a_journal_with_another_is_refused():
    from sparkdoctor.fix.interface import JournalError
    from sparkdoctor.fix.journal_schema import validate
    from sparkdoctor.fix.model import Plan, Step

    plan = Plan(target={"python": "/x/bin/python"}, installer="pip",
                steps=[Step(StepKind.uninstall, "f", ["e"], "reinstall-family", names=["a"])])
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["steps"][0]["op"] == "uninstall" and Plan.from_dict(data).steps[0].op is StepKind.uninstall
    assert StepKind.values() == ("edit", "uninstall", "install", "restore")
    from sparkdoctor.fix.definitions import VOCABULARY
    from sparkdoctor.fix.interface import ActionKind

    assert list(VOCABULARY) == list(ActionKind) and Plan.from_dict(data).steps[0].kind is ActionKind.reinstall_family
    assert [k.changes_packages for k in StepKind] == [False, True, True, True]
    data["steps"][0]["op"] = "format-disk"
    with pytest.raises(JournalError, match=r"plan\.steps\[0\]\.op"):
        validate({"journal_version": 1, "id": "j", "installer": "pip", "target": {"python": "/x"}, "plan": data}, "journal j")


def test_bench_url_runs_without_typer_and_its_run_document_keeps_its_keys(tmp_path):
    ledger = empty_ledger(tmp_path)
    with serve(Style(delay=0.001)) as (url, _style):
        result = bench.run(bench.BenchCommand(url=url, ledger=ledger, **QUICK))
    assert (result.command, result.kind, result.exit_code) == ("bench", "bench", 0)
    doc = result.data.to_json()
    assert list(doc)[:3] == ["schema", "bench_version", "kind"] and doc["kind"] == "run" and doc["run_id"] == 1
    assert doc["ledger"] == str(ledger) and doc["model"] == "tiny" and [lvl["concurrency"] for lvl in doc["levels"]] == [1]


@pytest.mark.parametrize(("options", "message"), [
    (bench.BenchCommand(), "give a RECIPE to launch, or --url"),
    (bench.BenchCommand(url="http://127.0.0.1:9", vs=Path("b.toml")), "--vs needs a RECIPE"),
    (bench.BenchCommand(recipe=Path("a.toml"), calibrate=True, pairs=1), "--calibrate --pairs 1"),
    (bench.BenchCommand(recipe=Path("a.toml"), vs=Path("b.toml"), conclude="x", no_store=True), "--conclude NAME needs"),
    (bench.BenchCommand(url="notaurl"), "--url 'notaurl'"),
    (bench.BenchCommand(recipe=Path("a.toml"), sets=["novalue"]), "--set 'novalue': write key=value"),
    # launch options with --url were silently ignored
    (bench.BenchCommand(url="http://127.0.0.1:9", sets=["port=1"]), "--set changes how a RECIPE is launched"),
    (bench.BenchCommand(url="http://127.0.0.1:9", local=True), "--local changes how a RECIPE is launched"),
    (bench.BenchCommand(url="http://127.0.0.1:9", runtime="podman"), "--runtime changes how a RECIPE is launched"),
])
def test_bench_refuses_bad_option_combinations_before_any_server_is_reached(options, message):
    with pytest.raises(SparkdoctorError, match=message) as info:
        bench.run(options)
    assert info.value.exit_code == EXIT_USAGE


def test_bench_against_a_server_that_is_not_there_is_a_bench_failure():
    from sparkdoctor.bench.failures import BadBenchInput, RunFailed

    with pytest.raises(RunFailed) as info:
        bench.run(bench.BenchCommand(url="http://127.0.0.1:1", no_store=True, **QUICK))
    assert info.value.exit_code == EXIT_BENCH_FAILED and info.value.to_dict()["code"] == "bench"
    with pytest.raises(BadBenchInput, match="--concurrency 1,x: give whole numbers") as bad:
        bench.run(bench.BenchCommand(url="http://127.0.0.1:1", concurrency="1,x"))
    assert bad.value.exit_code == EXIT_USAGE


def test_history_conclusions_and_rerun_run_without_typer_on_an_empty_ledger(tmp_path):
    ledger = empty_ledger(tmp_path)
    listed = history.run(history.HistoryCommand(ledger=ledger))
    assert listed.exit_code == 0 and listed.data.to_json() == {"schema": 1, "bench_version": listed.data.to_json()["bench_version"],
                                                               "kind": "history", "ledger": str(ledger), "runs": []}
    found = conclusions.run(conclusions.ConclusionsCommand(ledger=ledger)).data.to_json()
    assert [found[k] for k in ("schema", "kind", "ledger", "conclusions")] == [1, "conclusions", str(ledger), []]
    planned = rerun.run(rerun.RerunCommand(dry_run=True, ledger=ledger))
    doc = planned.data.to_json()
    assert planned.exit_code == 0 and list(doc) == ["schema", "rerun_version", "kind", "ledger", "dry_run", "conclusions",
                                                    "workarounds", "failed"]
    assert doc["kind"] == "rerun-plan" and doc["dry_run"] is True
    done = rerun.run(rerun.RerunCommand(ledger=ledger, fail_on=["flipped,regression"])).data.to_json()
    assert done["kind"] == "rerun" and done["results"] == [] and done["failed"] == []


def test_history_conclusions_and_rerun_failures_are_their_error_classes(tmp_path):
    ledger = empty_ledger(tmp_path)
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(UsageError, match="no run 7"):
        history.run(history.HistoryCommand(run_id=7, ledger=ledger))
    with pytest.raises(UsageError, match="--compare takes two run ids"):
        history.run(history.HistoryCommand(compare=[1], ledger=ledger))
    for narrowed in ({"run_id": 1}, {"compare": [1, 2]}, {"delete": 1}):  # a filter of the list that nothing would apply
        with pytest.raises(UsageError, match="--recipe narrows the list of runs: no RUN_ID, --compare"):
            history.run(history.HistoryCommand(recipe="tiny", ledger=ledger, **narrowed))
    with pytest.raises(UsageError, match="-o does not go with it"):
        history.run(history.HistoryCommand(html=str(tmp_path / "page.html"), output=tmp_path / "x", ledger=ledger))
    with pytest.raises(SparkdoctorError, match="no conclusion named 'nope'") as info:
        conclusions.run(conclusions.ConclusionsCommand(name="nope", ledger=ledger))
    assert info.value.exit_code == EXIT_USAGE
    with pytest.raises(UsageError, match="--fail-on bogus: choose flipped or regression"):
        rerun.run(rerun.RerunCommand(fail_on=["bogus"], ledger=ledger))
    for run, options in ((history.run, history.HistoryCommand(ledger=missing)),
                         (conclusions.run, conclusions.ConclusionsCommand(ledger=missing)),
                         (rerun.run, rerun.RerunCommand(dry_run=True, ledger=missing))):
        with pytest.raises(LedgerFailure, match="no such file") as failed:
            run(options)
        assert failed.value.exit_code == EXIT_LEDGER and failed.value.code == "ledger"
    assert not missing.exists()  # refused, never created


def test_output_writes_the_document_to_the_file_atomically_and_nothing_to_stdout(tmp_path, capsys):
    ledger = empty_ledger(tmp_path)
    target = tmp_path / "history.json"
    target.write_text("old")
    code = emit(history.run(history.HistoryCommand(ledger=ledger)), Format.json, target)
    assert code == 0 and capsys.readouterr().out == ""
    doc = json.loads(target.read_text())
    assert (doc["command"], doc["kind"], doc["exit_code"], doc["runs"]) == ("history", "history", 0, [])
    console = tmp_path / "conclusions.txt"
    emit(conclusions.run(conclusions.ConclusionsCommand(ledger=ledger)), Format.console, console)
    assert "No conclusions in" in console.read_text() and "\x1b[" not in console.read_text()


def test_every_verb_here_takes_output_on_the_command_line(tmp_path):
    ledger = empty_ledger(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    for args in (["history"], ["conclusions"], ["rerun", "--dry-run"]):
        out = tmp_path / f"{args[0]}.json"
        p = subprocess.run([sys.executable, "-m", "sparkdoctor", *args, "--ledger", str(ledger), "--format", "json", "-o", str(out)],
                           capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 0 and p.stdout == "", (args, p.stderr)
        assert json.loads(out.read_text())["command"] == args[0]
    out = tmp_path / "fix.json"
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "fix", "--history", "--format", "json", "-o", str(out)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stdout == "" and json.loads(out.read_text())["mode"] == "history"
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", "--url", "http://127.0.0.1:9", "-o", ""],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == EXIT_USAGE and "--output '': give a file name" in p.stderr


def test_history_html_writes_the_page_and_answers_with_what_it_holds(tmp_path):
    ledger = empty_ledger(tmp_path)
    page = tmp_path / "h.html"
    result = history.run(history.HistoryCommand(html=str(page), ledger=ledger))
    doc = result.data.to_json()
    assert (doc["kind"], doc["html"], doc["runs"], doc["changes"]) == ("history-html", str(page), 0, 0)
    assert doc["bytes"] == len(page.read_bytes()) and page.read_text().lstrip().lower().startswith("<!doctype html")
    assert emit(result, Format.console) == 0
    with pytest.raises(UsageError, match="--html '': give a file name"):
        history.run(history.HistoryCommand(html="", ledger=ledger))
    with pytest.raises(UsageError, match="no RUN_ID or --compare"):
        history.run(history.HistoryCommand(html=str(page), run_id=1, ledger=ledger))
