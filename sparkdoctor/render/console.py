"""The console report, for people: what was probed, what is wrong, what to do, one summary line.

Everything is drawn from the Report. Data from the box and the matrix goes into rich `Text` objects,
never into markup strings, so a title with `[brackets]` prints as written. Colour and links appear
only on a terminal; in a pipe rich drops them and the text stays readable.

The words themselves come from render.describe, shared with the markdown and junit renderers.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from sparkdoctor.facts import is_tracked
from sparkdoctor.findings import EXIT_FINDINGS, EXIT_OK, SEVERITY_RANK
from sparkdoctor.render.describe import (
    SEVERITY_HEADING,
    describe_arch,
    describe_driver,
    describe_gpus,
    describe_host,
    describe_target,
    first_false,
    kernel_rows,
    plural,
    summary_line,
    tracked_stack,
)

SEVERITY_STYLE = {"error": "bold red", "warn": "bold yellow", "info": "bold cyan"}
UNKNOWN_SHOWN = 8  # beyond this, non-verbose output says "and N more (-v)"


class _Glyphs:
    # UTF-8 everywhere that matters: Python coerces the C locale to UTF-8 (PEP 538), and rich turns
    # box characters into ASCII itself where it must.
    bullet = "•"
    yes = "✓"
    no = "✗"
    none = "–"
    sev = {"error": "✖", "warn": "▲", "info": "ℹ"}


def _labelled(rows: list[tuple[str, Any]], label_width: int | None = None) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True, min_width=label_width)
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(label, value if isinstance(value, (Text, Table)) else Text(str(value)))
    return grid


def _pairs(rows: list[tuple[Text, Text]]) -> Table:
    """Two columns; the second wraps under itself, not under the first."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for left, right in rows:
        grid.add_row(left, right)
    return grid


def _link(url: str) -> Text:
    return Text(url, style=f"link {url}")


def _header(report) -> Table:
    facts = report.facts
    rows: list[tuple[str, Any]] = [
        ("target", describe_target(facts)),
        ("host", describe_host(facts)),
        ("GPU", describe_gpus(facts)),
        ("arch", describe_arch(facts)),
        ("driver", describe_driver(facts)),
    ]
    if facts.packages is None:
        rows.append(("stack", Text("unknown (packages not observed)", style="yellow")))
    else:
        stack = Text()
        for i, (name, desc) in enumerate(tracked_stack(facts)):
            if i:
                stack.append(" · ", style="dim")
            stack.append(name + " ", style="bold" if desc != "not installed" else "dim")
            stack.append(desc, style="dim" if desc == "not installed" else "")
        rows.append(("stack", stack))
    rows.append(("fingerprint", Text(facts.fingerprint(), style="dim")))
    return _labelled(rows, label_width=11)


def _finding(f, g: _Glyphs, verbose: bool) -> Group:
    head = Text()
    head.append(f"{g.sev[f.severity]} {f.id}", style=SEVERITY_STYLE[f.severity])
    head.append(f"  {f.component} · {f.action}", style="dim")
    parts: list[Any] = [head, Padding(Text(f.title, style="bold"), (0, 0, 0, 2))]
    rows: list[tuple[str, Any]] = []
    if verbose and f.summary:
        rows.append(("why", Text(f.summary)))
    if f.evidence:
        rows.append(("evidence", _pairs([(Text(g.bullet), Text(line)) for line in f.evidence])))
    if f.remedy:
        rows.append(("what to do", Text(f.remedy)))
    if f.fix:
        fix = Text(f.fix, style="bold")
        fix.append("  (sparkdoctor fix shows the plan)", style="dim")
        rows.append(("fix", fix))
    if f.refs:
        refs = f.refs if verbose else f.refs[:1]
        ref = Text()
        for i, url in enumerate(refs):
            if i:
                ref.append("\n")
            ref.append_text(_link(url))
        if len(f.refs) > len(refs):
            ref.append(f"  (+{len(f.refs) - len(refs)} more)", style="dim")
        rows.append(("see", ref))
    parts.append(Padding(_labelled(rows, label_width=10), (0, 0, 0, 2)))
    return Group(*parts)


def _kernel_section(facts, g: _Glyphs, verbose: bool) -> Group:
    """Per probe: its status and detail, then one line per (ptxas, arch) run."""

    def mark(label: str, value: Any) -> Text:
        t = Text(f"{label} ")
        if value is True:
            t.append(g.yes, style="green")
        elif value is False:
            t.append(g.no, style="red")
        else:
            t.append(g.none, style="dim")
        return t

    status_style = {"ok": "green", "fail": "red", "crash": "red", "error": "red", "timeout": "red", "refused": "yellow"}
    parts: list[Any] = []
    rows = kernel_rows(facts)
    for row in rows:
        runs = [r for r in rows if r["probe"] == row["probe"] and r["run"]]
        # The common clean case (every ptxas compiled it, nothing could run) is one line unless -v;
        # failures, refusals and real runs always show their per-ptxas lines.
        quiet = not verbose and row["status"] == "ok" and runs and all(r["compiled"] and r.get("ran") is None for r in runs)
        if row["first"]:
            head = Text()
            head.append(row["probe"], style="bold")
            head.append("  ")
            head.append(row["status"], style=status_style.get(row["status"], "dim"))
            if row["kind"]:
                head.append(f" ({row['kind']})", style="dim")
            if quiet:
                arches = sorted({r["arch"] for r in runs if r["arch"]})
                head.append(f"  {', '.join(arches)}: {len(runs)}/{len(runs)} ptxas ", style="dim")
                head.append(g.yes, style="green")
                if any(r.get("sass_ok") for r in runs):
                    head.append("  SASS ", style="dim")
                    head.append(g.yes, style="green")
                note = runs[0]["note"] or ""
                if note:  # "compiled" was just said
                    head.append(f"  {note.removeprefix('compiled, ')}", style="dim")
            parts.append(head)
            if row["detail"] and not quiet:
                parts.append(Padding(Text(row["detail"], style="dim"), (0, 0, 0, 4)))
        if not row["run"] or quiet:
            continue
        line = Text(f"ptxas {row['ptxas']}")
        if row["arch"]:
            line.append(f"  {row['arch']}")
        line.append("  ")
        line.append_text(mark("compiled", row["compiled"]))
        if row["compiled"]:
            for label, key in (("SASS", "sass_ok"), ("ran", "ran"), ("verified", "verified")):
                if row.get(key) is not None:
                    line.append("  ")
                    line.append_text(mark(label, row[key]))
        if row["note"]:
            line.append("  ")
            line.append(row["note"], style="red" if row["compiled"] is False else "dim")
        if verbose and row.get("ms") is not None:
            line.append(f"  {row['ms']} ms{' (cached)' if row.get('cached') else ''}", style="dim")
        parts.append(Padding(line, (0, 0, 0, 4)))
    return Group(*parts)


def _section(console: Console, title: str, count: int | None = None) -> None:
    console.print()
    console.print(Text(title + (f" ({count})" if count is not None else ""), style="bold"))


def render_console(report, console: Console, verbose: bool = False) -> None:
    facts = report.facts
    g = _Glyphs()
    tool = facts.tool or {}
    title = Text(f"sparkdoctor {tool.get('version', '')}".strip(), style="bold")
    title.append(f"  {facts.taken_at}", style="dim")
    console.print(title)
    console.print(_header(report))

    for severity in ("error", "warn", "info"):
        group = [f for f in report.findings if f.severity == severity]
        if not group:
            continue
        console.print()
        heading = Text(plural(len(group), SEVERITY_HEADING[severity]), style=SEVERITY_STYLE[severity])
        if SEVERITY_RANK[severity] >= SEVERITY_RANK[report.fail_on]:
            heading.append("  (fails the check)", style="dim")
        console.print(heading)
        for f in group:
            console.print(Padding(_finding(f, g, verbose), (0, 0, 1 if f is not group[-1] else 0, 2)))

    if not report.findings and report.probed():
        console.print()
        console.print(Text(f"{g.yes} no known problem matches this box", style="bold green"))

    if report.ignored:
        console.print()
        line = Text("ignored: ", style="dim")
        line.append(", ".join(report.ignored))
        line.append("  (--ignore / config)", style="dim")
        console.print(line)

    nearest = getattr(report, "nearest_stack", None)
    if nearest is not None and (report.findings or verbose):
        console.print()
        line = Text("nearest known-good stack: ", style="bold")
        line.append(nearest.id)
        line.append(f"  {nearest.title}", style="dim")
        console.print(line)
        if nearest.differences:
            console.print(Padding(Text("\n".join(f"{g.bullet} {d}" for d in nearest.differences)), (0, 0, 0, 2)))
        else:
            console.print(Padding(Text("this box matches it", style="green"), (0, 0, 0, 2)))

    unknown = report.unknown
    if unknown:
        _section(console, "could not evaluate", len(unknown))
        shown = unknown if verbose else unknown[:UNKNOWN_SHOWN]
        grid = _pairs([(Text(f"{ev.entry.id}:", style="yellow"), Text("; ".join(ev.unknowns), style="dim")) for ev in shown])
        console.print(Padding(grid, (0, 0, 0, 2)))
        if len(unknown) > len(shown):
            console.print(Text(f"  and {len(unknown) - len(shown)} more (-v shows them)", style="dim"))

    if facts.errors:
        _section(console, "could not observe", len(facts.errors))
        grid = _pairs([(Text(f"{e.get('collector', '?')}:", style="yellow"), Text(str(e.get("error", "")))) for e in facts.errors])
        console.print(Padding(grid, (0, 0, 0, 2)))

    if facts.kernels:
        _section(console, "kernel probes")
        console.print(Padding(_kernel_section(facts, g, verbose), (0, 0, 0, 2)))

    if verbose:
        _verbose_sections(report, console, g)

    console.print()
    code = report.exit_code()
    style = {EXIT_OK: "bold green", EXIT_FINDINGS: "bold red"}.get(code, "bold yellow")
    console.print(Text(summary_line(report), style=style))


def _verbose_sections(report, console: Console, g: _Glyphs) -> None:
    facts = report.facts
    clear = [ev for ev in report.evaluations if ev.outcome == "clear"]
    if clear:
        _section(console, "clear", len(clear))
        grid = _pairs([(Text(f"{g.yes} {ev.entry.id}:", style="green"), Text(first_false(ev), style="dim")) for ev in clear])
        console.print(Padding(grid, (0, 0, 0, 2)))
    withdrawn = [ev for ev in report.evaluations if ev.outcome == "withdrawn"]
    if withdrawn:
        _section(console, "withdrawn entries", len(withdrawn))
        for ev in withdrawn:
            console.print(Text(f"  {ev.entry.id}: {ev.entry.withdrawn}", style="dim"))

    stacks = getattr(report, "stacks", None) or []
    if len(stacks) > 1:
        _section(console, "known-good stacks, nearest first")
        for s in stacks:
            line = Text(f"  {s.id}: ")
            line.append(plural(len(s.differences), "difference") if s.differences else "matches", style="dim")
            console.print(line)

    _packages_section(facts, console)
    _toolkits_section(facts, console, g)

    def simple(title: str, items: list[Text] | None) -> None:
        _section(console, title, None if items is None else len(items))
        if items is None:
            console.print(Text("  not observed", style="yellow"))
        elif not items:
            console.print(Text("  none", style="dim"))
        for item in items or []:
            console.print(Padding(item, (0, 0, 0, 2)))

    simple("environment", None if facts.env is None else [Text(f"{k}={v}") for k, v in sorted(facts.env.items())])
    simple("pins", None if facts.constraints is None else [
        Text.assemble(str(c.get("requirement", "?")), (f"  {c.get('file', '')}", "dim")) for c in facts.constraints
    ])
    if facts.capabilities:
        simple("capabilities", [
            Text(f"{k} = {(v.get('value') if isinstance(v, dict) else v)!r}") for k, v in sorted(facts.capabilities.items())
        ])
    if facts.timings_ms:
        _section(console, "timings")
        items = sorted(facts.timings_ms.items(), key=lambda kv: -kv[1])
        console.print(Padding(Text(" · ".join(f"{k} {v:.0f}ms" for k, v in items), style="dim"), (0, 0, 0, 2)))
    if report.matrix_files:
        _section(console, "matrix files", len(report.matrix_files))
        console.print(Padding(Text("\n".join(report.matrix_files), style="dim"), (0, 0, 0, 2)))


def _packages_section(facts, console: Console) -> None:
    if facts.packages is None:
        _section(console, "tracked packages")
        console.print(Text("  not observed", style="yellow"))
        return
    tracked = sorted((n, p) for n, p in facts.packages.items() if is_tracked(n))
    _section(console, "tracked packages", len(tracked))
    if not tracked:
        console.print(Text("  none installed", style="dim"))
    else:
        table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold dim")
        for col in ("package", "version", "integrity", "modified / missing files"):
            table.add_column(col, overflow="fold", no_wrap=col != "modified / missing files")
        for name, pkg in tracked:
            changed = [*(pkg.get("files_modified") or []), *(f"missing: {m}" for m in pkg.get("files_missing") or [])]
            shown = "\n".join(changed[:10]) + (f"\n… {len(changed) - 10} more" if len(changed) > 10 else "")
            integrity = str(pkg.get("integrity") or "?")
            style = "red" if integrity == "modified" else "dim" if integrity != "ok" else ""
            table.add_row(name, str(pkg.get("version")), Text(integrity, style=style), Text(shown))
        console.print(Padding(table, (0, 0, 0, 2)))
    c = facts.cutedsl
    if c:
        bits = [f"active build {c.get('active_build')}"]
        if c.get("bundled_cuda"):
            bits.append(f"bundled CUDA {c['bundled_cuda']}")
        if c.get("installed_builds"):
            bits.append("installed: " + ", ".join(c["installed_builds"]))
        line = Text("cutlass-dsl: " + " · ".join(bits))
        if c.get("evidence"):
            line.append(f" ({c['evidence']})", style="dim")
        console.print(Padding(line, (0, 0, 0, 2)))


def _toolkits_section(facts, console: Console, g: _Glyphs) -> None:
    if facts.toolkits is None:
        _section(console, "toolkits")
        console.print(Text("  not observed", style="yellow"))
        return
    _section(console, "toolkits", len(facts.toolkits))
    if not facts.toolkits:
        console.print(Text("  none found", style="dim"))
        return
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold dim")
    for col in ("tool", "version", "source", "used by", "sm_121a", "path"):
        table.add_column(col, overflow="fold", no_wrap=col != "path")
    for t in facts.toolkits:
        sm = t.get("sm_121a")
        table.add_row(
            str(t.get("tool", "?")),
            str(t.get("version", "?")),
            str(t.get("source", "?")),
            ", ".join(t.get("used_by") or []) or g.none,
            Text(g.yes if sm else g.no if sm is False else g.none, style="green" if sm else "red" if sm is False else "dim"),
            str(t.get("path", "")),
        )
    console.print(Padding(table, (0, 0, 0, 2)))
