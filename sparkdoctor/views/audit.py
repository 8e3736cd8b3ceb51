"""`audit`'s view: the checkpoint's fit on the console (audit/report.py draws it), or its JSON document."""

from __future__ import annotations

from sparkdoctor.audit.report import audit_to_dict, render_console
from sparkdoctor.audit.roofline import Audit
from sparkdoctor.result import Format
from sparkdoctor.views import View

VIEW = View(Audit, {
    Format.console: lambda result, sink: sink.capture(lambda console: render_console(result.data, console),
                                                      width=None if sink.to_file else 140),
    Format.json: lambda result, sink: audit_to_dict(result.data)})
