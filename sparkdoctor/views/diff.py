"""`diff`'s view: the differences as a person reads them (console, risky first), or the JSON document
(sparkdoctor/diff/document.py)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from sparkdoctor.describe import FACT_CHARS, clip
from sparkdoctor.diff.document import DiffDocument
from sparkdoctor.diff.rules import RISKY
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.text import one_line
from sparkdoctor.views import View
from sparkdoctor.views.fitted import grid, hanging

SHOWN = 200  # differences the console lists (risky first); the JSON has every one


def _text(value: object) -> str:
    """A snapshot's string on one line, never markup: a line break in an env value or a key must not print a line
    of its own (`0 risky ... (exit 0)` forged under a risky verdict), an ESC sequence prints as `\\x1b`."""
    return escape(one_line(clip(value, FACT_CHARS)))


def draw(doc: DiffDocument, console: Console, fitted: bool = False) -> None:
    """The differences, one line each (a pipe, a file: whole, however long), or `fitted` to a terminal: each item
    wrapped under its own text (sparkdoctor/views/fitted.py)."""
    comparison = doc.comparison
    for label, side in (("A", doc.a), ("B", doc.b)):
        text = (f"{_text(side.file)}  ({_text(side.target)}, taken {_text(side.taken_at or 'unknown')}, "
                f"fingerprint {_text(side.fingerprint)})")
        if fitted:
            hanging(console, label, Text.from_markup(text))
        else:
            console.print(f"{label}  {text}")
    console.print()
    ordered = comparison.risky + comparison.benign
    rows: list[tuple[Text | str, Text | str]] = []
    for d in ordered[:SHOWN]:
        mark, style = ("✖ risky ", "bold red") if d.verdict == RISKY else ("· benign", "dim")
        va = "(absent)" if d.a is None else d.a
        vb = "(absent)" if d.b is None else d.b
        what = f"{_text(d.area)}  [bold]{_text(d.key)}[/]  {_text(va)} → {_text(vb)}"
        if fitted:
            rows += [(Text(mark, style=style), Text.from_markup(what)), ("", Text.from_markup(f"[dim]{_text(d.why)}[/]"))]
        else:
            console.print(f"[{style}]{mark}[/]  {what}")
            console.print(f"           [dim]{_text(d.why)}[/]")
    if rows:
        console.print(grid(rows))
    if len(ordered) > SHOWN:
        console.print(f"… and {len(ordered) - SHOWN:,} more (--format json lists every one)")
    for item in comparison.not_compared:
        what = f"{_text(item['area'])}: {_text(item['why'])}, not compared"
        if fitted:
            hanging(console, Text("? unknown", style="yellow"), Text.from_markup(what))
        else:
            console.print(f"[yellow]? unknown[/]  {what}")
    if ordered or comparison.not_compared:
        console.print()
    line = {
        "risky": f"[bold red]{len(comparison.risky)} risky[/], {len(comparison.benign)} benign: "
                 "these two must not serve one multi-node run as they are (exit 1)",
        "benign": f"0 risky, {len(comparison.benign)} benign: safe to run together (exit 0)",
        "same": "no differences in what both snapshots observed (exit 0)",
    }[doc.verdict]
    if comparison.not_compared:
        line += f"; {len(comparison.not_compared)} field(s) not compared (listed above)"
    console.print(line)


def _console(result: Result[DiffDocument], sink: Sink) -> str:
    if sink.at_terminal():  # fitted to the terminal's width, each difference wrapped under its text
        return sink.capture(lambda console: draw(result.data, console, fitted=True), highlight=False)
    # a pipe or a file: one line per difference, however long (scripts read them)
    return sink.capture(lambda console: draw(result.data, console), soft_wrap=True, highlight=False)


VIEW = View(DiffDocument, {
    Format.console: _console,
    Format.json: lambda result, sink: result.data.to_json()})
