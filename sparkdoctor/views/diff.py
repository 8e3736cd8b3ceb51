"""`diff`'s view: the differences as a person reads them (console, risky first), or the JSON document
(sparkdoctor/diff/document.py)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from sparkdoctor.diff.document import DiffDocument
from sparkdoctor.diff.rules import RISKY
from sparkdoctor.result import Format
from sparkdoctor.views import View


def draw(doc: DiffDocument, console: Console) -> None:
    comparison = doc.comparison
    for label, side in (("A", doc.a), ("B", doc.b)):
        console.print(f"{label}  {escape(side.file)}  ({escape(str(side.target))}, taken {escape(str(side.taken_at))}, "
                      f"fingerprint {escape(str(side.fingerprint))})")
    console.print()
    ordered = comparison.risky + comparison.benign
    for d in ordered:
        mark, style = ("✖ risky ", "bold red") if d.verdict == RISKY else ("· benign", "dim")
        va = "(absent)" if d.a is None else d.a
        vb = "(absent)" if d.b is None else d.b
        console.print(f"[{style}]{mark}[/]  {escape(d.area)}  [bold]{escape(d.key)}[/]  {escape(va)} → {escape(vb)}")
        console.print(f"           [dim]{escape(d.why)}[/]")
    for item in comparison.not_compared:
        console.print(f"[yellow]? unknown[/]  {escape(item['area'])}: {escape(item['why'])}, not compared")
    if ordered or comparison.not_compared:
        console.print()
    line = {
        "risky": f"[bold red]{len(comparison.risky)} risky[/], {len(comparison.benign)} benign: "
                 "these two must not serve one multi-node run as they are (exit 1)",
        "benign": f"0 risky, {len(comparison.benign)} benign: safe to run together (exit 0)",
        "same": "no differences in what both snapshots observed (exit 0)",
    }[doc.verdict]
    if comparison.not_compared:
        line += f"; {len(comparison.not_compared)} field(s) observed on one side only"
    console.print(line)


VIEW = View(DiffDocument, {
    Format.console: lambda result, sink: sink.capture(lambda console: draw(result.data, console), soft_wrap=True,
                                                      highlight=False),
    Format.json: lambda result, sink: result.data.to_json()})
