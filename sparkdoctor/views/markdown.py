"""`--format markdown`: a report to paste into a bug report or a forum post, anonymized as `sparkdoctor report` is.

GitHub-flavoured: a toolchain table, the findings with evidence and links, what could not be
evaluated or observed, the kernel probes, and the Facts snapshot folded into <details> so a
maintainer can re-run `sparkdoctor check --facts` on it. Every string from the box is clipped
(sparkdoctor.describe.clip); in the snapshot only strings longer than any real fact are, and it says so.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TYPE_CHECKING

from sparkdoctor.anonymize import REDACTED_NOTE, Redactor, redactor_for
from sparkdoctor.describe import (
    FACT_CHARS,
    PROSE_CHARS,
    SEVERITY_HEADING,
    clip,
    describe_box,
    kernel_rows,
    plural,
    stack_also_includes,
    summary_line,
    tracked_stack,
    unverified_line,
)
from sparkdoctor.fit import GITHUB_LIMIT, Block, fit
from sparkdoctor.report.github import SNAPSHOT_CHARS, bounded
from sparkdoctor.report.judgement import WITHHELD, clipped, shown_fingerprint

if TYPE_CHECKING:
    from sparkdoctor.findings import Report

CELL_CHARS = PROSE_CHARS  # a cell or line that joins several facts, each clipped already
HEAD = PROSE_CHARS + 400  # the most of a string any line shows, and a cut token's rest (anonymize/wrapped.MAX_RUN)


_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)")
"""A code span as GitHub reads one: a run of backticks closed by a run of the same length (nothing renders inside)."""
_SPECIAL = re.compile(r"([\\`*\[\]<#~!&]|(?<![^\W_])_|_(?![^\W_]))")
"""Outside a code span, what could start a link, an image, HTML, an entity, emphasis, a heading or a code span (an
`_` between two letters or digits, as in `sm_121a`, never starts emphasis on GitHub: it stays as written; a `>`
only starts a quote at the start of a line)."""


def _text(text: object, limit: int = FACT_CHARS) -> str:
    """Prose from the box or the matrix, clipped, on one line (a line break from the box could start a code fence
    or a heading), as inline_markdown() shows it."""
    return inline_markdown(" ".join(clip(text, limit).splitlines()))


def inline_markdown(line: str) -> str:
    """`line` as markdown that shows it as written: its balanced `code spans` kept, every other character that
    markdown acts on escaped, so that a package version or a matrix file's remedy holding `[x](URL)`, `![x](URL)`,
    `<img ...>` or one stray backtick is never a link, an image, HTML or the end of a code span."""
    out, at = [], 0
    for span in _CODE_SPAN.finditer(line):
        out += [_SPECIAL.sub(r"\\\1", line[at:span.start()]), span.group()]
        at = span.end()
    shown = "".join([*out, _SPECIAL.sub(r"\\\1", line[at:])])
    return "\\" + shown if shown.startswith(">") else shown


def _cell(text: object, limit: int = FACT_CHARS) -> str:
    """A table cell: pipes escaped, newlines folded."""
    return _text(text, limit).replace("|", "\\|").replace("\n", " ").strip() or " "


def _code(text: object) -> str:
    """Inline code that survives backticks inside the text: its fence is longer than any backtick run in it."""
    s = " ".join(clip(text).splitlines())
    fence = "`" * (max((len(run) for run in re.findall("`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _mark(value: object) -> str:
    words: dict[object, str] = {True: "yes", False: "NO"}
    return words.get(value, "-")


def render_markdown(report: Report) -> str:
    """Anonymized as `sparkdoctor report` anonymizes (it is pasted where others read it): this machine's and the
    snapshot's user and host names, addresses, home paths and secrets replaced in every line."""
    facts = report.facts
    tool = facts.tool or {}
    redactor = redactor_for(clipped(facts.to_dict()), local=True)
    shown = shown_fingerprint(facts, redactor)
    shown_facts = dataclasses.replace(facts)  # a copy: the caller's facts are not touched
    for f in dataclasses.fields(facts):
        setattr(shown_facts, f.name, _redacted(getattr(facts, f.name), redactor))
    findings = [dataclasses.replace(f, evidence=[str(_redacted(e, redactor)) for e in f.evidence])  # they quote facts
                for f in report.findings]
    report = dataclasses.replace(report, facts=shown_facts, findings=findings)
    out: list[str] = [
        "## sparkdoctor report",
        "",
        f"**{summary_line(report)}**",
        "",
        f"sparkdoctor {_text(tool.get('version', '?'))} · snapshot taken {_text(facts.taken())} · fingerprint "
        + (shown if shown == WITHHELD else _code(shown)),
        "",
        f"<sub>{REDACTED_NOTE}</sub>",
        "",
    ]
    blocks = [Block("head", out, essential=True)]
    for section in (_toolchain, _findings, _not_known, _kernels, _nearest_stack, _snapshot):
        lines = [redactor.text(line) for line in section(report)]
        title = lines[0].lstrip("#").strip() if lines and lines[0].startswith("#") else "Facts snapshot"
        blocks.append(Block(title, lines, essential=section in (_toolchain, _findings)))
    text, _ = fit(blocks, GITHUB_LIMIT, "", _left_out, _fit_notice)  # a GitHub issue body holds 65,536 characters
    return str(text)


def _redacted(value: object, redactor: Redactor) -> object:
    """`value` with each string redacted before a line below clips it or folds its breaks into spaces: an address,
    e-mail or host name the clip cuts (`192.168.100.…`) is no longer one the line's own redaction knows, and a token a
    log wrapper cut at a line's end is found only across the break (anonymize/wrapped.py). Only what can be shown
    (HEAD characters) is read: a 25 MB field costs no more than a short one."""
    if isinstance(value, str):
        return redactor.text(value[:HEAD]) + value[HEAD:]
    if isinstance(value, dict):
        return {k: _redacted(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, redactor) for v in value]
    return value


def _left_out(block: Block, _attachment: str) -> list[str]:
    note = (f"*Left out to fit a GitHub issue ({len(block.text()):,} characters): "
            "`sparkdoctor report` writes it whole in an attachment; `check --save-facts FILE` saves the snapshot.*")
    return [f"### {block.title}", "", note, ""]


def _fit_notice(_attachment: str) -> list[str]:
    note = ("*This report was shortened to fit a GitHub issue (65,536 characters): the sections marked "
            "\"left out\" are whole in `sparkdoctor report`'s attachment.*")
    return [note, ""]


def _toolchain(report: Report) -> list[str]:
    facts = report.facts
    rows = [*describe_box(facts), *tracked_stack(facts)]
    joined = []  # rows that join several facts, each clipped on its own
    for t in facts.toolkits or []:
        if t.get("tool") == "ptxas":
            used = ", ".join(clip(u) for u in t.get("used_by") or []) or "-"
            knows: dict[object, str] = {True: "knows sm_121a", False: "does not know sm_121a"}
            sm = knows.get(t.get("sm_121a"), "sm_121a support unknown")
            joined.append((f"ptxas ({clip(t.get('source', '?'))})", f"{clip(t.get('version', '?'))} · {sm} · used by {used} · {_code(t.get('path', ''))}"))
    if facts.env:  # the env collector keeps only what matters and redacts secret-looking values
        joined.append(("env", ", ".join(_code(f"{k}={v}") for k, v in sorted(facts.env.items()))))
    out = ["### Toolchain", "", "| | |", "|---|---|"]
    out += [f"| {_cell(label)} | {_cell(value)} |" for label, value in rows]
    out += [f"| {_cell(label)} | {_cell(value, CELL_CHARS)} |" for label, value in joined]
    return out + [""]


def _findings(report: Report) -> list[str]:
    out = ["### Findings", ""]
    if not report.findings:
        out += ["No known problem matches this environment." if report.probed() else "None: the target could not be probed.", ""]
    if report.unverified:
        out += [f"**Unverified** (the verdict says so; exit 0 unless something else fails): {_text(unverified_line(report), CELL_CHARS)}", ""]
    for f in report.findings:
        out += [f"#### {SEVERITY_HEADING[f.severity]}: {_code(f.id)} {_text(f.title, PROSE_CHARS)}", ""]
        out += [f"*{_text(f.component)} · action: {_text(f.action)} · evidence: {_text(f.evidence_level)}*", ""]
        if f.summary:
            out += [_text(f.summary, PROSE_CHARS), ""]
        if f.evidence:
            out += ["Evidence:", *(f"- {_text(e)}" for e in f.evidence), ""]
        if f.remedy:
            out += [f"**What to do:** {_text(f.remedy, PROSE_CHARS)}", ""]
        if f.fix:
            out += [f"**Fix:** {_code(f.fix)} (`sparkdoctor fix` shows the plan)", ""]
        if f.refs:
            out += ["References: " + " · ".join(f"<{clip(r)}>" for r in f.refs), ""]
    if report.ignored:
        out += ["Ignored (by `--ignore` or the config file): " + ", ".join(_code(i) for i in report.ignored), ""]
    return out


def _not_known(report: Report) -> list[str]:
    """What could not be evaluated (entries) or observed (collectors)."""
    out: list[str] = []
    if report.unknown:
        out += ["### Could not evaluate", ""]
        out += [f"- {_code(ev.entry.id)}: {_text('; '.join(ev.unknowns), CELL_CHARS)}" for ev in report.unknown]
        out.append("")
    if report.facts.errors:
        out += ["### Could not observe", ""]
        out += [f"- {_text(e.get('collector', '?'))}: {_text(e.get('error', ''))}" for e in report.facts.errors]
        out.append("")
    return out


def _kernels(report: Report) -> list[str]:
    rows = kernel_rows(report.facts)
    if not rows:
        return []
    out = ["### Kernel probes", "", "| probe | status | ptxas | arch | compiled | SASS | ran | verified | note |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        note = r["note"] or (r["detail"] if r["first"] else "")
        out.append("| " + " | ".join(_cell(x) for x in (
            r["probe"] if r["first"] else "", r["status"] if r["first"] else "", r["ptxas"] or "-", r["arch"] or "-",
            _mark(r["compiled"]), _mark(r["sass_ok"]), _mark(r["ran"]), _mark(r["verified"]), note or "",
        )) + " |")
    return out + [""]


def _nearest_stack(report: Report) -> list[str]:
    nearest = report.nearest_stack
    if nearest is None:
        return []
    out = ["### Nearest known-good stack", "", f"{_code(nearest.id)} {_text(nearest.title)}", ""]
    if not nearest.differences:
        out.append("- this environment matches it" if nearest.matches else "- what this environment has of it matches")
    out += [f"- {_text(d)}" for d in nearest.differences]
    also = stack_also_includes(nearest)
    if also:
        out += ["", _text(also, CELL_CHARS)]
    return out + [""]


def _snapshot(report: Report) -> list[str]:
    clipped: list[int] = []
    snapshot = json.dumps(bounded(report.facts.to_dict(), clipped), indent=2)
    fence = "`" * max(3, max((len(run) for run in re.findall("`+", snapshot)), default=0) + 1)
    what = "Full facts snapshot"
    if clipped:
        what = f"Facts snapshot ({plural(len(clipped), 'string')} over {SNAPSHOT_CHARS} characters clipped; <code>--save-facts</code> keeps them)"
    return [
        f"<details><summary>{what} (JSON; <code>sparkdoctor check --facts FILE</code> re-evaluates it)</summary>",
        "",
        f"{fence}json",
        snapshot,
        fence,
        "",
        "</details>",
    ]
