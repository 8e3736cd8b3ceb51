"""A damaged ledger (issue 20, item 8): a row whose stored JSON is damaged is listed as damaged and the others
are still listed; a file whose schema version or pages are damaged is one line and exit 5 in every command that
reads or writes it (history, conclusions, rerun, bench storing). Real SQLite files, damaged as a disk or a hand
edit would, and the CLI: in-process (tests/inproc.py) for what each command answers, a `python -m sparkdoctor` child
where the point is the line a user's terminal gets (a malformed file, a message that is not UTF-8, another user)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.conclusions import store
from sparkdoctor.exitcodes import EXIT_LEDGER
from sparkdoctor.ledger import Ledger, LedgerError
from tests import inproc
from tests.debian import tool_or_skip
from tests.ledger.test_ledger import record
from tests.rerun.ledgerdata import add_ab, write_recipe

ROOT = Path(__file__).resolve().parents[2]
FACTS = {"schema": 1, "packages": {}, "target": {"python": sys.executable}}


def cli(*args) -> inproc.Ran:
    """The CLI in-process (tests/inproc.py): what a command answers about a damaged ledger does not depend on its
    start-up, and a child's start-up was most of each call's CPU. An internal error raises here with its traceback
    (never a line to look for). The real entry point's one line and exit 5: `real_cli` in the malformed-database test."""
    return inproc.run(*args, env={"COLUMNS": "200"})


def real_cli(*args) -> subprocess.CompletedProcess:
    """`python -m sparkdoctor`, a child as a user runs it."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)


def one_line_exit_5(p: subprocess.CompletedProcess | inproc.Ran, *words: str) -> None:
    assert p.returncode == EXIT_LEDGER, (p.returncode, p.stderr[-2000:])
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    for word in words:
        assert word in p.stderr, p.stderr


def ledger_with_conclusion(tmp_path: Path) -> Path:
    paths = {"A": write_recipe(tmp_path, "one-seq", ', "--max-num-seqs", "1"'), "B": write_recipe(tmp_path, "default")}
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        add_ab(led, paths, FACTS, {"A": [40.0, 41.0, 40.5], "B": [100.0, 99.0, 101.0]}, "default-vs-one-seq")
        led.add_run(record(name="plain"))
    return path


def damage(path: Path, sql: str, *args) -> None:
    db = sqlite3.connect(path)
    db.execute(sql, args)
    db.commit()
    db.close()


@pytest.mark.parametrize("column, text", [("summary_json", "{not json"), ("summary_json", "[1, 2]"),
                                          ("summary_json", '{"levels": 5}'), ("findings_json", '{"x": 1}'),
                                          ("facts_json", "9" * 5000)])
def test_a_damaged_run_is_listed_as_damaged_and_the_rest_is_listed(tmp_path, column, text):
    path = ledger_with_conclusion(tmp_path)
    damage(path, f"UPDATE runs SET {column} = ? WHERE id = 2", text)
    with Ledger(path) as led:
        runs = {r["id"]: r for r in led.runs()}
        assert sorted(runs) == [1, 2, 3]
        assert runs[1]["headline"] and not runs[1].get("damaged")
        assert any(column in why for why in led.run(2)["damaged"])
    p = cli("history", "--ledger", path, "--format", "json")
    assert p.returncode == 0, p.stderr
    listed = {r["id"]: r for r in json.loads(p.stdout)["runs"]}
    assert sorted(listed) == [1, 2, 3] and not listed[3].get("damaged")
    p = cli("history", "--ledger", path)
    assert p.returncode == 0 and "DAMAGED" in p.stdout and "run 2 is damaged" in p.stdout, p.stdout + p.stderr
    one_line_exit_5(cli("history", "2", "--ledger", path), "run 2 is damaged", column)
    one_line_exit_5(cli("history", "--compare", "1", "--compare", "2", "--ledger", path), "run 2 is damaged")
    assert cli("history", "--compare", "1", "--compare", "3", "--ledger", path).returncode == 0


def _set(path: Path, column: str, run_id: int, change) -> None:
    """Rewrite one run's JSON column through `change` (a hand edit, another tool's writer)."""
    db = sqlite3.connect(path)
    (text,) = db.execute(f"SELECT {column} FROM runs WHERE id = ?", (run_id,)).fetchone()
    value = json.loads(text) if text else {}
    change(value)
    db.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (json.dumps(value), run_id))
    db.commit()
    db.close()


@pytest.mark.parametrize("column, change, words", [
    ("summary_json", lambda v: v["headline"].update(decode_tps_per_stream="fast"), "headline is not an object of a number"),
    ("summary_json", lambda v: v["levels"][0].update(client=["x"]), "client figures or server figures are of the wrong kind"),
    ("summary_json", lambda v: v["levels"][0].setdefault("client", {}).update(ttft_s={"median": "x"}), "client ttft_s is not an estimate"),
    ("summary_json", lambda v: v["levels"][0].setdefault("client", {}).update(burst_share=10**400), "a figure is not a number"),
    ("memory_json", lambda v: v.update(high_water_bytes="big"), "high_water_bytes is not a number"),
])
def test_a_run_whose_figures_are_not_numbers_is_damaged_not_an_internal_error(tmp_path, column, change, words):
    """JSON of the right type with a figure of the wrong kind (a string headline, a level without its client
    figures, a 401-digit number) passed the damage check and then took the whole `history` listing down with a
    TypeError, a KeyError or an OverflowError. Now the row is DAMAGED, named, and the rest is listed."""
    path = ledger_with_conclusion(tmp_path)
    _set(path, column, 2, change)
    p = cli("history", "--ledger", path)
    assert p.returncode == 0 and "DAMAGED" in p.stdout and "run 2 is damaged" in p.stdout, p.stdout + p.stderr
    assert words in " ".join(p.stdout.split()), p.stdout
    assert cli("history", "--ledger", path, "--format", "json").returncode == 0
    one_line_exit_5(cli("history", "2", "--ledger", path), "run 2 is damaged", words)


@pytest.mark.parametrize("change, words", [
    (lambda v: v["levels"][0].update(round_output_tps=["x"]), "round_output_tps is not a list of numbers"),
    (lambda v: v["levels"][0].update(round_wall_s=5), "round_wall_s is not a list of numbers"),
    (lambda v: v.update(load={"index": {"cpus": "x", "other_cpus": 0.1, "gpu_other_mib": 0}}), "load is not an object"),
    (lambda v: v.update(load=[1]), "load is not an object")])
def test_a_run_rerun_reads_the_rounds_or_load_of_is_damaged_and_its_conclusion_broken(tmp_path, change, words):
    """rerun reads the old runs' rounds (each arm's regression) and load index (was the machine as busy) only after it
    has launched both arms: a round that was a string or an index whose cpus was a string passed the damage check,
    and `rerun` launched, stored two runs, then ended in an internal error (TypeError) with nothing recorded. The run
    is damaged now, and its conclusion broken, before anything is launched."""
    path = ledger_with_conclusion(tmp_path)
    _set(path, "summary_json", 2, change)
    p = cli("conclusions", "--ledger", path, "--format", "json")
    assert p.returncode == 0, p.stderr
    (item,) = json.loads(p.stdout)["conclusions"]
    assert item["state"] == "broken" and "run 2 (arm B) is damaged" in item["reasons"][0], item
    assert words in item["reasons"][0], item


def test_damaged_samples_are_named_and_the_run_is_not_shown_as_whole(tmp_path):
    path = ledger_with_conclusion(tmp_path)
    damage(path, "UPDATE samples SET sample_json = '{' WHERE run_id = 3 AND idx = 1")
    with Ledger(path) as led:
        run = led.run(3, with_samples=True)
    assert [s.get("damaged", "") for s in run["samples"]][1].startswith("sample_json is not JSON")
    assert run["damaged"] == [run["damaged"][0]] and "sample 1/0/1" in run["damaged"][0]


@pytest.mark.parametrize("text", ["{not json", "[]", '{"a": 1}', '{"a": {"path": "x", "label": "y"}, "b": {"path": "x", "label": "y"}, '
                                  '"runs": {"A": ["1"], "B": [2]}, "fingerprints": {"A": "f", "B": "f"}, "recipe_hashes": {"A": "h", "B": "h"}}'])
def test_a_damaged_conclusion_is_broken_and_the_rest_is_judged(tmp_path, text):
    path = ledger_with_conclusion(tmp_path)
    with Ledger(path) as led:  # a second, healthy conclusion on the same A/B
        (first,) = store.latest(led)
        led.db.execute("INSERT INTO conclusions (name, created_at, comparison_id, data_json) VALUES (?,?,?,?)",
                       ("second", first.created_at, first.comparison_id, json.dumps(first.data)))
    damage(path, "UPDATE conclusions SET data_json = ? WHERE id = 1", text)
    p = cli("conclusions", "--ledger", path, "--format", "json")
    assert p.returncode == 0, p.stderr
    items = {i["conclusion"]["name"]: i for i in json.loads(p.stdout)["conclusions"]}
    assert items["default-vs-one-seq"]["state"] == "broken" and "damaged" in items["default-vs-one-seq"]["reasons"][0]
    assert items["second"]["state"] != "broken", items["second"]
    p = cli("conclusions", "--ledger", path)
    assert p.returncode == 0 and "damaged ledger row" in p.stdout, p.stdout + p.stderr
    p = cli("rerun", "--dry-run", "--ledger", path, "--format", "json")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("ratio", [10**400, float("inf"), "1.5"])
def test_a_conclusion_whose_ratio_is_no_finite_number_is_broken(tmp_path, ratio):
    """A 401-digit ratio was a number to the shape check and an OverflowError in the statement's `:.2f`:
    `conclusions`, its JSON and `rerun --dry-run` all ended in an internal error."""
    path = ledger_with_conclusion(tmp_path)
    with Ledger(path) as led:
        (first,) = store.latest(led)
    data = json.loads(json.dumps(first.data))
    data["levels"][0]["ratio"]["ratio"] = ratio
    damage(path, "UPDATE conclusions SET data_json = ? WHERE id = 1", json.dumps(data))
    for args in (("conclusions",), ("conclusions", "--format", "json"), ("rerun", "--dry-run", "--format", "json")):
        p = cli(*args, "--ledger", path)
        assert p.returncode == 0 and "internal error" not in p.stderr, (args, p.stderr)
    (item,) = json.loads(cli("conclusions", "--ledger", path, "--format", "json").stdout)["conclusions"]
    assert item["state"] == "broken" and "finite numbers" in item["reasons"][0], item


def _drop(data, *path):
    *keys, last = path
    for key in keys:
        data = data[key]
    del data[last]


@pytest.mark.parametrize("change, words", [
    (lambda d: d["a"].update(drop=[1]), "workarounds it drops"),  # was an internal error in `conclusions` too
    (lambda d: _drop(d, "levels", 0, "ratio", "verdict"), "with a verdict"),
    (lambda d: _drop(d, "levels", 0, "concurrency"), "with a concurrency"),
    (lambda d: d["levels"][0].update(ratio=None), "with a concurrency and ratios"),
    (lambda d: d["levels"][0]["ratio"].update(ci_low=0), "positive finite"),
    (lambda d: d.update(pairs=10**6), "'pairs'"),
    (lambda d: d.update(pairs="3"), "'pairs'"),
    (lambda d: d.update(min_effect="0.02"), "'min_effect'")])
def test_a_conclusion_rerun_cannot_set_against_new_numbers_is_broken(tmp_path, change, words):
    """What rerun reads from a stored conclusion once it has launched (each level's ratio and verdict, the pairs
    to launch, the min-effect) was not shape-checked: a level without its verdict was `stale`, and `rerun` launched
    both arms, stored their runs and ended in an internal error (KeyError 'verdict') with no conclusion recorded;
    `pairs: 1000000` would have launched two million servers. Such a row is broken now, named, and never re-run."""
    path = ledger_with_conclusion(tmp_path)
    with Ledger(path) as led:
        (first,) = store.latest(led)
    data = json.loads(json.dumps(first.data))
    change(data)
    damage(path, "UPDATE conclusions SET data_json = ? WHERE id = 1", json.dumps(data))
    for args in (("conclusions",), ("rerun", "--dry-run", "--format", "json")):
        p = cli(*args, "--ledger", path)
        assert p.returncode == 0 and "internal error" not in p.stderr, (args, p.stderr)
    (item,) = json.loads(cli("conclusions", "--ledger", path, "--format", "json").stdout)["conclusions"]
    assert item["state"] == "broken" and words in item["reasons"][0], item


@pytest.mark.parametrize("run_id", [2**63, -(2**63) - 1, 10**30])
def test_a_conclusion_whose_run_id_no_ledger_holds_is_broken_not_an_internal_error(tmp_path, run_id):
    """An integer past SQLite's 64 bits was a run id to the shape check and an OverflowError when its runs were looked
    up: `conclusions` (every conclusion, not only that one) and `rerun --dry-run` ended in an internal error."""
    path = ledger_with_conclusion(tmp_path)
    with Ledger(path) as led:
        (first,) = store.latest(led)
    data = json.loads(json.dumps(first.data))
    data["runs"]["A"].append(run_id)
    damage(path, "UPDATE conclusions SET data_json = ? WHERE id = 1", json.dumps(data))
    for args in (("conclusions",), ("conclusions", "--format", "json"), ("rerun", "--dry-run", "--format", "json")):
        p = cli(*args, "--ledger", path)
        assert p.returncode == 0 and "internal error" not in p.stderr, (args, p.stderr)
    (item,) = json.loads(cli("conclusions", "--ledger", path, "--format", "json").stdout)["conclusions"]
    assert item["state"] == "broken" and "run ids" in item["reasons"][0], item


@pytest.mark.parametrize("facts", ["garbage", '{"schema": 40}', '{"schema": null, "target": "x"}'])
def test_a_conclusion_whose_run_is_damaged_is_broken(tmp_path, facts):
    """Facts that are JSON but not Facts this sparkdoctor reads (found by tests/test_fuzz_inputs.py) too."""
    path = ledger_with_conclusion(tmp_path)
    damage(path, "UPDATE runs SET facts_json = ? WHERE id = 2", facts)
    p = cli("conclusions", "--ledger", path, "--format", "json")
    assert p.returncode == 0, p.stderr
    (item,) = json.loads(p.stdout)["conclusions"]
    assert item["state"] == "broken" and "run 2 (arm B) is damaged" in item["reasons"][0]


@pytest.mark.parametrize("version", [-1, -2**31])
def test_a_negative_schema_version_is_one_line_exit_5_everywhere(tmp_path, version):
    path = ledger_with_conclusion(tmp_path)
    damage(path, f"PRAGMA user_version = {version}")
    with pytest.raises(LedgerError, match=rf"schema version {version} is not one any sparkdoctor writes"):
        Ledger(path)
    for args in (["history"], ["conclusions"], ["rerun", "--dry-run"]):
        one_line_exit_5(cli(*args, "--ledger", path), f"schema version {version}")


def malformed(path: Path) -> None:
    """Overwrite the pages of the runs table's data with garbage, past the header: the file still opens, the
    schema still reads, and the query fails with "database disk image is malformed"."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with open(path, "r+b") as fh:
        fh.seek((root - 1) * page)
        fh.write(b"\xa5" * page)


def test_a_malformed_database_is_one_line_exit_5_in_every_command(tmp_path):
    path = ledger_with_conclusion(tmp_path)
    malformed(path)
    for args in (["history"], ["history", "1"], ["conclusions"], ["rerun", "--dry-run"], ["rerun"]):
        one_line_exit_5(real_cli(*args, "--ledger", path), str(path), "malformed")


def test_bench_storing_into_a_malformed_ledger_is_one_line_exit_5(tmp_path):
    """bench's writes (an A/B's comparison row, a run) go through the same door: exit 5, one line."""
    from sparkdoctor.bench import flow, storing

    path = ledger_with_conclusion(tmp_path)
    malformed(path)
    ledger = Ledger(path)
    try:
        with pytest.raises(flow.Failure) as info:
            storing.ledger_call(ledger.add_run, record(name="again"))
    finally:
        ledger.close()
    assert info.value.exit_code == EXIT_LEDGER and "malformed" in str(info.value) and "\n" not in str(info.value)


def test_a_schema_damaged_into_bytes_that_are_not_utf8_is_one_line_exit_5(tmp_path):
    """One byte of the stored CREATE TABLE turned into one that is not UTF-8 (a flipped bit on disk): SQLite's
    "malformed database schema" message quotes it, and Python fails to decode the message itself."""
    path = ledger_with_conclusion(tmp_path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    data = bytearray(path.read_bytes())
    at = data.find(b"created_at TEXT NOT NULL")
    assert at > 0
    data[at + len("created_at TEXT NOT NUL")] = 0xB3
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerError, match="unreadable"):
        Ledger(path)
    for args in (["history"], ["conclusions"], ["rerun", "--dry-run"]):
        # a child: the line it prints quotes SQLite's message, whose bytes are not UTF-8, through the real stderr
        one_line_exit_5(real_cli(*args, "--ledger", path), str(path), "unreadable")


def test_a_ledger_in_a_folder_the_user_cannot_search_is_one_line_exit_5(tmp_path):
    """`--ledger locked/l.sqlite` where `locked` is mode 000: looking at the path raises EACCES (no "no such file"),
    which must be the ledger's one line, not an internal error. Run as an unprivileged user (root reads
    everything), inside a user namespace, as bubblewrap does for mod scripts."""
    bwrap = tool_or_skip("bwrap", "bubblewrap")  # it runs the CLI without root's right to read everything
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        for args in (["history"], ["conclusions"], ["rerun", "--dry-run"]):
            p = subprocess.run([bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--bind", "/", "/",
                                "--dev", "/dev", "--proc", "/proc", sys.executable, "-m", "sparkdoctor", *args,
                                "--ledger", str(locked / "l.sqlite")],
                               capture_output=True, text=True, timeout=300, cwd=ROOT, env=dict(os.environ, COLUMNS="200"))
            one_line_exit_5(p, str(locked / "l.sqlite"), "Permission denied")
        # bench's door: the store itself (it creates a missing ledger, so it looks at the folder first)
        p = subprocess.run([bwrap, "--unshare-user", "--uid", "1000", "--gid", "1000", "--bind", "/", "/", "--dev", "/dev",
                            "--proc", "/proc", sys.executable, "-c", "import sys; from sparkdoctor.ledger import Ledger, "
                            "LedgerError\ntry: Ledger(sys.argv[1])\nexcept LedgerError as e: print(e)", str(locked / "l.sqlite")],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert p.returncode == 0 and "cannot open" in p.stdout and "Permission denied" in p.stdout, (p.stdout, p.stderr)
    finally:
        locked.chmod(0o700)


HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA locking_mode = EXCLUSIVE")
db.execute("BEGIN EXCLUSIVE")
db.execute("UPDATE runs SET model = model")
print("held", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


def test_a_ledger_another_process_holds_is_named_as_held_not_as_damaged(tmp_path, monkeypatch):
    """Another process holds the ledger exclusively (a long write, an sqlite3 shell): the wait ended in
    "unreadable (database is locked); move it aside", advice that would set a healthy ledger aside. Now the line says
    another process holds it, and the file is untouched and readable once it is let go."""
    from sparkdoctor.ledger import schema

    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        led.add_run(record(name="kept"))
    before = path.read_bytes()
    monkeypatch.setattr(schema, "BUSY_TIMEOUT_S", 0.0, raising=False)  # the wait itself is SQLite's; the line after it is what is tested
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LedgerError) as err:
            Ledger(path)
        holder.communicate("\n", timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert "another process holds it" in str(err.value) and "move it aside" not in str(err.value), err.value
    assert path.read_bytes() == before
    with Ledger(path) as led:
        assert [r["recipe_name"] for r in led.runs()] == ["kept"]


WRITER = """
import sys
from sparkdoctor.ledger import Ledger, LedgerError
from tests.debian import tool_or_skip
from tests.ledger.test_ledger import record
try:
    with Ledger(sys.argv[1]) as led:
        led.add_run(record(name="big", samples=5000))
    print("stored")
except LedgerError as exc:
    print(exc)
"""


def test_a_run_that_does_not_fit_on_the_disk_says_so_and_leaves_the_ledger_whole(tmp_path):
    """A write past what the disk takes (here a file-size limit: EFBIG, as ENOSPC): SQLite ends the transaction itself,
    and the store's own ROLLBACK then failed, so the line said "cannot rollback - no transaction is active" and hid
    why. Now it names SQLite's error and the likely cause; the runs before are all there."""
    import resource

    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        led.add_run(record(name="kept"))

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))

    done = subprocess.run([sys.executable, "-B", "-c", WRITER, str(path)], preexec_fn=cap, capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    line = done.stdout.strip()
    assert line.startswith(f"ledger {path}: ") and "is its disk full?" in line and "cannot rollback" not in line, done
    with Ledger(path) as led:
        assert [r["recipe_name"] for r in led.runs()] == ["kept"] and led.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 3
