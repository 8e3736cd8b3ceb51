"""`check`'s report in its document formats, drawn by its view (sparkdoctor/views/check.py) as `check --format`
writes them: the tests that render a report without the command line call these."""

from __future__ import annotations

from sparkdoctor.findings import Report
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import render
from sparkdoctor.views.check import VIEW

FORMATS = tuple(f.value for f in VIEW.formats)


def render_text(report: Report, fmt: str) -> str:
    return render(Result("check", "report", report, exit_code=report.exit_code()), Format(fmt), Sink(to_file=True))
