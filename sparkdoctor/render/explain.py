"""`sparkdoctor explain` output: each matched entry with the line that showed it, its evidence
level, what to do and its references; or the versioned JSON document (the only thing on stdout)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.markup import escape

from sparkdoctor.render.describe import clip, plural

if TYPE_CHECKING:
    from rich.console import Console

    from sparkdoctor.matrix.symptoms import SymptomMatch

_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def _summary(matches: list[SymptomMatch]) -> dict[str, object]:
    return {
        "matched": len(matches),
        "exact": sum(1 for m in matches if m.how == "exact"),
        "tolerant": sum(1 for m in matches if m.how == "tolerant"),
        "evidence": {lv: sum(1 for m in matches if m.entry.evidence == lv) for lv in ("reproduced", "checked", "reported")},
    }


def explain_json(matches: list[SymptomMatch], source: str, lines: int, schema: int) -> str:
    return json.dumps({"schema": schema, "source": source, "lines": lines, "summary": _summary(matches),
                       "matches": [m.to_dict() for m in matches]}, indent=2)


def render_explain(matches: list[SymptomMatch], source: str, lines: int, console: Console) -> None:
    if not matches:
        console.print(f"No known symptom in {escape(source)} ({plural(lines, 'line')}): no matrix entry explains this text.")
        console.print("[dim]If it is a GB10 problem, `sparkdoctor check` probes the box itself.[/]")
        return
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    for m in matches:
        e = m.entry
        console.print(f"[{_STYLE.get(e.severity, 'bold')}]{e.severity.upper():<5}[/] [bold]{escape(e.id)}[/]  "
                      f"[dim]{escape(e.component)} · {escape(e.action)} · evidence: {escape(e.evidence)}[/]", soft_wrap=True)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, style="dim")
        grid.add_column(overflow="fold")
        grid.add_row("", Text(e.title, style="bold"))
        where = f"line {m.line_no}" if m.line_no else "wrapped text"
        times = f", {m.count} lines" if m.count > 1 else ""
        grid.add_row("seen", Text(f"{where}{times} ({m.how} match): {clip(m.line, 300)}"))
        grid.add_row("what to do", Text(e.remedy))
        if e.fix:
            grid.add_row("fix", Text(f"{e.fix}  (sparkdoctor fix shows the plan)"))
        console.print(Padding(grid, (0, 0, 0, 2)))
        for ref in e.refs:
            console.print(f"  {'ref':<10}  {escape(ref)}", soft_wrap=True, overflow="ignore", crop=False)
        console.print()
    s = _summary(matches)
    levels = ", ".join(f"{n} {lv}" for lv, n in s["evidence"].items() if n)
    console.print(f"{plural(len(matches), 'known problem')} in {escape(source)} ({plural(lines, 'line')}) · "
                  f"{s['exact']} exact, {s['tolerant']} tolerant · evidence: {levels}")
