"""`history --import` of a run `bench` kept: an A/B arm is bound to its comparison only when that comparison is the
one it was measured in, never to another A/B that has the same id in the ledger it is imported into."""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.commands.history import HistoryCommand, run
from sparkdoctor.ledger import Ledger, unstored
from tests.ledger.test_ledger import record


def keep(monkeypatch, tmp_path: Path, **kw: object) -> Path:
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    return unstored.keep(record(**kw))


def test_an_arm_kept_from_another_ledger_is_not_bound_to_an_unrelated_comparison_of_the_same_id(monkeypatch, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    with Ledger(ledger) as led:  # this ledger's A/B 1: recipes p and q
        comparison = led.begin_comparison("p", "q")
        led.add_run(record(name="p", comparison_id=comparison, arm="A"))
    # an arm of the A/B "tiny vs tiny-b" that was comparison 1 of ANOTHER ledger, kept when that one was busy
    kept = keep(monkeypatch, tmp_path, name="tiny", comparison_id=1, arm="A", created_at="2026-11-30T10:00:00+00:00")
    doc = run(HistoryCommand(import_file=str(kept), ledger=ledger)).data
    with Ledger(ledger) as led:
        assert led.run(doc.run_id)["comparison_id"] is None
        assert led.comparison(comparison)["runs"] == [1], "a foreign arm joined this ledger's A/B"


def test_an_arm_kept_from_its_own_comparison_keeps_it(monkeypatch, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    with Ledger(ledger) as led:
        comparison = led.begin_comparison("tiny (a.toml)", "tiny (b.toml)")
        led.add_run(record(name="tiny", comparison_id=comparison, arm="A"))
    kept = keep(monkeypatch, tmp_path, name="tiny", comparison_id=comparison, arm="B")
    doc = run(HistoryCommand(import_file=str(kept), ledger=ledger)).data
    with Ledger(ledger) as led:
        assert led.run(doc.run_id)["comparison_id"] == comparison
        assert led.comparison(comparison)["runs"] == [1, doc.run_id]


def test_a_kept_run_imported_twice_is_stored_once(monkeypatch, tmp_path):
    """The file could not be removed after the first import (or two imports ran at once): the second stored the
    same run again, and every listing and comparison counted it twice."""
    import shutil

    ledger = tmp_path / "ledger.sqlite"
    Ledger(ledger).close()  # bench made it; an import never creates one
    kept = keep(monkeypatch, tmp_path, name="tiny")
    copy = tmp_path / "copy.json"
    shutil.copy(kept, copy)
    first = run(HistoryCommand(import_file=str(kept), ledger=ledger)).data
    second = run(HistoryCommand(import_file=str(copy), ledger=ledger)).data
    assert (first.run_id, first.already) == (1, False) and (second.run_id, second.already) == (1, True)
    assert not copy.exists()
    with Ledger(ledger) as led:
        assert [r["id"] for r in led.runs()] == [1] and led.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 3
    other = keep(monkeypatch, tmp_path, name="tiny", samples=2)  # another run of the same recipe: stored
    assert run(HistoryCommand(import_file=str(other), ledger=ledger)).data.run_id == 2
