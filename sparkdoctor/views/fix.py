"""`fix`'s view: the plan, the apply's outcome, a rollback, the history and a prune, as the lines people read
(console), or each mode's versioned JSON document (`fix_version`: sparkdoctor/fix/documents.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.text import Text

from sparkdoctor.fix.documents import (
    ApplyDocument,
    FixDocument,
    HistoryDocument,
    PlanDocument,
    PruneDocument,
    RollbackDocument,
)
from sparkdoctor.fix.interface import ActionKind, StepKind
from sparkdoctor.fix.model import Plan
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.text import clip, one_line
from sparkdoctor.views import View
from sparkdoctor.views.fitted import grid, plain_lines

if TYPE_CHECKING:
    from rich.console import Console

    from sparkdoctor.fix.pipeline import Applied, JournalRow, Pruned, RolledBack


def plan_lines(plan: Plan) -> list[str]:
    where = f"container {plan.target['container']}: " if plan.target.get("container") else ""
    out = [f"Target: {where}{plan.target['python']}  (installer: {plan.installer})"]
    if not plan.fixes:
        out.append("Nothing to fix: no finding names a fix.")
    out += [f"Fix {f['id']}: {f['title']}  (asked for by: {', '.join(f['findings'])})" for f in plan.fixes]
    if plan.steps:
        out.append("Steps, in order:")
    for i, s in enumerate(plan.steps, 1):
        if s.op is StepKind.edit:
            out.append(f"  {i}. edit {s.path}  [{s.kind}]")
            out += [f"       {line}" for line in s.diff]
        elif s.op is StepKind.uninstall:
            out.append(f"  {i}. uninstall {' '.join(s.names)}  [{s.kind}]")
        elif s.op is StepKind.install:
            extra = f" (with {len(s.constraints)} constraint lines: what installed packages require, the rest kept where it is)" if s.constraints else ""
            out.append(f"  {i}. install {' '.join(s.requirements)} in one resolver call{extra}  [{s.kind}]")
        elif s.kind is ActionKind.reinstall_family:
            out.append(f"  {i}. reinstall {' '.join(s.requirements)} last, by itself, no dependencies: its files win the paths the family's wheels share  [{s.kind}]")
        else:
            out.append(f"  {i}. reinstall {' '.join(s.requirements)} from the registry, no dependencies  [{s.kind}]")
    if plan.changes:
        out.append("Versions, before -> after:")
        for name, (before, after) in sorted(plan.changes.items()):
            tag = " (reinstalled)" if before == after else ""
            out.append(f"  {name}: {before or '(not installed)'} -> {after or '(removed)'}{tag}")
    out += [f"Note: {note}" for note in plan.notes]
    if plan.checks_after:
        probes = f"; probes: {', '.join(plan.probes_after)}" if plan.probes_after else ""
        out.append(f"Checked after: check runs again; expected gone: {', '.join(plan.checks_after)}{probes}")
    out += [f"REFUSED: {r}" for r in plan.refusals]
    return out


def plan_document_lines(found: PlanDocument) -> list[str]:
    """The plan, then each failing finding it does not fix, with what to do about it by hand: a plan with nothing to do
    and exit 1 said only "Nothing to fix: no finding names a fix"."""
    extra = ["Dry run: nothing was changed. Apply with --yes."] if found.dry_run and not found.plan.empty else []
    fixed = {i for f in found.plan.fixes for i in f["findings"]} | set(found.plan.checks_after)
    extra += [f"Not fixed by sparkdoctor: {f.id} ({f.severity}): {clip(one_line(f.remedy), 300)}"
              for f in found.report.failing() if f.id not in fixed]
    return plan_lines(found.plan) + extra


def applied_lines(result: Applied) -> list[str]:
    out = [f"Journal: {result.journal}"]
    out += [f"  done: {d}" for d in result.done]
    if result.outside_restored:
        out.append(f"  compiled again (the installer changed them outside the plan): {', '.join(result.outside_restored)}")
    if result.error:
        out.append(f"FAILED: {result.error}")
        if result.rolled_back:
            v = result.rollback_verified or {}
            if v.get("ok"):
                out.append("Rolled back: nothing changed (package set and file bytes verified identical to before the apply)")
            else:
                out.append("Rolled back: DIFFERENCES: " + differences(v))
            out += [f"Note: {note}" for note in v.get("notes") or []]
    out.append(f"Findings gone: {', '.join(result.gone) or 'none'}")
    out.append(f"Findings remaining: {', '.join(result.remaining) or 'none'}")
    out.append(f"New findings: {', '.join(result.new) or 'none'}")
    settled = result.rolled_back and (result.rollback_verified or {}).get("ok")
    undo = "" if settled else f"   (undo: sparkdoctor fix --rollback {result.journal})"
    out.append(f"Verdict after: {result.report_after.verdict()}{undo}")
    return out


def rollback_lines(result: RolledBack) -> list[str]:
    out = [result.message]
    v = result.verified or {}
    if result.status == "rolled back":
        out += [f"  restored {name} {version}" for name, version in sorted((result.restored_packages or {}).items())]
        out += [f"  restored {path}" for path in result.restored_files or []]
    if result.status == "would roll back":
        would = result.would or {}
        out += [f"  would reinstall {name} {version} (from the journal's {would.get('restore_from')})"
                for name, version in sorted((result.restored_packages or {}).items())]
        out += [f"  would restore {path}" for path in result.restored_files or []]
        notes = would.get("notes")
        out += [f"Note: {note}" for note in notes] if isinstance(notes, list) else []
    out += [f"Note: {note}" for note in v.get("notes") or []]
    if v.get("outside_restored"):
        out.append(f"  compiled again (changed outside the plan): {', '.join(v['outside_restored'])}")
    if v:
        if v.get("ok"):
            outside = f"; {v['outside_files']} files of other dists unchanged" if v.get("outside_files") else ""
            since = v.get("changed_since") or []
            packages = f"the packages as before but {len(since)} changed since the apply" if since else \
                f"{v.get('packages')} packages as before"
            out.append(f"Verified: {packages}; {v.get('files')} files byte for byte{outside}")
            files = v.get("files_changed_since") or []
            if files:  # files of other dists edited since (a local patch): named, never fetched again from the index
                since = [*since, *files[:5], *([f"and {len(files) - 5} more file(s)"] if len(files) > 5 else [])]
            if since:
                out.append("Changed since the apply, not by it (left as they are): " + "; ".join(since))
        else:
            out.append("DIFFERENCES: " + differences(v))
    return out


def differences(verified: Mapping[str, list[str]]) -> str:
    """What a rollback could not put back: the packages and files that differ, and the steps that failed to reverse
    (an installer that refused the reverse leaves no difference to list, never an empty line)."""
    return "; ".join(verified.get("packages_differ", []) + verified.get("files_differ", []) + verified.get("reverse_errors", []))


def size_text(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"  # pragma: no cover


def history_lines(rows: list[JournalRow]) -> list[str]:
    if not rows:
        return ["No fix journals yet."]
    out = [f"{r.journal}  {r.status:<20} {size_text(r.bytes or 0):>9}  {', '.join(r.fixes) or '-'}  {r.target or ''}" for r in rows]
    out.append(f"{len(rows)} journal(s), {size_text(sum(r.bytes or 0 for r in rows))} (remove old ones: sparkdoctor fix --prune --keep N)")
    return out


def prune_lines(result: Pruned) -> list[str]:
    out = [f"removed {r['journal']}  ({r['status']})" for r in result.removed]
    out.append(f"Removed {len(result.removed)} journal(s), freed {size_text(result.freed_bytes)}.")
    out += [f"Kept {r.journal} ({r.status}): a fix or rollback is running on its target now" if r.status in SETTLED else
            f"Kept {r.journal} ({r.status}): its apply or rollback did not finish; settle it with "
            f"`sparkdoctor fix --rollback {r.journal}`" for r in result.kept_unsettled]
    return out


SETTLED = ("applied", "rolled back", "planned", "half-written")  # kept all the same: its target's lock was held (fix --prune)


def _console(result: Result[FixDocument], sink: Sink) -> str:
    found = result.data
    if isinstance(found, PlanDocument):
        if not found.shown:
            return ""
        lines = plan_document_lines(found)
    elif isinstance(found, ApplyDocument):
        lines = plan_lines(found.plan) + applied_lines(found.applied)
    elif isinstance(found, RollbackDocument):
        lines = rollback_lines(found.rolled_back)
    elif isinstance(found, HistoryDocument):
        lines = history_lines(found.rows)
    else:
        assert isinstance(found, PruneDocument)
        lines = prune_lines(found.pruned)
    # a path, a fix's title, a diff line of a recipe or env file: a control character in one prints escaped, never
    # driving the terminal or faking a line of the plan
    lines = [one_line(line) for line in lines]
    if sink.at_terminal():  # fitted to the terminal's width; a pipe or a file gets the lines whole (scripts read them)
        rows = found.rows if isinstance(found, HistoryDocument) else []
        return sink.capture(lambda console: _fitted(console, lines, rows), highlight=False)
    return "\n".join(lines) + "\n"


def _fitted(console: Console, lines: list[str], rows: list[JournalRow]) -> None:
    """`lines` at a terminal, each wrapped under its text; a journal list too wide for the terminal one journal an
    item: its id, then its status, size and fixes and, on a line of its own, its target, wrapped under them."""
    if not rows or max(cell_len(line) for line in lines) <= console.width:
        plain_lines(console, lines)
        return
    status = max(len(r.status) for r in rows)
    size = max(len(size_text(r.bytes or 0)) for r in rows)
    console.print(grid((Text(one_line(r.journal)), Text(one_line(f"{r.status:<{status}}  {size_text(r.bytes or 0):>{size}}  "
                                                          f"{', '.join(r.fixes) or '-'}") + (f"\n{one_line(r.target)}" if r.target else "")))
                       for r in rows))
    plain_lines(console, lines[len(rows):])


VIEW = View(FixDocument, {Format.console: _console, Format.json: lambda result, sink: result.data.to_json()})
