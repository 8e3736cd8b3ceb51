"""The GitHub issue form of the bug report: what a maintainer reads first in the open (verdict,
the box in one table, the findings), and the long parts folded into <details> (the collect-env
style environment, kernel probes, host health, the redacted Facts snapshot that
`sparkdoctor check --facts` re-evaluates).

Text from the box is escaped for markdown (a `*` or `<user>` must show as written) or put in a
fenced block whose fence is longer than any backtick run inside it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from sparkdoctor.anonymize import NOT_REDACTED_NOTE, REDACTED_NOTE, Redactor
from sparkdoctor.describe import (
    PROSE_CHARS,
    clip,
    describe_arch,
    describe_driver,
    describe_gpus,
    describe_host,
    describe_target,
    tracked_stack,
)
from sparkdoctor.facts import Facts
from sparkdoctor.fit import GITHUB_LIMIT, Block
from sparkdoctor.report import judgement
from sparkdoctor.report.sections import Section, environment_sections, label_lines

if TYPE_CHECKING:
    from sparkdoctor.findings import Report

SNAPSHOT_CHARS = PROSE_CHARS  # strings in the folded snapshot; longer ones are clipped and counted
_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~])")


def md(text: object) -> str:
    """Inline markdown that shows `text` exactly: specials escaped, one line."""
    return _SPECIAL.sub(r"\\\1", str(text)).replace("\r", " ").replace("\n", " ")


def fenced(body: str, lang: str = "text") -> list[str]:
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{lang}", body, fence]


def folded(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>", ""]


def github_blocks(report: Report, facts: Facts, r: Redactor) -> list[Block]:
    """The report as blocks (sparkdoctor/fit.py): the verdict, box and findings are essential, the folded parts detail."""
    tool = facts.tool or {}
    shown = judgement.shown_fingerprint(report.facts, r)  # the one `check` prints, or withheld
    head = [
        "### sparkdoctor report",
        "",
        f"**{md(judgement.verdict_line(report, r))}**",
        "",
        f"sparkdoctor {md(clip(tool.get('version', '?'), 100))} · taken {md(clip(facts.taken(), 100))} · "
        f"fingerprint {shown if shown == judgement.WITHHELD else f'`{shown}`'}",
        "",
    ]
    blocks = [Block("head", head, essential=True), Block("box", _box_table(facts), essential=True),
              Block("findings", _findings(report, r), essential=True)]
    sections = environment_sections(facts)
    env_text = "\n".join(_section_text(s) for s in sections if s.table is None)
    env_title = ("Environment (what <code>vllm collect-env</code> prints, plus the cutlass-dsl build, every ptxas, "
                 "modified files and host facts)")
    blocks.append(Block(env_title, folded(env_title, fenced(env_text))))
    for s in sections:
        if s.table is not None:
            blocks.append(Block(s.title, folded(s.title, _table(s.table))))
    title, body = _snapshot(facts)
    blocks.append(Block(title, folded(title, body)))
    blocks.append(Block("note", [f"<sub>{md(REDACTED_NOTE if r.enabled else NOT_REDACTED_NOTE)}</sub>", ""], essential=True))
    return blocks


def github_stub(block: Block, attachment: str) -> list[str]:
    return folded(f"{block.title} (in the attachment)",
                  [f"{len(block.text()):,} characters, in full in `{attachment}`: attach that file to the issue."])


def github_notice(attachment: str) -> list[str]:
    return [f"> **This report is longer than a GitHub issue allows ({GITHUB_LIMIT:,} characters).** The parts marked "
            f"*in the attachment* are complete in `{attachment}`, written beside it: drag that file into the issue.", ""]


def _box_table(facts: Facts) -> list[str]:
    rows = [("target", describe_target(facts)), ("host", describe_host(facts)), ("GPU", describe_gpus(facts)),
            ("arch", describe_arch(facts)), ("driver", describe_driver(facts)), *tracked_stack(facts)]
    target = facts.target if isinstance(facts.target, dict) else {}
    if target.get("kind") not in (None, "python"):
        rows.insert(0, ("target kind", str(target.get("kind"))))
    container = getattr(facts, "container", None)  # a container target's image (another collector's field)
    if isinstance(container, dict):
        rows.insert(1, ("image", " · ".join(clip(container.get(k) or "?", 200) for k in ("name", "image")) +
                        f" · fingerprint {clip(container.get('fingerprint') or 'unknown', 100)}"))
    out = ["| | |", "|---|---|"]
    out += [f"| {md(clip(label, 200))} | {md(clip(value)) or ' '} |" for label, value in rows]
    return out + [""]


def _findings(report: Report, r: Redactor) -> list[str]:
    out = ["#### Findings", ""]
    found = judgement.findings(report, r)
    if not found:
        out += ["No known problem matches this environment." if report.probed() else "None: the target could not be probed.", ""]
    for f in found:
        out += [f"- **{md(f.severity)}** `{f.id.replace('`', '')}` {md(f.title)} ({md(f.where)})"]
        out += [f"  - evidence: {md(e)}" for e in f.evidence]
        if f.remedy:
            out.append(f"  - what to do: {md(f.remedy)}")
        if f.fix:
            out.append(f"  - fix: `{f.fix.replace('`', '')}` (`sparkdoctor fix` shows the plan)")
        if f.refs:
            out.append("  - see: " + " · ".join(md(ref) for ref in f.refs))
    if found:
        out.append("")
    if report.ignored:
        out += ["Ignored: " + ", ".join(md(i) for i in judgement.ignored(report)), ""]
    unknown = judgement.not_evaluated(report, r)
    if unknown:
        out += folded(f"Could not evaluate ({len(unknown)})", [f"- {md(line)}" for line in unknown])
    stack = judgement.nearest_stack(report, r)
    if stack:
        out += [f"Nearest known-good stack: {md(stack[0])}", *(f"- {md(line)}" for line in stack[1:]), ""]
    return out


def _section_text(s: Section) -> str:
    lines = [f"== {s.title} ==", *label_lines(s)]
    if s.note:
        lines.append(s.note)
    return "\n".join(lines) + "\n"


def _table(table: list[list[str]]) -> list[str]:
    head, *rows = table
    out = ["| " + " | ".join(md(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(md(c) or " " for c in row) + " |" for row in rows]
    return out


def bounded(value: object, clipped: list[int]) -> object:
    """`value` with every string over SNAPSHOT_CHARS clipped (a post cannot carry 25 MB), each one's length in `clipped`."""
    if isinstance(value, str):
        if len(value) > SNAPSHOT_CHARS:
            clipped.append(len(value))
            return clip(value, SNAPSHOT_CHARS)
        return value
    if isinstance(value, dict):
        return {(bounded(k, clipped) if isinstance(k, str) else k): bounded(v, clipped) for k, v in value.items()}
    if isinstance(value, list):
        return [bounded(v, clipped) for v in value]
    return value


def _snapshot(facts: Facts) -> tuple[str, list[str]]:
    clipped: list[int] = []
    body = json.dumps(bounded(facts.to_dict(), clipped), indent=2, ensure_ascii=False)
    what = "Facts snapshot (JSON; save it and run <code>sparkdoctor check --facts FILE</code> to re-evaluate it)"
    if clipped:
        what += f"; {len(clipped)} strings over {SNAPSHOT_CHARS} characters clipped"
    return what, fenced(body, "json")
