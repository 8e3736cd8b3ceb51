"""`--format junit`: one <testsuite name="sparkdoctor"> a CI system can show and gate on.

Every evaluated matrix entry is a testcase named "<entry id>: <title>" in class
"sparkdoctor.<component>":
  match at/above --fail-on   <failure> with the evidence, what to do and the references
  match below --fail-on      passes; the finding goes to the testcase's <system-out>
  ignored match              <skipped> (ignored by --ignore or the config file)
  unknown                    <skipped message="could not evaluate: ...">
  withdrawn                  <skipped message="withdrawn: ...">
  clear                      passes
A kernel probe that failed with no entry to explain it is a testcase of its own ("probe-<id>: ...",
a <failure>, or <skipped> when ignored); one that could not run at all is a <skipped> testcase
"probe <id>: ..." with message "unverified: ...". A target that could not be probed at all adds one
<error> testcase, so the report is not all green while the exit code says 3. Collector errors go to
the suite's <system-err>; the fingerprint, the verdict and the arch (where it came from, and
arch.assumed with the reason when it was assumed) are suite properties. Every string from the
snapshot is clipped (sparkdoctor.describe.clip).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from sparkdoctor.describe import (
    PROSE_CHARS,
    arch_assumed,
    clip,
    describe_arch,
    summary_line,
)
from sparkdoctor.findings import SEVERITY_RANK
from sparkdoctor.matrix.loader import fix_hint

if TYPE_CHECKING:
    from sparkdoctor.findings import Finding, Report
    from sparkdoctor.matrix.model import Evaluation

# XML 1.0 cannot carry most control characters; probe output sometimes has them.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
FINDING_CHARS = 20 * PROSE_CHARS  # a whole finding: title, evidence lines (each clipped), remedy, refs


def _clean(text: object, limit: int = PROSE_CHARS) -> str:
    return _INVALID_XML.sub("", clip(text, limit))


def _finding_text(finding: Finding) -> str:
    lines = [f"{finding.severity} ({finding.action}, evidence {finding.evidence_level}): {finding.title}"]
    if finding.evidence:
        lines.append("evidence:")
        lines += [f"  - {clip(e)}" for e in finding.evidence]
    if finding.remedy:
        lines.append(f"what to do: {finding.remedy}")
    if finding.fix:
        lines.append(f"fix: {finding.fix} ({fix_hint(finding.fix)})")
    if finding.refs:
        lines.append("refs:")
        lines += [f"  - {clip(r)}" for r in finding.refs]
    return "\n".join(lines)


def render_junit(report: Report) -> str:
    facts = report.facts
    suite = ET.Element("testsuite", name="sparkdoctor")
    if facts.taken_at:
        suite.set("timestamp", _clean(facts.taken_at))
    _properties(ET.SubElement(suite, "properties"), report)

    if not report.probed():
        tc = _case(suite, "sparkdoctor.target", "target: probe the target environment")
        why = "; ".join(f"{clip(e.get('collector'))}: {clip(e.get('error'))}" for e in facts.errors) or "installed packages unknown"
        err = ET.SubElement(tc, "error", message=_clean(f"the target could not be probed: {why}"), type="unprobeable")
        err.text = _clean(why, FINDING_CHARS)
    findings = {f.id: f for f in report.findings}
    for ev in report.evaluations:
        _entry_case(suite, ev, findings.get(ev.entry.id), report)
    _probe_cases(suite, report)
    if facts.errors:
        ET.SubElement(suite, "system-err").text = _clean(
            "\n".join(f"could not observe: {clip(e.get('collector'))}: {clip(e.get('error'))}" for e in facts.errors), FINDING_CHARS
        )

    return document(suite, f"{sum(v for v in (facts.timings_ms or {}).values() if isinstance(v, (int, float))) / 1000:.3f}")


def document(suite: ET.Element, time: str | None = None) -> str:
    """The suite, its testcases' outcomes counted (and its `time`, when given), inside a <testsuites> of its name."""
    cases = suite.findall("testcase")
    counts = {"tests": len(cases)}
    for outcome, tag in (("failures", "failure"), ("errors", "error"), ("skipped", "skipped")):
        counts[outcome] = sum(1 for tc in cases if tc.find(tag) is not None)
    for key, value in counts.items():
        suite.set(key, str(value))
    if time is not None:
        suite.set("time", time)
    root = ET.Element("testsuites", {"name": str(suite.get("name")), **{k: str(v) for k, v in counts.items()}})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _properties(props: ET.Element, report: Report) -> None:
    facts = report.facts
    arch = facts.arch or {}
    for name, value in (
        ("sparkdoctor.version", (facts.tool or {}).get("version")),
        ("fingerprint", facts.fingerprint()),
        ("arch", arch.get("value") or "none"),
        ("arch.source", arch.get("source") or "unknown"),
        ("arch.description", describe_arch(facts)),
        ("arch.assumed", arch_assumed(facts)),
        ("target", (facts.target or {}).get("python") or (facts.target or {}).get("kind")),
        ("fail_on", report.fail_on),
        ("exit_code", report.exit_code()),
        ("verdict", report.verdict()),
        ("summary", summary_line(report)),
    ):
        if value is not None:
            ET.SubElement(props, "property", name=name, value=_clean(value))


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=_clean(classname), name=_clean(name), time="0")


def _entry_case(suite: ET.Element, ev: Evaluation, finding: Finding | None, report: Report) -> None:
    entry = ev.entry
    tc = _case(suite, f"sparkdoctor.{entry.component}", f"{entry.id}: {entry.title}")
    if ev.outcome == "match" and entry.id in report.ignored:
        ET.SubElement(tc, "skipped", message="ignored by --ignore or the config file")
    elif ev.outcome == "match":
        text = _clean(_finding_text(finding), FINDING_CHARS) if finding else ""
        if SEVERITY_RANK[entry.severity] >= SEVERITY_RANK[report.fail_on]:
            ET.SubElement(tc, "failure", message=_clean(entry.title), type=entry.severity).text = text
        else:
            ET.SubElement(tc, "system-out").text = text
    elif ev.outcome == "unknown":
        ET.SubElement(tc, "skipped", message=_clean("could not evaluate: " + "; ".join(ev.unknowns)))
    elif ev.outcome == "withdrawn":
        ET.SubElement(tc, "skipped", message=_clean(f"withdrawn: {entry.withdrawn}"))
    # "clear" passes: an empty testcase


def _probe_cases(suite: ET.Element, report: Report) -> None:
    """Failed probes no entry explains (errors: they fail at every --fail-on) and unverified ones."""
    for finding in report.probe_findings:
        tc = _case(suite, f"sparkdoctor.{finding.component}", f"{finding.id}: {finding.title}")
        if finding.id in report.ignored:
            ET.SubElement(tc, "skipped", message="ignored by --ignore or the config file")
        else:
            failure = ET.SubElement(tc, "failure", message=_clean(finding.title), type=finding.severity)
            failure.text = _clean(_finding_text(finding), FINDING_CHARS)
    for probe in report.unverified:
        tc = _case(suite, "sparkdoctor.kernels", f"probe {probe.probe}: kernel probe could not run")
        ET.SubElement(tc, "skipped", message=_clean(f"unverified: the probe could not run ({probe.status}): {clip(probe.detail)}"))
