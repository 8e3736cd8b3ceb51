"""`--format markdown`: a report to paste into a bug report or a forum post.

GitHub-flavoured: a toolchain table, the findings with evidence and links, what could not be
evaluated or observed, the kernel probes, and the full Facts snapshot folded into <details> so a
maintainer can re-run `sparkdoctor check --facts` on it.
"""

from __future__ import annotations

import json

from sparkdoctor.render.describe import (
    SEVERITY_HEADING,
    describe_arch,
    describe_driver,
    describe_gpus,
    describe_host,
    describe_target,
    kernel_rows,
    summary_line,
    tracked_stack,
)


def _text(text: object) -> str:
    """Prose from the box or the matrix: keep `code spans`, but stop `*` from starting emphasis and
    `<name>` from vanishing as an HTML tag."""
    parts = str(text).split("`")
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        parts[i] = parts[i].replace("*", "\\*").replace("<", "\\<")
    return "`".join(parts)


def _cell(text: object) -> str:
    """A table cell: pipes escaped, newlines folded."""
    return _text(text).replace("|", "\\|").replace("\n", " ").strip() or " "


def _code(text: object) -> str:
    """Inline code that survives backticks inside the text."""
    s = str(text)
    fence = "``" if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _mark(value: object) -> str:
    return {True: "yes", False: "NO"}.get(value, "-")  # type: ignore[arg-type]


def render_markdown(report) -> str:
    facts = report.facts
    out: list[str] = ["## sparkdoctor report", ""]
    out.append(f"**{summary_line(report)}**")
    out.append("")
    tool = facts.tool or {}
    out.append(f"sparkdoctor {tool.get('version', '?')} · snapshot taken {facts.taken_at} · fingerprint {_code(facts.fingerprint())}")
    out.append("")

    out += ["### Toolchain", "", "| | |", "|---|---|"]
    rows = [
        ("target", describe_target(facts)),
        ("host", describe_host(facts)),
        ("GPU", describe_gpus(facts)),
        ("arch", describe_arch(facts)),
        ("driver", describe_driver(facts)),
    ]
    rows += [(name, desc) for name, desc in tracked_stack(facts)]
    for t in facts.toolkits or []:
        if t.get("tool") == "ptxas":
            used = ", ".join(t.get("used_by") or []) or "-"
            sm = {True: "knows sm_121a", False: "does not know sm_121a"}.get(t.get("sm_121a"), "sm_121a support unknown")
            rows.append((f"ptxas ({t.get('source', '?')})", f"{t.get('version', '?')} · {sm} · used by {used} · {_code(t.get('path', ''))}"))
    if facts.env:  # the env collector keeps only what matters and redacts secret-looking values
        rows.append(("env", ", ".join(_code(f"{k}={v}") for k, v in sorted(facts.env.items()))))
    for label, value in rows:
        out.append(f"| {_cell(label)} | {_cell(value)} |")
    out.append("")

    out.append("### Findings")
    out.append("")
    if not report.findings:
        out.append("No known problem matches this environment." if report.probed() else "None: the target could not be probed.")
        out.append("")
    for f in report.findings:
        out.append(f"#### {SEVERITY_HEADING[f.severity]}: {_code(f.id)} {_text(f.title)}")
        out.append("")
        out.append(f"*{f.component} · action: {f.action}*")
        out.append("")
        if f.summary:
            out += [_text(f.summary), ""]
        if f.evidence:
            out.append("Evidence:")
            out += [f"- {_text(e)}" for e in f.evidence]
            out.append("")
        if f.remedy:
            out += [f"**What to do:** {_text(f.remedy)}", ""]
        if f.fix:
            out += [f"**Fix:** {_code(f.fix)} (`sparkdoctor fix` shows the plan)", ""]
        if f.refs:
            out.append("References: " + " · ".join(f"<{r}>" for r in f.refs))
            out.append("")
    if report.ignored:
        out += ["Ignored (by `--ignore` or the config file): " + ", ".join(_code(i) for i in report.ignored), ""]

    if report.unknown:
        out += ["### Could not evaluate", ""]
        out += [f"- {_code(ev.entry.id)}: {_text('; '.join(ev.unknowns))}" for ev in report.unknown]
        out.append("")
    if facts.errors:
        out += ["### Could not observe", ""]
        out += [f"- {e.get('collector', '?')}: {_text(e.get('error', ''))}" for e in facts.errors]
        out.append("")

    rows_k = kernel_rows(facts)
    if rows_k:
        out += ["### Kernel probes", "", "| probe | status | ptxas | arch | compiled | SASS | ran | verified | note |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in rows_k:
            note = r["note"] or (r["detail"] if r["first"] else "")
            out.append("| " + " | ".join(_cell(x) for x in (
                r["probe"] if r["first"] else "", r["status"] if r["first"] else "", r["ptxas"] or "-", r["arch"] or "-",
                _mark(r["compiled"]), _mark(r["sass_ok"]), _mark(r["ran"]), _mark(r["verified"]), note or "",
            )) + " |")
        out.append("")

    nearest = getattr(report, "nearest_stack", None)
    if nearest is not None:
        out += ["### Nearest known-good stack", "", f"{_code(nearest.id)} {_text(nearest.title)}", ""]
        out += [f"- {_text(d)}" for d in nearest.differences] or ["- this environment matches it"]
        out.append("")

    snapshot = json.dumps(facts.to_dict(), indent=2)
    fence = "````" if "```" in snapshot else "```"
    out += [
        "<details><summary>Full facts snapshot (JSON; <code>sparkdoctor check --facts FILE</code> re-evaluates it)</summary>",
        "",
        f"{fence}json",
        snapshot,
        fence,
        "",
        "</details>",
    ]
    return "\n".join(out)
