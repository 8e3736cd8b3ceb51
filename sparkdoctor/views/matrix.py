"""`sparkdoctor matrix list` and `matrix show`: the knowledge base, for people (console) or tools (json).

The console is drawn here; the JSON is the rows `sorted_rows()` and `item_dict()` give, so
`sparkdoctor matrix list -f json | jq` works. `matrix validate`'s view is here too.
"""

from __future__ import annotations

import dataclasses
import json

from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.style import Style
from rich.table import Table
from rich.text import Text

from sparkdoctor.describe import plural
from sparkdoctor.matrix import (
    CONDITIONS,
    EVIDENCE_LEVELS,
    Entry,
    Matrix,
    MatrixError,
    Stack,
)
from sparkdoctor.matrix.consistency import Validation
from sparkdoctor.matrix.explanation import describe_condition
from sparkdoctor.matrix.file_checks import parse_files_tables
from sparkdoctor.matrix.verify_table import parse_verify_table
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View, drawn
from sparkdoctor.views.commands import split_commands
from sparkdoctor.views.fitted import plain_lines, with_commands

_SEVERITY_STYLE = {"error": "red", "warn": "yellow", "info": "cyan"}
_SEVERITY_ORDER = {"error": 0, "warn": 1, "info": 2}
TITLE_MIN = 40  # narrower than this, a title column reads a word per line: titles go under the row


def entry_row(e: Entry) -> dict[str, object]:
    return {"kind": "entry", "id": e.id, "severity": e.severity, "action": e.action, "evidence": e.evidence, "component": e.component,
            "title": e.title, "withdrawn": e.withdrawn, "file": e.file}


def stack_row(s: Stack) -> dict[str, object]:
    return {"kind": "stack", "id": s.id, "component": s.component, "title": s.title, "packages": s.packages, "file": s.file}


def item_dict(item: Entry | Stack) -> dict[str, object]:
    return {"kind": "entry" if isinstance(item, Entry) else "stack", **dataclasses.asdict(item)}


# ---- list -----------------------------------------------------------------------------------------


def _sorted(matrix: Matrix) -> tuple[list[Entry], list[Stack]]:
    entries = sorted(matrix.entries, key=lambda e: (e.component, bool(e.withdrawn), _SEVERITY_ORDER.get(e.severity, 9), e.id))
    return entries, sorted(matrix.stacks, key=lambda s: (s.component, s.id))


def sorted_rows(matrix: Matrix) -> list[dict[str, object]]:
    """`matrix list --format json`: every entry, then every stack, in the console's order."""
    entries, stacks = _sorted(matrix)
    return [entry_row(e) for e in entries] + [stack_row(s) for s in stacks]


def list_matrix(matrix: Matrix, console: Console) -> None:
    entries, stacks = _sorted(matrix)
    if entries:
        rows = [_entry_cells(e) for e in entries]
        console.print(Text(f"entries ({len(entries)})", style="bold"))
        _print_rows(console, ["id", "severity", "evidence", "component"], rows)
    if stacks:
        if entries:
            console.print()
        rows = [[Text(s.id), Text(s.component), Text(s.title)] for s in stacks]
        console.print(Text(f"known-good stacks ({len(stacks)})", style="bold"))
        _print_rows(console, ["id", "component"], rows)
    console.print()
    counts = f"{plural(len(entries), 'entry')}, {plural(len(stacks), 'known-good stack')} in {plural(len(matrix.files), 'file')}"
    if entries:
        counts += " (" + ", ".join(f"{sum(1 for e in entries if e.evidence == lv)} {lv}" for lv in EVIDENCE_LEVELS) + ")"
    console.print(Text(f"{counts} · `sparkdoctor matrix show ID` shows one in full", style="dim"))


def _entry_cells(e: Entry) -> list[Text]:
    if e.withdrawn:
        return [Text(e.id, style="dim"), Text("withdrawn", style="dim"), Text(e.evidence, style="dim"), Text(e.component, style="dim"), Text(e.title, style="dim strike")]
    return [Text(e.id), Text(e.severity, style=_SEVERITY_STYLE.get(e.severity, "")), Text(e.evidence), Text(e.component), Text(e.title)]


def _print_rows(console: Console, heads: list[str], rows: list[list[Text]]) -> None:
    """One row per item with the title beside it where the width allows a readable title column
    (TITLE_MIN), else the short columns on one line and the title wrapped under them."""
    widths = [max(len(head), *(len(r[i].plain) for r in rows)) for i, head in enumerate(heads)]
    if sum(widths) + 2 * len(heads) + TITLE_MIN <= console.width:
        table = Table(box=None, pad_edge=False, header_style="bold dim")
        for head in heads:
            table.add_column(head, no_wrap=True)
        table.add_column("title", ratio=1)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    aligned = sum(widths) + 2 * (len(heads) - 1) <= console.width
    for row in rows:
        line = Text()
        for i, cell in enumerate(row[:-1]):
            if i:
                line.append("  ")
            line.append_text(cell)
            if aligned and i < len(row) - 2:
                line.append(" " * (widths[i] - len(cell.plain)))
        console.print(line, no_wrap=True, overflow="ignore", crop=False)
        console.print(Padding(row[-1], (0, 0, 0, 4), expand=False))


# ---- show -----------------------------------------------------------------------------------------


_LABEL = len("verified by")


def _rows(console: Console, rows: list[tuple[str, object]]) -> None:
    """Label / value rows; a value that is None or an empty string is left out. A remedy's shell commands (a str value
    of "what to do") each go on a line of their own in the value column, whole (sparkdoctor/views/commands.py)."""
    rows = [(label, value) for label, value in rows if not (value is None or (isinstance(value, str) and not value))]
    width = max([_LABEL, *(len(label) for label, _ in rows)])
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True, min_width=width)
    grid.add_column(overflow="fold")
    for i, (label, value) in enumerate(rows):
        pieces = split_commands(value) if label == "what to do" and isinstance(value, str) else []
        if any(is_command for _, is_command in pieces):
            console.print(grid)
            with_commands(console, 0, Text(label, style="dim"), [(Text(p), c) for p, c in pieces], width)
            _rows(console, rows[i + 1:])
            return
        grid.add_row(label, value if isinstance(value, (Text, Table)) else Text(str(value)))
    console.print(grid)


def _verify_steps(e: Entry) -> Table | Text | None:
    """The verify table as the installs a person would type: numbered environments, each with its
    pip steps in order and the arch its probe is compiled for."""
    if not e.verify:
        return None
    try:
        table = parse_verify_table(e.verify, e.id)
    except MatrixError:  # an Entry made by hand; the loader never lets one through
        return Text(json.dumps(e.verify))
    expect = (e.verified_by or {}).get("expect", "its result")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True, style="dim")
    grid.add_column(overflow="fold")
    for role, envs in (("affected", table.affected), ("fixed", table.fixed)):
        if envs:
            grid.add_row(Text(role), "", Text(f"(the probe must {'' if role == 'affected' else 'not '}give {expect})", style="dim"))
        for n, env in enumerate(envs, 1):
            for i, step in enumerate(env.steps):
                grid.add_row(f"  {n}." if i == 0 else "", Text(env.arch) if i == 0 else "then", Text(f"pip install {' '.join(step)}"))
    return grid


def _file_checks(e: Entry) -> Text | None:
    """The `files` tables as what is read: the package, its versions by role, each check."""
    if not e.files:
        return None
    try:
        tables = parse_files_tables(e.files, e.id)
    except MatrixError:  # an Entry made by hand; the loader never lets one through
        return Text(json.dumps(e.files))
    lines = []
    for table in tables:
        lines.append(f"{table.package} {table.dist}s: affected {', '.join(table.affected)}" + (f"; fixed {', '.join(table.fixed)}" if table.fixed else ""))
        for c in table.checks:
            on_fixed = {"differs": "", "same": " (fixed too)", "unchecked": " (fixed: not checked)"}[c.fixed]
            lines.append(f"  {c.label}{on_fixed}")
    return Text("\n".join(lines))


def _last_verified(e: Entry) -> str | None:
    lv = e.last_verified or {}
    return f"{lv['date']}: {lv.get('versions', '')}".rstrip(": ") if lv.get("date") else None


def _print_unbroken(console: Console, label: str, lines: list[str], style: str = "") -> None:
    """URLs and paths on lines of their own, never folded: a broken URL is not a link any more."""
    for i, line in enumerate(lines):
        text = Text(f"{label if i == 0 else '':<{_LABEL}}  ", style="dim")
        # a Style object: a URL is never parsed as style words (`https://x not` would not parse)
        text.append(line, style=Style.parse(style) + Style(link=line) if line.startswith("http") else style)
        console.print(text, no_wrap=True, overflow="ignore", crop=False)


def show_item(item: Entry | Stack, console: Console) -> None:
    if isinstance(item, Entry):
        _show_entry(item, console)
    else:
        _show_stack(item, console)


def _show_entry(e: Entry, console: Console) -> None:
    head = Text(e.id, style="bold")
    if e.withdrawn:
        head.append("  withdrawn", style="bold dim")
    else:
        head.append(f"  {e.severity}", style=f"bold {_SEVERITY_STYLE.get(e.severity, '')}")
    head.append(f" · action: {e.action} · evidence: {e.evidence}", style="dim")
    console.print(head)
    console.print(Text(e.title, style="bold"))
    console.print()
    when = Table.grid(padding=(0, 2))
    when.add_column(no_wrap=True)
    when.add_column(overflow="fold")
    for key, value in e.when.items():
        cond = CONDITIONS.get(key)
        line = Text(describe_condition(key, value))
        if cond:
            line.append(f"  ({cond.doc})", style="dim")
        when.add_row(Text(str(key)), line)
    vb = e.verified_by
    verified = f"probe {vb.get('probe')} (expects {vb.get('expect') or 'any result'})" if vb else None
    _rows(console, [
        ("withdrawn", e.withdrawn),
        ("summary", Text(e.summary)),
        ("when", when),
        ("symptoms", "\n".join(e.symptoms)),
        ("what to do", e.remedy),
        ("shown to work", e.remedy_shown),
        ("fix", e.fix),
        ("verified by", verified),
        ("verify", _verify_steps(e)),
        ("file checks", _file_checks(e)),
        ("unbracketable", e.unbracketable),
        ("reference only", e.reference_only),
        ("selected by", ", ".join(e.selected_by)),
        ("reported", Text(f"{e.reported or '?'}, in the matrix {e.added}") if e.added else None),
        ("last verified", _last_verified(e)),
        ("component", e.component),
    ])
    _print_unbroken(console, "refs", e.refs)
    _print_unbroken(console, "file", [e.file], style="dim")


def _show_stack(s: Stack, console: Console) -> None:
    head = Text(s.id, style="bold")
    head.append("  known-good stack", style="bold green")
    console.print(head)
    console.print(Text(s.title, style="bold"))
    console.print()
    packages = Table.grid(padding=(0, 2))
    packages.add_column(no_wrap=True)
    packages.add_column()
    for name, spec in s.packages.items():
        packages.add_row(Text(str(name)), Text(str(spec)))
    _rows(console, [
        ("packages", packages),
        ("env", "\n".join(f"{k}={v}" for k, v in s.env.items())),
        ("driver", s.driver),
        ("notes", s.notes),
        ("component", s.component),
    ])
    _print_unbroken(console, "refs", s.refs)
    _print_unbroken(console, "file", [s.file], style="dim")


# ---- the views of matrix list | show | validate -----------------------------------------------------------
def _validate_console(result: Result[Validation], sink: Sink) -> str:
    d = result.data
    levels = ", ".join(f"{n} {lv}" for lv, n in d.evidence.items())
    if d.problems:
        more = f"{d.unlisted}\n" if d.unlisted else ""
        return ("".join(f"problem: {p}\n" for p in d.problems) + more
                + f"{plural(len(d.problems), 'problem')} across entries{' listed, and more' if d.unlisted else ''}\n")
    delay = d.report_delay or {}
    parts = [f"ok: {plural(d.entries, 'entry')}, {plural(d.stacks, 'known-good stack')} in {plural(d.files, 'file')}",
             f"evidence: {levels}"]
    if delay.get("entries"):
        parts.append(f"report to entry: median {delay['median_days']} days over {plural(delay['entries'], 'entry')}")
    parts += [f"matrix: {d.matrix}"] if d.matrix else []
    line = " · ".join(parts)
    if not sink.at_terminal():  # a pipe or a file: one line, as scripts read it
        return line + "\n"
    # at a terminal one line where it fits, else a part a line, each wrapped under its text (the line was 169 columns)
    return sink.capture(lambda console: plain_lines(console, [line] if cell_len(line) <= console.width else parts),
                        highlight=False)


LIST = View(Matrix, {Format.console: drawn(list_matrix),
                     # a bare array (as it always was: `jq '.[]'` keeps working); the one document without the header
                     Format.json: lambda result, sink: sorted_rows(result.data)})


def _item_json(result: Result[Entry] | Result[Stack], sink: Sink) -> dict[str, object]:
    return item_dict(result.data)


View(Entry, {Format.console: drawn(show_item), Format.json: _item_json})
View(Stack, {Format.console: drawn(show_item), Format.json: _item_json})
View(Validation, {Format.console: _validate_console, Format.json: lambda result, sink: result.data.to_json()})
FORMATS = LIST.formats
"""list, show and validate render the same formats."""
