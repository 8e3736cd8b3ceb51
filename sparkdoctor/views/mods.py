"""`mods check`'s view: each mod's verdict on the console (mods/report.py draws it), or its JSON document."""

from __future__ import annotations

from sparkdoctor.mods.report import ModsReport, render_console
from sparkdoctor.result import Format
from sparkdoctor.views import View

VIEW = View(ModsReport, {Format.console: lambda result, sink: sink.capture(lambda console: render_console(result.data, console)),
                     Format.json: lambda result, sink: result.data.to_json()})
