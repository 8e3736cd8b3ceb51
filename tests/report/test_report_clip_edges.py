"""A fact longer than a line shows is clipped (`… (N chars)`): an address, e-mail or host name the clip cuts in two
must not survive as its first part. `check --format markdown` clipped first and redacted the line after, so
`192.168.100.…` (no longer an address), `58:1b:2c:3d:4…` and `jane.doe@example.…` were printed as found."""

from __future__ import annotations

import re

import pytest

from sparkdoctor.describe import FACT_CHARS
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from sparkdoctor.views.markdown import render_markdown
from tests.gb10 import gb10_facts
from tests.report.bug_report import REPORT_FORMATS, whole_report

MATRIX = load(None)
PLANTED = {"ip": "192.168.100.77", "mac": "58:1b:2c:3d:4e:5f", "email": "jane.doe@example.org"}
SHOWN = {"ip": "192.168.100", "mac": "58:1b:2c:3d", "email": "jane.doe"}  # what a cut one gave away


@pytest.mark.parametrize("kind", list(PLANTED))
@pytest.mark.parametrize("fmt", [*REPORT_FORMATS, "check-markdown"])
def test_a_value_cut_by_the_clip_is_redacted_whole_first(kind, fmt):
    value = PLANTED[kind]
    cut_at = len(value) - 3  # the clip falls three characters before its end
    error = "x" * (FACT_CHARS - cut_at - 1) + " " + value + " tail " + "y" * 200
    report = build_report(gb10_facts(packages={"triton": "3.5.1"}, errors=[{"collector": "gpu", "error": error}]), MATRIX)
    text = render_markdown(report) if fmt == "check-markdown" else whole_report(report, fmt, redact=True)
    text = re.sub(r"\\(.)", r"\1", text)  # as GitHub shows the markdown
    assert SHOWN[kind] not in text
    if fmt != "check-markdown":
        assert SHOWN[kind] in whole_report(report, fmt, redact=False)  # planted where the report shows it


def test_a_findings_evidence_cut_by_the_clip_is_redacted_whole_first():
    """A failed kernel probe's finding quotes the probe's detail: the evidence line is clipped as a fact is, and the
    finding was made from the facts before they were redacted."""
    ip = PLANTED["ip"]

    def report_with(pad: int):
        facts = gb10_facts(packages={"triton": "3.5.1"})
        facts.kernels["e2m1-cvt"] = {"kind": "ptx", "status": "fail", "arch": "sm_121a",
                                     "detail": "x" * pad + " " + ip + " tail " + "y" * 300, "runs": []}
        report = build_report(facts, MATRIX)
        return report, next(e for f in report.findings for e in f.evidence if ip in e)

    _, evidence = report_with(400)
    report, evidence = report_with(400 + FACT_CHARS - (len(ip) - 3) - evidence.index(ip))  # the clip cuts its last 3
    assert evidence.index(ip) + len(ip) - 3 == FACT_CHARS
    assert SHOWN["ip"] not in re.sub(r"\\(.)", r"\1", render_markdown(report))
