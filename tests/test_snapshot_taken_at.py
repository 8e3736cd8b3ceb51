"""A snapshot that does not say when it was taken (no `taken_at`, or null) is shown as taken at an unknown time by
diff, check, report and the JSON documents, never as the moment it was read (a time nobody took)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkdoctor.facts import Facts
from tests.inproc import invoke

SNAPSHOT = Path(__file__).resolve().parent / "data" / "facts" / "nogpu-clean.json"
TAKEN = "2026-11-21T17:02:44+00:00"


@pytest.fixture(params=["missing", "null"])
def undated(request, tmp_path) -> Path:
    data = json.loads(SNAPSHOT.read_text())
    if request.param == "missing":
        del data["taken_at"]
    else:
        data["taken_at"] = None
    path = tmp_path / "undated.json"
    path.write_text(json.dumps(data))
    return path


def test_from_dict_keeps_a_missing_time_unknown(undated):
    facts = Facts.from_dict(json.loads(undated.read_text()))
    assert facts.taken_at is None and facts.taken() == "unknown"
    assert Facts.from_dict(json.loads(SNAPSHOT.read_text())).taken_at == TAKEN
    assert Facts().taken_at  # a live snapshot is taken now


def test_diff_shows_the_time_as_unknown(undated, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    code, out, err = invoke("diff", SNAPSHOT, undated)
    assert code == 0, err
    a, b = out.splitlines()[:2]
    assert f"taken {TAKEN}," in a and "taken unknown," in b
    code, out, err = invoke("diff", SNAPSHOT, undated, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["a"]["taken_at"] == TAKEN and doc["b"]["taken_at"] is None


def test_check_and_report_show_the_time_as_unknown(undated):
    code, out, err = invoke("check", "--facts", undated)
    assert code in (0, 1) and not err, err
    assert out.splitlines()[0].endswith("  unknown")
    code, out, err = invoke("check", "--facts", undated, "--format", "json")
    assert json.loads(out)["facts"]["taken_at"] is None
    code, out, err = invoke("report", "--facts", undated)
    assert code in (0, 1) and "taken unknown" in out, err
