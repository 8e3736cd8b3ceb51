"""`audit`'s view: the checkpoint's fit on the console (audit/report.py draws it), or its JSON document."""

from __future__ import annotations

from sparkdoctor.audit.report import audit_to_dict, render_console
from sparkdoctor.audit.roofline import Audit
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View


def _console(result: Result[Audit], sink: Sink) -> str:
    return sink.capture(lambda console: render_console(result.data, console), width=None if sink.to_file else 140)


VIEW = View(Audit, {Format.console: _console, Format.json: lambda result, sink: audit_to_dict(result.data)})
