"""`diff`'s view: the differences as a person reads them (console, risky first), or the JSON document
(sparkdoctor/diff/document.py)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from sparkdoctor.describe import FACT_CHARS, clip
from sparkdoctor.diff.document import DiffDocument
from sparkdoctor.diff.rules import RISKY
from sparkdoctor.result import Format
from sparkdoctor.text import one_line
from sparkdoctor.views import View

SHOWN = 200  # differences the console lists (risky first); the JSON has every one


def _text(value: object) -> str:
    """A snapshot's string on one line, never markup: a line break in an env value or a key must not print a line
    of its own (`0 risky ... (exit 0)` forged under a risky verdict), an ESC sequence prints as `\\x1b`."""
    return escape(one_line(clip(value, FACT_CHARS)))


def draw(doc: DiffDocument, console: Console) -> None:
    comparison = doc.comparison
    for label, side in (("A", doc.a), ("B", doc.b)):
        console.print(f"{label}  {_text(side.file)}  ({_text(side.target)}, taken {_text(side.taken_at or 'unknown')}, "
                      f"fingerprint {_text(side.fingerprint)})")
    console.print()
    ordered = comparison.risky + comparison.benign
    for d in ordered[:SHOWN]:
        mark, style = ("✖ risky ", "bold red") if d.verdict == RISKY else ("· benign", "dim")
        va = "(absent)" if d.a is None else d.a
        vb = "(absent)" if d.b is None else d.b
        console.print(f"[{style}]{mark}[/]  {_text(d.area)}  [bold]{_text(d.key)}[/]  {_text(va)} → {_text(vb)}")
        console.print(f"           [dim]{_text(d.why)}[/]")
    if len(ordered) > SHOWN:
        console.print(f"… and {len(ordered) - SHOWN:,} more (--format json lists every one)")
    for item in comparison.not_compared:
        console.print(f"[yellow]? unknown[/]  {_text(item['area'])}: {_text(item['why'])}, not compared")
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


VIEW = View(DiffDocument, {
    Format.console: lambda result, sink: sink.capture(lambda console: draw(result.data, console), soft_wrap=True,
                                                      highlight=False),
    Format.json: lambda result, sink: result.data.to_json()})
