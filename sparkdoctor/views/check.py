"""`check`'s report in each of its formats: (result, sink) -> text or document. The drawing modules load when their
format is asked for (check's start-up loads this module and nothing it draws with)."""

from __future__ import annotations

from sparkdoctor.findings import Report
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View


def report_console(result: Result[Report], sink: Sink) -> str:
    from sparkdoctor.views.console import console_text

    return console_text(result.data, sink.console(), result.verbose, ascii_only=sink.ascii_only)


def report_junit(result: Result[Report], sink: Sink) -> str:
    from sparkdoctor.views.junit import render_junit

    return render_junit(result.data) + "\n"


def report_markdown(result: Result[Report], sink: Sink) -> str:
    from sparkdoctor.views.markdown import render_markdown

    return render_markdown(result.data) + "\n"


def report_sarif(result: Result[Report], sink: Sink) -> str:
    from sparkdoctor.views.sarif import render_sarif

    return render_sarif(result.data) + "\n"


VIEW = View(Report, {Format.console: report_console, Format.json: lambda result, sink: result.data.to_dict(),
                     Format.junit: report_junit, Format.markdown: report_markdown, Format.sarif: report_sarif})
