"""A ledger whose schema holds SQL of its own: a view or a trigger, which no sparkdoctor ledger has.

A ledger is a file someone may hand over (`--ledger` at a shared one), read and written as it is. SQLite runs a view's
query whenever a table of that name is read, and a trigger's statements whenever its table is written. A view `runs`
over an endless recursive query held `history` and `history --html` for good, deaf to Ctrl-C and SIGTERM (SQLite's loop
never returns to Python's signal handlers); a trigger on `runs` rewrote what `history --import` stored and exited 0.
Now such a ledger is refused in one line (exit 5) before any of its tables is read or written.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.ledger import Ledger, unstored
from tests.ledger.test_ledger import record

REPO = Path(__file__).resolve().parents[2]
CPU_SECONDS = 30


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "SPARKDOCTOR_DEBUG")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, preexec_fn=_bounded, stdin=subprocess.DEVNULL)


def ledger_with(tmp_path: Path, *statements: str) -> Path:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as led:
        led.add_run(record(name="tiny"))
    db = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        db.execute(statement)
    db.close()
    return path


def endless_runs_view(db_path: Path) -> None:
    db = sqlite3.connect(db_path, isolation_level=None)
    columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    db.execute("DROP TABLE samples")
    db.execute("DROP TABLE runs")
    picked = ", ".join(f"x AS {c}" for c in columns)
    db.execute(f"CREATE VIEW runs AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT {picked} "
               "FROM c WHERE x < 0")
    db.execute("CREATE TABLE samples (run_id INTEGER, concurrency INTEGER, round INTEGER, idx INTEGER, sample_json TEXT)")
    db.close()


@pytest.mark.parametrize("verb", [["history"], ["history", "--html", "h.html"], ["history", "--format", "json"]],
                         ids=" ".join)
def test_a_view_over_an_endless_query_is_refused_in_one_line(tmp_path, verb):
    path = ledger_with(tmp_path)
    endless_runs_view(path)
    done = cli(tmp_path, *verb, "--ledger", str(path))
    assert done.returncode == 5, (done.returncode, done.stderr[-500:])
    assert "holds the view 'runs', which no sparkdoctor ledger has" in done.stderr
    assert not (tmp_path / "h.html").exists()


def test_a_trigger_that_rewrites_what_is_stored_is_refused_before_the_write(tmp_path, monkeypatch):
    path = ledger_with(tmp_path, "CREATE TRIGGER forge AFTER INSERT ON runs BEGIN "
                                 "UPDATE runs SET model = 'forged' WHERE id = NEW.id; END")
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    kept = unstored.keep(record(name="second", fingerprint="e" * 16))
    done = cli(tmp_path, "history", "--import", str(kept), "--ledger", str(path), "--format", "json")
    assert done.returncode == 5, (done.returncode, done.stdout[-500:], done.stderr[-500:])
    assert "holds the trigger 'forge'" in json.loads(done.stdout)["errors"][0]["message"]
    assert kept.exists()  # still kept: nothing was stored
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*), count(*) FILTER (WHERE model = 'forged') FROM runs").fetchone() == (1, 0)


def test_a_ledger_of_tables_and_indexes_only_is_still_read(tmp_path):
    path = ledger_with(tmp_path, "CREATE INDEX extra ON runs(model)")
    done = cli(tmp_path, "history", "--ledger", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
