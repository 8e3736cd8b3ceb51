"""The ledger: a real SQLite file, its schema version and migrations, bad files, and no half-written run."""

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.ledger import SCHEMA_VERSION, Ledger, LedgerError, RunRecord
from sparkdoctor.ledger.schema import APPLICATION_ID, migrate_to_1

ROOT = Path(__file__).resolve().parents[2]


def record(name="tiny", samples=3, fingerprint="f" * 16, **kw):
    return RunRecord(recipe={"name": name, "argv": ["vllm", "serve", "m"], "env": {}, "model": "m"},
                     base_url="http://127.0.0.1:1", model="m", server={"kind": "vllm"}, facts={"schema": 1},
                     fingerprint=fingerprint, bench_version=1, tool_version="0", workload={"max_tokens": 8},
                     summary={"levels": [], "headline": {"decode_tps_per_stream": 100.0}},
                     samples=[(1, 0, i, {"ok": True, "output_tokens": 8}) for i in range(samples)], **kw)


def test_a_new_ledger_is_wal_versioned_and_keeps_foreign_keys(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        run_id = led.add_run(record())
        assert led.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert led.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert led.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with pytest.raises(LedgerError, match="FOREIGN KEY"):
            led.add_run(record(comparison_id=999))
        run = led.run(run_id, with_samples=True)
    assert run["recipe"]["name"] == "tiny" and len(run["samples"]) == 3 and run["fingerprint"] == "f" * 16
    with Ledger(path) as led:  # reopened: nothing lost, the failed insert left nothing
        assert [r["id"] for r in led.runs()] == [run_id] and led.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 3


def test_a_version_1_file_is_migrated_and_keeps_its_runs(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    migrate_to_1(db)
    db.execute("PRAGMA user_version = 1")
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("INSERT INTO runs (created_at, recipe_name, recipe_hash, recipe_json, base_url, model, server_json, fingerprint,"
               " facts_json, bench_version, tool_version, workload_json, summary_json, findings_json)"
               " VALUES ('2026-01-01', 'old', 'h', '{}', 'u', 'm', '{}', 'fp', '{}', 1, '0', '{}', '{\"levels\": []}', '[]')")
    db.close()
    with Ledger(path) as led:
        assert led.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [r["recipe_name"] for r in led.runs()] == ["old"]
        cid = led.begin_comparison("a", "b")
        led.add_run(record(comparison_id=cid, arm="A"))
        assert led.comparison(cid)["runs"] == [2]
        # schema 4: a run stored before it has no memory record (NULL), not a damaged one; a new run keeps its own
        assert led.run(1)["memory"] is None and "damaged" not in led.run(1) and led.runs()[1]["memory_high_water_bytes"] is None
        memory = {"high_water_bytes": 3 * 2**30, "lowest_available_bytes": 2**30, "series": [[0.0, 2**31, 2**30]]}
        new = led.add_run(record(memory=memory))
        assert led.run(new)["memory"] == memory and led.runs()[0]["memory_high_water_bytes"] == 3 * 2**30


def test_a_newer_schema_is_refused_untouched(tmp_path):
    path = tmp_path / "new.sqlite"
    Ledger(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    before = path.read_bytes()
    with pytest.raises(LedgerError, match=r"schema 99 was written by a newer sparkdoctor.*upgrade") as err:
        Ledger(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    assert path.read_bytes() == before


def test_a_corrupt_file_is_one_clear_line_and_is_not_changed(tmp_path):
    path = tmp_path / "bad.sqlite"
    path.write_bytes(b"this is not a database at all\n" * 100)
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="unreadable") as err:
        Ledger(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    assert path.read_bytes() == before


def test_another_programs_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x)")
    db.close()
    with pytest.raises(LedgerError, match="not a sparkdoctor ledger"):
        Ledger(path)


WRITER = """
import sys, time
from sparkdoctor.ledger import Ledger, RunRecord
led = Ledger(sys.argv[1])
def samples():
    for i in range(1000):
        if i == 500:
            print("half", flush=True)
            time.sleep(60)
        yield (1, 0, i, {"ok": True})
rec = RunRecord(recipe={"name": "killed"}, base_url="u", model="m", server={}, facts={}, fingerprint="f",
                bench_version=1, tool_version="0", workload={}, summary={"levels": []}, samples=samples())
led.add_run(rec)
"""


def test_sigkill_in_the_middle_of_writing_a_run_leaves_no_half_row(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        led.add_run(record(name="kept"))
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout.readline().strip() == b"half"  # 500 samples written inside the open transaction
        child.send_signal(signal.SIGKILL)
        child.wait(60)  # a safety net: a loaded machine may be slow to let it die
    finally:
        if child.poll() is None:
            child.kill()
    with Ledger(path) as led:
        assert [r["recipe_name"] for r in led.runs()] == ["kept"]
        assert led.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 3
        led.add_run(record(name="after"))  # and the file is still writable
        assert [r["recipe_name"] for r in led.runs()] == ["after", "kept"]
