"""`mods check`'s view: each mod's verdict on the console (mods/report.py draws it), or its JSON document."""

from __future__ import annotations

from sparkdoctor.mods.report import ModsReport, render_console
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View


def _console(result: Result[ModsReport], sink: Sink) -> str:
    return sink.capture(lambda console: render_console(result.data, console))


VIEW = View(ModsReport, {Format.console: _console, Format.json: lambda result, sink: result.data.to_json()})
