"""`explain`'s view: each matched entry with the line that showed it, its evidence
level, what to do and its references; a line several entries explain is shown once as ambiguous,
with the candidates and what tells them apart; or the versioned JSON document (the only thing on
stdout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from sparkdoctor.describe import clip, plural
from sparkdoctor.matrix.ambiguity import decide_with
from sparkdoctor.matrix.explanation import Explanation, summary, tells_apart
from sparkdoctor.matrix.loader import fix_hint
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View
from sparkdoctor.views.commands import split_commands
from sparkdoctor.views.fitted import with_commands

if TYPE_CHECKING:
    from sparkdoctor.matrix.ambiguity import Ambiguity
    from sparkdoctor.matrix.symptoms import SymptomMatch

_STYLE = {"error": "bold red", "warn": "yellow", "info": "cyan"}


def _render_ambiguous(g: Ambiguity, console: Console) -> None:
    console.print(f"[bold magenta]AMBIGUOUS[/] [bold]line {g.line_no}[/]  [dim]{len(g.candidates)} known causes print this line[/]",
                  soft_wrap=True)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="dim")
    grid.add_column(overflow="fold")
    grid.add_row("seen", Text(clip(g.line, 300)))
    for m in g.candidates:
        e = m.entry
        grid.add_row("candidate", Text(f"{e.id} ({e.severity}, evidence: {e.evidence}): {e.title}"))
        grid.add_row("  when", Text("; ".join(tells_apart(e)) or "(no condition beyond the GPU arch)"))
    grid.add_row("decide", Text(f"run `{decide_with(g)}`: it evaluates these conditions and names the one that holds"))
    console.print(Padding(grid, (0, 0, 0, 2)))
    console.print()


def render_explain(matches: list[SymptomMatch], source: str, lines: int, console: Console, groups: list[Ambiguity] | None = None) -> None:
    if not matches:
        console.print(f"No known symptom in {escape(source)} ({plural(lines, 'line')}): no matrix entry explains this text.")
        console.print("[dim]If it is a GB10 problem, `sparkdoctor check` probes the box itself.[/]")
        return

    groups = groups or []
    for g in groups:
        _render_ambiguous(g, console)
    shared = {i for g in groups for i in g.ids}
    for m in matches:
        if m.entry.id in shared:
            continue
        e = m.entry
        console.print(f"[{_STYLE.get(e.severity, 'bold')}]{e.severity.upper():<5}[/] [bold]{escape(e.id)}[/]  "
                      f"[dim]{escape(e.component)} · {escape(e.action)} · evidence: {escape(e.evidence)}[/]", soft_wrap=True)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, style="dim", min_width=len("what to do"))
        grid.add_column(overflow="fold")
        grid.add_row("", Text(e.title, style="bold"))
        where = f"line {m.line_no}" if m.line_no else "wrapped text"
        times = f", {m.count} lines" if m.count > 1 else ""
        grid.add_row("seen", Text(f"{where}{times} ({m.how} match): {clip(m.line, 300)}"))
        pieces = split_commands(e.remedy)
        apart = any(is_command for _, is_command in pieces)  # each command whole on a line of its own, below
        if not apart:
            grid.add_row("what to do", Text(e.remedy))
        if e.fix and not apart:
            grid.add_row("fix", Text(f"{e.fix}  ({fix_hint(e.fix)})"))
        console.print(Padding(grid, (0, 0, 0, 2)))
        if apart:
            with_commands(console, 2, Text("what to do", style="dim"), [(Text(p), c) for p, c in pieces], len("what to do"))
            if e.fix:
                with_commands(console, 2, Text("fix", style="dim"), [(Text(f"{e.fix}  ({fix_hint(e.fix)})"), False)], len("what to do"))
        for ref in e.refs:
            console.print(f"  {'ref':<10}  {escape(ref)}", soft_wrap=True, overflow="ignore", crop=False)
        console.print()
    s = summary(matches, groups)
    levels = ", ".join(f"{n} {lv}" for lv, n in s["evidence"].items() if n)
    amb = f", {plural(len(groups), 'ambiguous line')}" if groups else ""
    console.print(f"{plural(len(matches), 'known problem')} in {escape(source)} ({plural(lines, 'line')}) · "
                  f"{s['exact']} exact, {s['tolerant']} tolerant{amb} · evidence: {levels}")


def _console(result: Result[Explanation], sink: Sink) -> str:
    e = result.data
    return sink.capture(lambda console: render_explain(e.matches, e.source, e.lines, console, e.groups))


VIEW = View(Explanation, {Format.console: _console, Format.json: lambda result, sink: result.data.to_json()})
