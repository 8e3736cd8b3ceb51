"""The `check -v` sections of the console report: everything that was observed, not only what is wrong.

Clear and withdrawn entries, every known-good stack, the tracked packages and their integrity, the
toolkits, environment, pins, capabilities, timings and matrix files. Kept apart from console.py so
the everyday report reads in one file; the same Ink rules apply (clipped, never markup, ASCII-able).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from sparkdoctor.describe import first_false, stack_gap, text_of
from sparkdoctor.facts import is_tracked
from sparkdoctor.views.terminal_text import Ink, pairs, section

if TYPE_CHECKING:
    from sparkdoctor.facts import Facts
    from sparkdoctor.findings import Report

MODIFIED_SHOWN = 10  # modified / missing files listed per package


def render_verbose_sections(report: Report, console: Console, ink: Ink) -> None:
    facts = report.facts
    clear = [ev for ev in report.evaluations if ev.outcome == "clear"]
    if clear:
        section(console, "clear", len(clear))
        grid = pairs([(ink.text(f"{ink.yes} {ev.entry.id}:", style="green"), ink.text(first_false(ev), style="dim")) for ev in clear])
        console.print(Padding(grid, (0, 0, 0, 2)))
    withdrawn = [ev for ev in report.evaluations if ev.outcome == "withdrawn"]
    if withdrawn:
        section(console, "withdrawn entries", len(withdrawn))
        for ev in withdrawn:
            console.print(ink.text(f"  {ev.entry.id}: {ev.entry.withdrawn}", style="dim"))

    stacks = report.stacks or []
    if len(stacks) > 1:
        section(console, "known-good stacks, nearest first")
        for s in stacks:
            line = ink.text(f"  {s.id}: ")
            console.print(ink.append(line, stack_gap(s), style="dim"))

    _packages_section(facts, console, ink)
    _toolkits_section(facts, console, ink)

    def simple(title: str, items: list[Text] | None) -> None:
        section(console, title, None if items is None else len(items))
        if items is None:
            console.print(Text("  not observed", style="yellow"))
        elif not items:
            console.print(Text("  none", style="dim"))
        for item in items or []:
            console.print(Padding(item, (0, 0, 0, 2)))

    simple("environment", None if facts.env is None else [ink.text(f"{k}={v}") for k, v in sorted(facts.env.items())])
    simple("pins", None if facts.constraints is None else [
        ink.append(ink.text(c.get("requirement", "?")), f"  {c.get('file', '')}", style="dim") for c in facts.constraints
    ])
    if facts.capabilities:
        simple("capabilities", [
            ink.text(f"{k} = {text_of(repr(v.get('value') if isinstance(v, dict) else v))}") for k, v in sorted(facts.capabilities.items())
        ])
    if facts.timings_ms:
        section(console, "timings")
        items = sorted(facts.timings_ms.items(), key=lambda kv: -kv[1])
        console.print(Padding(ink.text(" · ".join(f"{k} {v:.0f}ms" for k, v in items), style="dim"), (0, 0, 0, 2)))
    if report.matrix_files:
        section(console, "matrix files", len(report.matrix_files))
        for path in report.matrix_files:
            console.print(Padding(ink.text(path, style="dim"), (0, 0, 0, 2)))


def _table(*columns: str, wrap: str) -> Table:
    """A borderless table; every column but `wrap` keeps its cells on one line."""
    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold dim")
    for col in columns:
        table.add_column(col, overflow="fold", no_wrap=col != wrap)
    return table


def _packages_section(facts: Facts, console: Console, ink: Ink) -> None:
    if facts.packages is None:
        section(console, "tracked packages")
        console.print(Text("  not observed", style="yellow"))
        return
    tracked = sorted((n, p) for n, p in facts.packages.items() if is_tracked(n))
    section(console, "tracked packages", len(tracked))
    if not tracked:
        console.print(Text("  none installed", style="dim"))
    else:
        table = _table("package", "version", "integrity", "modified / missing files", wrap="modified / missing files")
        for name, pkg in tracked:
            changed = [*(pkg.get("files_modified") or []), *(f"missing: {m}" for m in pkg.get("files_missing") or [])]
            shown = [ink.plain(c) for c in changed[:MODIFIED_SHOWN]]
            if len(changed) > MODIFIED_SHOWN:
                shown.append(ink.plain(f"… {len(changed) - MODIFIED_SHOWN} more"))
            integrity = text_of(pkg.get("integrity") or "?")
            style = "red" if integrity == "modified" else "dim" if integrity != "ok" else ""
            table.add_row(ink.text(name), ink.text(pkg.get("version")), ink.text(integrity, style=style), Text("\n".join(shown)))
        console.print(Padding(table, (0, 0, 0, 2)))
    _cutedsl_line(facts, console, ink)
    _flashinfer_kernels_line(facts, console, ink)


def _flashinfer_kernels_line(facts: Facts, console: Console, ink: Ink) -> None:
    """Whether `vllm download-kernels` has installed FlashInfer's kernels for this FlashInfer and arch."""
    from sparkdoctor.flashinfer_kernels import state

    found = state(facts)
    if found is None or found["status"] == "no-flashinfer":
        return
    line = ink.text(f"flashinfer kernels: {found['status']}", style="" if found["status"] == "present" else "yellow")
    ink.append(line, f" ({found['detail']})", style="dim")
    console.print(Padding(line, (0, 0, 0, 2)))


def _cutedsl_line(facts: Facts, console: Console, ink: Ink) -> None:
    """What is known about the CuTe DSL build; a build that is not known is said so, never `None`."""
    c = facts.cutedsl
    if not c:
        return
    build = c.get("active_build")
    bits = []
    if build and build != "unknown":
        bits.append(f"active build {build}")
    elif build == "unknown" or c.get("installed_builds"):
        bits.append("active build unknown")
    else:  # facts.py: active_build None = not installed
        bits.append("not installed")
    if c.get("bundled_cuda"):
        bits.append(f"bundled CUDA {c['bundled_cuda']}")
    if c.get("installed_builds"):
        bits.append("installed: " + ", ".join(text_of(b) for b in c["installed_builds"]))
    line = ink.text("cutlass-dsl: " + " · ".join(bits))
    if c.get("evidence"):
        ink.append(line, f" ({c['evidence']})", style="dim")
    console.print(Padding(line, (0, 0, 0, 2)))


def _toolkits_section(facts: Facts, console: Console, ink: Ink) -> None:
    if facts.toolkits is None:
        section(console, "toolkits")
        console.print(Text("  not observed", style="yellow"))
        return
    section(console, "toolkits", len(facts.toolkits))
    if not facts.toolkits:
        console.print(Text("  none found", style="dim"))
        return
    table = _table("tool", "version", "source", "used by", "sm_121a", "path", wrap="path")
    for t in facts.toolkits:
        sm = t.get("sm_121a")
        table.add_row(
            ink.text(t.get("tool", "?")),
            ink.text(t.get("version", "?")),
            ink.text(t.get("source", "?")),
            ink.text(", ".join(text_of(u) for u in t.get("used_by") or []) or ink.none),
            Text(ink.yes if sm else ink.no if sm is False else ink.none, style="green" if sm else "red" if sm is False else "dim"),
            ink.text(t.get("path", "")),
        )
    console.print(Padding(table, (0, 0, 0, 2)))
