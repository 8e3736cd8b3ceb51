"""The console report, for people: what was probed, what is wrong, what to do, one summary line.

Everything is drawn from the Report. The words come from sparkdoctor.describe (shared with markdown and
junit); every string becomes rich `Text` through terminal_text.Ink, never markup, so a title with
`[brackets]` prints as written and a huge field is clipped. Colour and links appear only on a
terminal; in a pipe rich drops them and the text stays readable. A reference URL is never broken
across lines (a terminal could no longer open it): it gets a line of its own, even when that line is
wider than the terminal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from sparkdoctor.describe import (
    PROSE_CHARS,
    SEVERITY_HEADING,
    describe_box,
    kernel_rows,
    plural,
    stack_also_includes,
    summary_line,
    tracked_stack,
    unverified_line,
)
from sparkdoctor.exitcodes import EXIT_FINDINGS
from sparkdoctor.findings import PASS, SEVERITY_RANK
from sparkdoctor.matrix.loader import fix_hint
from sparkdoctor.views.commands import split_commands
from sparkdoctor.views.fitted import with_commands
from sparkdoctor.views.terminal_text import (
    Ink,
    labelled,
    needs_ascii,
    pairs,
    section,
    to_ascii,
)

if TYPE_CHECKING:
    from sparkdoctor.facts import Facts
    from sparkdoctor.findings import Finding, Report
    from sparkdoctor.matrix.freshness import StackDistance

__all__ = ["render_console", "needs_ascii"]

SEVERITY_STYLE = {"error": "bold red", "warn": "bold yellow", "info": "bold cyan"}
STATUS_STYLE = {"ok": "green", "fail": "red", "crash": "red", "error": "red", "timeout": "red", "refused": "yellow"}
UNKNOWN_SHOWN = 8  # beyond this, non-verbose output says "and N more (-v)"
EVIDENCE_SHOWN = 10  # a finding's evidence lines beyond this are counted (a `--no-deps` vLLM misses ~70 requirements)
LABEL_WIDTH = 10  # the finding rows' label column ("what to do")
FINDING_INDENT = 4  # a finding's rows sit under its heading, inside the severity group


def render_console(report: Report, console: Console, verbose: bool = False, ascii_only: bool | None = None) -> None:
    """Print the report. ascii_only: spell every symbol in ASCII; None (the default) decides from
    the encoding of the console's stream (PYTHONIOENCODING=ascii, a C locale without UTF-8)."""
    if ascii_only is None:
        ascii_only = needs_ascii(console.file)
    if not ascii_only:
        _render(report, console, verbose, Ink(False))
        return
    console.file.write(console_text(report, console, verbose, ascii_only=True))
    console.file.flush()


def console_text(report: Report, console: Console, verbose: bool = False, ascii_only: bool = False) -> str:
    """The report as `console` would print it, captured as one string (nothing is written)."""
    with console.capture() as captured:
        _render(report, console, verbose, Ink(ascii_only))
    # Ink already spelled everything in ASCII; whatever rich adds itself (an ellipsis) is caught here.
    return to_ascii(captured.get()) if ascii_only else captured.get()


def _render(report: Report, console: Console, verbose: bool, ink: Ink) -> None:
    facts = report.facts
    tool = facts.tool or {}
    title = Text("sparkdoctor", style="bold")
    if tool.get("version"):
        ink.append(title, f" {tool['version']}", style="bold")
    ink.append(title, f"  {facts.taken()}", style="dim")
    console.print(title)
    console.print(_header(report, ink))
    _print_findings(console, report, ink, verbose)
    nearest = report.nearest_stack
    if nearest is not None and (report.findings or verbose):
        _print_nearest_stack(console, nearest, ink)
    _print_not_known(console, report, ink, verbose)
    if facts.kernels:
        section(console, "kernel probes")
        console.print(Padding(_kernel_section(facts, ink, verbose), (0, 0, 0, 2)))
    if verbose:
        from sparkdoctor.views.console_verbose import render_verbose_sections

        render_verbose_sections(report, console, ink)
    _print_knowledge(console, report, ink)
    console.print()
    verdict = report.verdict()
    style = "bold green" if verdict == PASS else "bold red" if report.exit_code() == EXIT_FINDINGS else "bold yellow"
    console.print(ink.text(summary_line(report), style=style))


def _print_findings(console: Console, report: Report, ink: Ink, verbose: bool) -> None:
    """The findings by severity; when there are none, a tick only if every probe could run."""
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
            _print_finding(console, f, ink, verbose, last=f is group[-1])

    if not report.findings and report.probed():
        console.print()
        if report.unverified:  # nothing known is wrong, but not everything could be checked: no tick
            line = Text("no known problem matches this box, but not every kernel probe could run: ", style="bold yellow")
            console.print(ink.append(line, unverified_line(report), style="yellow"))
        else:
            console.print(Text(f"{ink.yes} no known problem matches this box", style="bold green"))

    if report.ignored:
        console.print()
        line = Text("ignored: ", style="dim")
        ink.append(line, ", ".join(report.ignored))
        line.append("  (--ignore / config)", style="dim")
        console.print(line)


def _print_not_known(console: Console, report: Report, ink: Ink, verbose: bool) -> None:
    """Entries that could not be evaluated and collectors that could not observe."""
    unknown = report.unknown
    if unknown and not report.probed() and not verbose:
        # an unprobed target leaves most entries unknown: the cause first, not 8 lines of "installed packages unknown"
        _print_not_observed(console, report, ink)
        section(console, "could not evaluate", len(unknown))
        console.print(Text("  what the target could not tell (above) leaves them unknown; -v shows them", style="dim"))
        return
    if unknown:
        section(console, "could not evaluate", len(unknown))
        shown = unknown if verbose else unknown[:UNKNOWN_SHOWN]
        grid = pairs([(ink.text(f"{ev.entry.id}:", style="yellow"), ink.text("; ".join(ev.unknowns), style="dim")) for ev in shown])
        console.print(Padding(grid, (0, 0, 0, 2)))
        if len(unknown) > len(shown):
            console.print(Text(f"  and {len(unknown) - len(shown)} more (-v shows them)", style="dim"))
    _print_not_observed(console, report, ink)


def _print_not_observed(console: Console, report: Report, ink: Ink) -> None:
    errors = report.facts.errors
    if errors:
        section(console, "could not observe", len(errors))
        grid = pairs([(ink.text(f"{e.get('collector', '?')}:", style="yellow"), ink.text(e.get("error", ""))) for e in errors])
        console.print(Padding(grid, (0, 0, 0, 2)))


def _header(report: Report, ink: Ink) -> Table:
    facts = report.facts
    rows: list[tuple[str, object]] = [*describe_box(facts)]
    if facts.packages is None:
        rows.append(("stack", ink.text("unknown (packages not observed)", style="yellow")))
    else:
        stack = Text()
        for i, (name, desc) in enumerate(tracked_stack(facts)):
            if i:
                ink.append(stack, " · ", style="dim")
            stack.append(name + " ", style="bold" if desc != "not installed" else "dim")
            ink.append(stack, desc, style="dim" if desc == "not installed" else "")
        rows.append(("stack", stack))
    rows.append(("fingerprint", Text(facts.fingerprint(), style="dim")))
    return labelled(rows, ink, label_width=11)


def _print_finding(console: Console, f: Finding, ink: Ink, verbose: bool, last: bool) -> None:
    head = Text()
    ink.append(head, f"{ink.sev.get(f.severity, '?')} {f.id}", style=SEVERITY_STYLE.get(f.severity, "bold"))
    ink.append(head, f"  {f.component} · {f.action} · {f.evidence_level}", style="dim")
    parts: list[RenderableType] = [head, Padding(ink.text(f.title, style="bold", limit=PROSE_CHARS), (0, 0, 0, 2))]
    rows: list[tuple[str, object]] = []
    if verbose and f.summary:
        rows.append(("why", ink.text(f.summary, limit=PROSE_CHARS)))
    if f.evidence:
        lines = [(Text(ink.bullet), ink.text(line)) for line in f.evidence[:EVIDENCE_SHOWN]]
        if len(f.evidence) > EVIDENCE_SHOWN:
            lines.append((Text(""), ink.text(f"… and {len(f.evidence) - EVIDENCE_SHOWN:,} more (--format json lists all)", style="dim")))
        rows.append(("evidence", pairs(lines)))
    # a remedy's shell command gets a line of its own, whole (wrapped as prose it broke where it is copied from)
    pieces = split_commands(f.remedy) if f.remedy else []
    apart = any(is_command for _, is_command in pieces)
    if f.remedy and not apart:
        rows.append(("what to do", ink.text(f.remedy, limit=PROSE_CHARS)))
    after: list[tuple[str, object]] = []
    if f.fix:
        fix = ink.text(f.fix, style="bold")
        fix.append(f"  ({fix_hint(f.fix)})", style="dim")
        (after if apart else rows).append(("fix", fix))
    if rows:
        parts.append(Padding(labelled(rows, ink, label_width=LABEL_WIDTH), (0, 0, 0, 2)))
    console.print(Padding(Group(*parts), (0, 0, 0, 2)))
    if apart:
        with_commands(console, FINDING_INDENT, ink.text("what to do", style="dim"),
                      [(ink.text(piece, limit=PROSE_CHARS), is_command) for piece, is_command in pieces], LABEL_WIDTH)
    if after:
        console.print(Padding(labelled(after, ink, label_width=LABEL_WIDTH), (0, 0, 0, FINDING_INDENT)))
    _print_refs(console, f.refs, ink, verbose)
    if not last:
        console.print()


def _print_refs(console: Console, refs: list[str], ink: Ink, verbose: bool) -> None:
    """Each URL whole on its own line, in the value column under the finding's other rows."""
    shown = refs if verbose else refs[:1]
    for i, url in enumerate(shown):
        line = Text(" " * FINDING_INDENT)
        line.append(("see" if i == 0 else "").ljust(LABEL_WIDTH + 2), style="dim")
        line.append_text(ink.link(url))
        if i == 0 and len(refs) > len(shown):
            line.append(f"  (+{len(refs) - len(shown)} more)", style="dim")
        console.print(line, no_wrap=True, overflow="ignore", crop=False)


def _print_knowledge(console: Console, report: Report, ink: Ink) -> None:
    """How fresh the matrix is for this box; a warning per installed package newer than it has tracked."""
    from sparkdoctor.matrix.freshness import knowledge_line, newer_lines

    k = report.knowledge
    if not k or not k.get("tracked"):
        return
    console.print(ink.text(knowledge_line(k), style="dim"))
    for line in newer_lines(k):
        console.print(ink.text(f"warning: {line}", style="yellow"))


def _print_nearest_stack(console: Console, nearest: StackDistance, ink: Ink) -> None:
    console.print()
    line = Text("nearest known-good stack: ", style="bold")
    ink.append(line, nearest.id)
    ink.append(line, f"  {nearest.title}", style="dim")
    console.print(line)
    lines = [Text.assemble(f"{ink.bullet} ", ink.text(d)) for d in nearest.differences]
    also = stack_also_includes(nearest)
    if also:
        lines.append(ink.text(also, style="dim"))
    if not nearest.differences:
        lines.insert(0, Text("this box matches it" if nearest.matches else "what this box has of it matches", style="green"))
    console.print(Padding(Group(*lines), (0, 0, 0, 2)))


def _kernel_section(facts: Facts, ink: Ink, verbose: bool) -> Group:
    """Per probe: its status and detail, then one line per (ptxas, arch) run."""
    parts: list[RenderableType] = []
    rows = kernel_rows(facts)
    for row in rows:
        runs = [r for r in rows if r["probe"] == row["probe"] and r["run"]]
        # The common clean case (every ptxas compiled it, nothing could run) is one line unless -v;
        # failures, refusals and real runs always show their per-ptxas lines.
        quiet = not verbose and row["status"] == "ok" and runs and all(r["compiled"] and r.get("ran") is None for r in runs)
        if row["first"]:
            parts += _probe_head(row, runs, ink, bool(quiet))
        if not row["run"] or quiet:
            continue
        parts.append(Padding(_run_line(row, ink, verbose), (0, 0, 0, 4)))
    return Group(*parts)


def _probe_head(row: dict[str, Any], runs: list[dict[str, Any]], ink: Ink, quiet: bool) -> list[RenderableType]:
    head = ink.text(row["probe"], style="bold")
    head.append("  ")
    ink.append(head, row["status"], style=STATUS_STYLE.get(row["status"], "dim"))
    if row["kind"]:
        ink.append(head, f" ({row['kind']})", style="dim")
    if quiet:
        arches = sorted({r["arch"] for r in runs if r["arch"]})
        ink.append(head, f"  {', '.join(arches)}: {len(runs)}/{len(runs)} ptxas ", style="dim")
        head.append(ink.yes, style="green")
        if any(r.get("sass_ok") for r in runs):
            head.append("  SASS ", style="dim")
            head.append(ink.yes, style="green")
        note = runs[0]["note"] or ""
        if note:  # "compiled" was just said
            ink.append(head, f"  {note.removeprefix('compiled, ')}", style="dim")
    parts: list[RenderableType] = [head]
    if row["detail"] and not quiet:
        parts.append(Padding(ink.text(row["detail"], style="dim"), (0, 0, 0, 4)))
    return parts


def _run_line(row: dict[str, Any], ink: Ink, verbose: bool) -> Text:
    line = ink.text(f"ptxas {row['ptxas']}")
    if row["arch"]:
        ink.append(line, f"  {row['arch']}")
    line.append("  ")
    line.append_text(ink.mark("compiled", row["compiled"]))
    if row["compiled"]:
        for label, key in (("SASS", "sass_ok"), ("ran", "ran"), ("verified", "verified")):
            if row.get(key) is not None:
                line.append("  ")
                line.append_text(ink.mark(label, row[key]))
    if row["note"]:
        line.append("  ")
        ink.append(line, row["note"], style="red" if row["compiled"] is False else "dim")
    if verbose and row.get("ms") is not None:
        ink.append(line, f"  {row['ms']} ms{' (cached)' if row.get('cached') else ''}", style="dim")
    return line
