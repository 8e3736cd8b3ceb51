"""The bug report as `sparkdoctor report` makes it (the BugReport its view draws, sparkdoctor/report/posted.py), whole:
the posted text, or, when that had to be shortened to fit, the whole report the command writes beside it."""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.findings import Report
from sparkdoctor.report.posted import BugReport
from sparkdoctor.views.bug_report import VIEW

REPORT_FORMATS = tuple(f.value for f in VIEW.formats)  # what `sparkdoctor report --format` draws: github, forum


def whole_report(report: Report, fmt: str, redact: bool = True) -> str:
    posted = BugReport(report, Path("report.full.md"), redact=redact)
    text = posted.text(fmt)
    return text if posted.whole is None else posted.whole
