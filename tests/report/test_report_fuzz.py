"""Report and diff on the fuzz suite's mutated snapshots (tests/fuzz/): any snapshot that Facts.load
accepts must render in both report formats, redacted or not, as text that can be written as UTF-8,
and diff against its base with strict JSON; one that it refuses is the one-line FactsError (exit 2)."""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sparkdoctor.anonymize import redactor_for, shapes
from sparkdoctor.diff.compare import compare
from sparkdoctor.diff.document import DiffDocument
from sparkdoctor.facts import Facts, FactsError
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from sparkdoctor.views import dump
from tests.fuzz.inputs import snapshot_files
from tests.gb10 import gb10_facts
from tests.report.bug_report import REPORT_FORMATS, whole_report

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
                whole_report(report, fmt, redact=redact).encode("utf-8")
        doc = json.loads(dump(DiffDocument.of(compare(BASE, facts), ("a", "b"), (BASE, facts)).to_json()),
                         parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(f"not strict JSON: {c}")))
        assert doc["diff_version"] == 1

    one()
    assert len(loaded) >= 30  # the examples reached the renderers, not only the loader


@FUZZ
@given(words=st.lists(st.text(alphabet="ab.-*", min_size=1, max_size=6), min_size=1, max_size=12),
       text=st.text(alphabet="ab.-* ", max_size=40))
def test_the_learned_names_trie_matches_as_the_longest_first_alternation_did(words, text):
    """The names are matched through a trie now (linear in the names); it finds what the plain longest-first
    alternation found, at the same places."""
    plain = re.compile("|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True)))
    trie = re.compile(shapes.alternation(words))
    assert [m.span() for m in trie.finditer(text)] == [m.span() for m in plain.finditer(text)]


def test_a_word_list_too_deep_for_a_trie_still_matches():
    words = ["a" * n for n in range(1, 400)]
    assert re.compile(shapes.alternation(words)).fullmatch("a" * 399)


def test_redaction_is_not_quadratic_in_the_learned_names():
    """8,000 learned host names and 8,000 learned secrets took 12 s of CPU to redact the strings they came from
    (each name tried at every position); 0.9 s now."""
    errors = [{"collector": "x", "error": f"ssh node-{i}x{i * 7} failed password=s3cr3t{i:06d}"} for i in range(8000)]
    redactor = redactor_for({"errors": errors})
    assert len(redactor.hosts) == len(redactor.secrets) == 8000
    started = time.process_time()
    out = redactor.data({"errors": errors})
    assert time.process_time() - started < 5
    assert "node-" not in str(out) and "s3cr3t" not in str(out)
