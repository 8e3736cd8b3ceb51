"""`sparkdoctor matrix list` and `matrix show`: the knowledge base, for people (console) or tools (json).

JSON goes to stdout and nothing else does, so `sparkdoctor matrix list -f json | jq` works.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from sparkdoctor.matrix import CONDITIONS, Entry, Matrix, Stack
from sparkdoctor.render.describe import plural

MATRIX_FORMATS = ("console", "json")
_SEVERITY_STYLE = {"error": "red", "warn": "yellow", "info": "cyan"}
_SEVERITY_ORDER = {"error": 0, "warn": 1, "info": 2}


def _check_format(fmt: str) -> None:
    if fmt not in MATRIX_FORMATS:
        raise ValueError(f"--format {fmt}: choose one of {', '.join(MATRIX_FORMATS)}")


def _write_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def entry_row(e: Entry) -> dict[str, Any]:
    return {"kind": "entry", "id": e.id, "severity": e.severity, "action": e.action, "component": e.component,
            "title": e.title, "withdrawn": e.withdrawn, "file": e.file}


def stack_row(s: Stack) -> dict[str, Any]:
    return {"kind": "stack", "id": s.id, "component": s.component, "title": s.title, "packages": s.packages, "file": s.file}


def item_dict(item: Entry | Stack) -> dict[str, Any]:
    return {"kind": "entry" if isinstance(item, Entry) else "stack", **dataclasses.asdict(item)}


# ---- list -----------------------------------------------------------------------------------------


def list_matrix(matrix: Matrix, fmt: str = "console", console: Console | None = None) -> None:
    _check_format(fmt)
    entries = sorted(matrix.entries, key=lambda e: (e.component, bool(e.withdrawn), _SEVERITY_ORDER.get(e.severity, 9), e.id))
    stacks = sorted(matrix.stacks, key=lambda s: (s.component, s.id))
    if fmt == "json":
        _write_json([entry_row(e) for e in entries] + [stack_row(s) for s in stacks])
        return
    console = console or Console()
    if entries:
        table = Table(box=None, pad_edge=False, header_style="bold dim", title_justify="left")
        table.add_column("id", no_wrap=True)
        table.add_column("severity", no_wrap=True)
        table.add_column("component", no_wrap=True)
        table.add_column("title", overflow="fold", ratio=1)
        for e in entries:
            if e.withdrawn:
                table.add_row(Text(e.id, style="dim"), Text("withdrawn", style="dim"), Text(e.component, style="dim"),
                              Text(e.title, style="dim strike"))
            else:
                table.add_row(e.id, Text(e.severity, style=_SEVERITY_STYLE.get(e.severity, "")), e.component, Text(e.title))
        console.print(Text(f"entries ({len(entries)})", style="bold"))
        console.print(table)
    if stacks:
        if entries:
            console.print()
        table = Table(box=None, pad_edge=False, header_style="bold dim")
        table.add_column("id", no_wrap=True)
        table.add_column("component", no_wrap=True)
        table.add_column("title", overflow="fold", ratio=1)
        for s in stacks:
            table.add_row(s.id, s.component, Text(s.title))
        console.print(Text(f"known-good stacks ({len(stacks)})", style="bold"))
        console.print(table)
    console.print()
    counts = f"{plural(len(entries), 'entry')}, {plural(len(stacks), 'known-good stack')} in {plural(len(matrix.files), 'file')}"
    console.print(Text(f"{counts} · `sparkdoctor matrix show ID` shows one in full", style="dim"))


# ---- show -----------------------------------------------------------------------------------------


def describe_condition(key: str, value: Any) -> str:
    """One `when` condition in words a person reads: `nvidia-cutlass-dsl ==4.5.0`, `CUTE_DSL_ARCH unset`."""
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            if key in ("env",) and v is True:
                parts.append(f"{k} set")
            elif key in ("env",) and v is False:
                parts.append(f"{k} unset")
            elif key in ("env", "ptxas", "kernels", "capabilities"):
                shown = " | ".join(map(str, v)) if isinstance(v, list) else str(v)
                parts.append(f"{k}={shown}")
            elif key == "env_matches":
                parts.append(f"{k} =~ /{v}/")
            elif isinstance(v, list):
                parts.append(f"{k} [{', '.join(map(str, v))}]")
            else:
                parts.append(f"{k} {v}")
        return ", ".join(parts)
    if isinstance(value, list):
        return " | ".join(map(str, value))
    return str(value)


def _rows(console: Console, rows: list[tuple[str, Any]]) -> None:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in rows:
        if value is None or (isinstance(value, str) and not value):
            continue
        grid.add_row(label, value if isinstance(value, (Text, Table)) else Text(str(value)))
    console.print(grid)


def _links(refs: list[str]) -> Text:
    out = Text()
    for i, url in enumerate(refs):
        if i:
            out.append("\n")
        out.append(url, style=f"link {url}")
    return out


def show_item(item: Entry | Stack, fmt: str = "console", console: Console | None = None) -> None:
    _check_format(fmt)
    if fmt == "json":
        _write_json(item_dict(item))
        return
    console = console or Console()
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
    head.append(f" · action: {e.action}", style="dim")
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
        when.add_row(key, line)
    vb = e.verified_by
    verified = f"probe {vb.get('probe')} (expects {vb.get('expect') or 'any result'})" if vb else None
    verify = ", ".join(f"{k}: {v}" for k, v in (e.verify or {}).items()) or None
    _rows(console, [
        ("withdrawn", e.withdrawn),
        ("summary", Text(e.summary)),
        ("when", when),
        ("symptoms", Text("\n".join(e.symptoms)) if e.symptoms else None),
        ("what to do", Text(e.remedy)),
        ("fix", e.fix),
        ("verified by", verified),
        ("verify", verify),
        ("refs", _links(e.refs)),
        ("component", e.component),
        ("file", Text(e.file, style="dim")),
    ])


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
        packages.add_row(name, spec)
    _rows(console, [
        ("packages", packages),
        ("env", Text("\n".join(f"{k}={v}" for k, v in s.env.items())) if s.env else None),
        ("driver", s.driver),
        ("notes", Text(s.notes) if s.notes else None),
        ("refs", _links(s.refs)),
        ("component", s.component),
        ("file", Text(s.file, style="dim")),
    ])
