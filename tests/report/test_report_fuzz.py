"""Report and diff on the fuzz suite's mutated snapshots (tests/fuzz/): any snapshot that Facts.load
accepts must render in both report formats, redacted or not, as text that can be written as UTF-8,
and diff against its base with strict JSON; one that it refuses is the one-line FactsError (exit 2)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings

from sparkdoctor.diff import compare
from sparkdoctor.diff.document import DiffDocument
from sparkdoctor.facts import Facts, FactsError
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from sparkdoctor.report import REPORT_FORMATS, build_bug_report
from sparkdoctor.views import dump
from tests.fuzz.inputs import snapshot_files
from tests.gb10 import gb10_facts

MATRIX = load(None)
BASE = gb10_facts()
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=160, phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck), print_blob=False)


def test_any_loadable_snapshot_reports_and_diffs():
    loaded = []

    @FUZZ
    @given(blob=snapshot_files(max_mutations=1))
    def one(blob):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "s.json"
            path.write_bytes(blob)
            try:
                facts = Facts.load(path)
            except FactsError as exc:
                assert "\n" not in str(exc)
                return
        loaded.append(1)
        report = build_report(facts, MATRIX)
        for fmt in REPORT_FORMATS:
            for redact in (True, False):
                build_bug_report(report, fmt, redact=redact).encode("utf-8")
        doc = json.loads(dump(DiffDocument.of(compare(BASE, facts), ("a", "b"), (BASE, facts)).to_json()),
                         parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(f"not strict JSON: {c}")))
        assert doc["diff_version"] == 1

    one()
    assert len(loaded) >= 30  # the examples reached the renderers, not only the loader
