"""The forum form of the bug report: plain text, no markup, nothing folded, so it reads the same
pasted into the NVIDIA developer forum, a mailing list or a chat. The environment part has the
layout of `vllm collect-env` (`== Section ==`, `label : value`), which maintainers know.
The Facts snapshot is left out (too long for a post): `check --save-facts` writes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkdoctor.anonymize import NOT_REDACTED_NOTE, REDACTED_NOTE, Redactor
from sparkdoctor.describe import clip, describe_target, tracked_stack
from sparkdoctor.facts import Facts
from sparkdoctor.fit import FORUM_LIMIT, Block
from sparkdoctor.matrix.loader import fix_hint
from sparkdoctor.report import judgement
from sparkdoctor.report.sections import Section, environment_sections, label_lines

if TYPE_CHECKING:
    from sparkdoctor.findings import Report

RULE = "=" * 30


def forum_blocks(report: Report, facts: Facts, r: Redactor) -> list[Block]:
    tool = facts.tool or {}
    head = [
        f"sparkdoctor report (sparkdoctor {clip(tool.get('version', '?'), 100)}, taken {clip(facts.taken(), 100)}, "
        f"fingerprint {judgement.shown_fingerprint(report.facts, r)})",
        f"verdict: {judgement.verdict_line(report, r)}",
        f"target:  {describe_target(facts)}",
        "stack:   " + " · ".join(f"{name} {value}" for name, value in tracked_stack(facts)),
        "",
    ]
    blocks = [Block("head", head, essential=True), Block("findings", _findings(report, r), essential=True)]
    blocks += [Block(s.title, _section(s)) for s in environment_sections(facts)]
    blocks.append(Block("note", [REDACTED_NOTE if r.enabled else NOT_REDACTED_NOTE, ""], essential=True))
    return blocks


def forum_stub(block: Block, attachment: str) -> list[str]:
    return [*_heading(block.title), f"({len(block.text()):,} characters: in full in {attachment})", ""]


def forum_notice(attachment: str) -> list[str]:
    return [f"This report is longer than a forum post allows ({FORUM_LIMIT:,} characters): the sections marked "
            f"'in full in {attachment}' are complete in that file, written beside it; attach it to the post.", ""]


def _heading(title: str) -> list[str]:
    return [RULE, f"{title:^30}".rstrip(), RULE]


def _findings(report: Report, r: Redactor) -> list[str]:
    out = _heading("Findings")
    found = judgement.findings(report, r)
    if not found:
        out.append("No known problem matches this environment." if report.probed() else "None: the target could not be probed.")
    for f in found:
        out += [f"[{f.severity}] {f.id}: {f.title} ({f.where})"]
        out += [f"    evidence: {e}" for e in f.evidence]
        if f.remedy:
            out.append(f"    what to do: {f.remedy}")
        if f.fix:
            out.append(f"    fix: {f.fix} ({fix_hint(f.fix)})")
        out += [f"    see: {ref}" for ref in f.refs]
    if report.ignored:
        out.append("ignored: " + ", ".join(judgement.ignored(report)))
    unknown = judgement.not_evaluated(report, r)
    if unknown:
        out += ["", "could not evaluate:", *(f"    {line}" for line in unknown)]
    stack = judgement.nearest_stack(report, r)
    if stack:
        out += ["", f"nearest known-good stack: {stack[0]}", *(f"    {line}" for line in stack[1:])]
    return out + [""]


def _section(s: Section) -> list[str]:
    out = _heading(s.title) + label_lines(s)
    if s.table is not None:
        out += _table(s.table)
    if s.note:
        out.append(s.note)
    return out + [""]


def _table(table: list[list[str]]) -> list[str]:
    widths = [min(max(len(row[i]) for row in table), 60) for i in range(len(table[0]))]
    widths[-1] = 0  # the note column runs to the end of the line
    return ["  ".join(f"{cell:<{w}}" for cell, w in zip(row, widths, strict=False)).rstrip() for row in table]
