"""`history --delete RUN_ID` removes a run a user does not want (measured on a busy box, the wrong recipe): a dry run
by default that says what would go and what names it, `--yes` to remove it, the run kept in a file first that
`history --import FILE` stores again. Before, no command removed a run. The real CLI on a real ledger."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from sparkdoctor.exitcodes import EXIT_USAGE
from sparkdoctor.ledger import Ledger
from tests.ledger.test_ledger import ROOT, record


def cli(tmp_path: Path, *args: object) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(ROOT), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "history", *map(str, args),
                           "--ledger", str(tmp_path / "l.sqlite")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def _ledger(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite") as led:
        cid = led.begin_comparison("a", "b")
        led.add_run(record(name="a", comparison_id=cid, arm="A"))
        led.add_run(record(name="b", comparison_id=cid, arm="B", samples=2))
        led.db.execute("INSERT INTO conclusions (name, created_at, comparison_id, data_json) VALUES (?, ?, ?, ?)",
                       ("a-vs-b", "2026-12-01T00:00:00+00:00", cid, json.dumps({"runs": {"A": [1], "B": [2]}})))
        led.db.commit()
        led.add_run(record(name="solo"))


def _ids(tmp_path: Path) -> list[int]:
    with Ledger(tmp_path / "l.sqlite") as led:
        return sorted(int(r["id"]) for r in led.runs())  # type: ignore[call-overload]


def test_delete_is_a_dry_run_until_yes_and_keeps_the_run_in_a_file_that_import_restores(tmp_path):
    _ledger(tmp_path)
    dry = cli(tmp_path, "--delete", "2", "--format", "json")
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["kind"] == "history-delete" and doc["run_id"] == 2 and doc["deleted"] is False and doc["kept"] is None
    assert doc["conclusions"] == ["a-vs-b"] and doc["run"]["comparison_id"] == 1 and doc["run"]["arm"] == "B"
    assert _ids(tmp_path) == [1, 2, 3] and not (tmp_path / "state").exists()
    said = cli(tmp_path, "--delete", "2")
    assert said.returncode == 0 and "would be removed" in said.stdout and "--delete 2 --yes" in said.stdout, said.stdout
    assert "a-vs-b" in said.stdout, said.stdout

    done = cli(tmp_path, "--delete", "2", "--yes", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["deleted"] is True and Path(doc["kept"]).is_file() and Path(doc["kept"]).stat().st_mode & 0o077 == 0
    assert _ids(tmp_path) == [1, 3]
    db = sqlite3.connect(tmp_path / "l.sqlite")
    assert db.execute("SELECT count(*) FROM samples WHERE run_id = 2").fetchone() == (0,)
    db.close()
    back = cli(tmp_path, "--import", doc["kept"], "--format", "json")
    assert back.returncode == 0, back.stderr
    with Ledger(tmp_path / "l.sqlite") as led:
        restored = led.run(json.loads(back.stdout)["run_id"], with_samples=True)
    assert restored is not None and restored["recipe"]["name"] == "b" and len(restored["samples"]) == 2
    assert restored["comparison_id"] == 1 and restored["arm"] == "B"


def test_delete_refuses_a_missing_run_and_other_forms(tmp_path):
    _ledger(tmp_path)
    gone = cli(tmp_path, "--delete", "9", "--yes")
    assert gone.returncode == EXIT_USAGE and "no run 9" in gone.stderr and gone.stderr.count("\n") == 1, gone.stderr
    for args in (["1", "--delete", "2"], ["--delete", "2", "--compare", "1", "--compare", "3"], ["--yes"]):
        out = cli(tmp_path, *args)
        assert out.returncode == EXIT_USAGE and out.stderr.count("\n") == 1, (args, out.stderr)
    assert _ids(tmp_path) == [1, 2, 3]


def test_delete_names_a_bench_url_run_by_its_server_not_recipe_none(tmp_path):
    """A `bench --url` run has no recipe: the dry run said "run 1 (recipe None, ...)"."""
    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_run(record(name=None))
    said = cli(tmp_path, "--delete", "1")
    assert said.returncode == 0, said.stderr
    assert "recipe None" not in said.stdout and "server http://127.0.0.1:1" in said.stdout, said.stdout


def test_compare_a_b_reads_as_compare_a_compare_b(tmp_path):
    """`history --compare 1 3`, as a person types it, took 3 as RUN_ID and said `--compare takes two run ids
    (--compare A --compare B), got 1`."""
    _ledger(tmp_path)
    short = cli(tmp_path, "--compare", "1", "3", "--format", "json")
    long = cli(tmp_path, "--compare", "1", "--compare", "3", "--format", "json")
    assert short.returncode == long.returncode == 0, short.stderr
    assert json.loads(short.stdout) == json.loads(long.stdout)
    assert cli(tmp_path, "3", "--compare", "1", "--compare", "2").returncode == EXIT_USAGE  # three ids: still refused
