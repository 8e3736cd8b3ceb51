"""`mods check`'s view: each mod's verdict on the console, or its JSON document (mods/report.py)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from sparkdoctor.mods.model import Verdict
from sparkdoctor.mods.report import ModsReport
from sparkdoctor.result import Format
from sparkdoctor.text import one_line
from sparkdoctor.views import View, drawn

_STYLE = {Verdict.APPLIES: "green", Verdict.ALREADY_APPLIED: "cyan", Verdict.NO_EFFECT: "cyan",
          Verdict.SUPERSEDED: "yellow", Verdict.CANNOT_TELL: "yellow", Verdict.FAILS: "red"}


def render_console(report: ModsReport, console: Console) -> None:
    # names and paths come from the user's files: one line each (a line break in a mod's name printed a verdict line)
    console.print(Text(f"mods judged against {one_line(report.target)}"))
    for mod in report.mods:
        line = Text("  ")
        line.append(f"{mod.verdict.value:<16}", style=_STYLE[mod.verdict])
        line.append(f"{one_line(mod.name)}  ")
        line.append(mod.detail)
        console.print(line)
        for f in mod.files:
            sub = Text("      ")
            sub.append(f"{f.verdict.value:<16}", style=_STYLE[f.verdict])
            sub.append(f"{one_line(f.path or '(the diff)')}  [{one_line(f.source)}]  {f.detail}")
            console.print(sub)
    worst = "a mod fails: the launch would break" if report.exit_code else "no mod breaks the launch"
    console.print(Text(worst, style="red" if report.exit_code else "green"))


VIEW = View(ModsReport, {Format.console: drawn(render_console), Format.json: lambda result, sink: result.data.to_json()})
