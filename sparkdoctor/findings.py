"""Findings and the Report every renderer draws from; exit codes live here too.

A Finding is what a matched matrix entry means for this box: what is wrong, the evidence (which facts
matched, probe output), what to do, and where it is written down.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.arch import settle
from sparkdoctor.facts import Facts
from sparkdoctor.matrix import SEVERITIES, Evaluation, Matrix, Stack, evaluate_all, version_in

REPORT_SCHEMA = 1

from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK, EXIT_UNPROBEABLE, EXIT_USAGE  # noqa: F401 (re-exported)

SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}  # info < warn < error


@dataclass
class Finding:
    id: str
    severity: str
    action: str
    title: str
    summary: str
    remedy: str
    evidence: list[str]
    refs: list[str]
    component: str
    fix: str | None = None
    symptoms: list[str] = field(default_factory=list)
    verified_by: dict[str, Any] | None = None

    @classmethod
    def from_evaluation(cls, ev: Evaluation) -> "Finding":
        e = ev.entry
        return cls(
            id=e.id,
            severity=e.severity,
            action=e.action,
            title=e.title,
            summary=e.summary,
            remedy=e.remedy,
            evidence=ev.evidence,
            refs=e.refs,
            component=e.component,
            fix=e.fix,
            symptoms=e.symptoms,
            verified_by=e.verified_by,
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class StackDistance:
    """How far the box is from a known-good stack: the differences, in words."""

    id: str
    title: str
    differences: list[str]
    refs: list[str]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def stack_distance(stack: Stack, facts: Facts) -> StackDistance:
    diffs: list[str] = []
    for name, spec in stack.packages.items():
        pkg = facts.package(name)
        if pkg is None:
            diffs.append(f"{name} {spec} wanted, not installed")
        elif version_in(pkg.get("version"), spec) is False:
            diffs.append(f"{name} {pkg.get('version')} installed, {spec} wanted")
    env = facts.env or {}
    for name, value in stack.env.items():
        if env.get(name) != value:
            diffs.append(f"{name}={value} wanted, {'is ' + env[name] if name in env else 'not set'}")
    return StackDistance(stack.id, stack.title, diffs, stack.refs)


@dataclass
class Report:
    facts: Facts
    evaluations: list[Evaluation]
    findings: list[Finding]
    ignored: list[str]
    fail_on: str
    matrix_files: list[str]
    stacks: list[StackDistance] = field(default_factory=list)  # nearest known-good stack first

    @property
    def nearest_stack(self) -> StackDistance | None:
        return self.stacks[0] if self.stacks else None

    @property
    def unknown(self) -> list[Evaluation]:
        return [ev for ev in self.evaluations if ev.outcome == "unknown"]

    def counts(self) -> dict[str, int]:
        c = {s: 0 for s in SEVERITIES}
        for f in self.findings:
            c[f.severity] += 1
        return c

    def failing(self) -> list[Finding]:
        floor = SEVERITY_RANK[self.fail_on]
        return [f for f in self.findings if SEVERITY_RANK[f.severity] >= floor]

    def probed(self) -> bool:
        """False when nothing about the target's packages could be observed."""
        return self.facts.packages is not None

    def exit_code(self) -> int:
        if not self.probed():
            return EXIT_UNPROBEABLE
        return EXIT_FINDINGS if self.failing() else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON document (`--format json`)."""
        return {
            "schema": REPORT_SCHEMA,
            "tool": self.facts.tool,
            "fingerprint": self.facts.fingerprint(),
            "fail_on": self.fail_on,
            "exit_code": self.exit_code(),
            "summary": {
                **self.counts(),
                "evaluated": len(self.evaluations),
                "unknown": len(self.unknown),
                "ignored": len(self.ignored),
            },
            "findings": [f.to_dict() for f in self.findings],
            "unknown": [{"id": ev.entry.id, "title": ev.entry.title, "missing": ev.unknowns} for ev in self.unknown],
            "ignored": self.ignored,
            "stacks": [s.to_dict() for s in self.stacks],
            "facts": self.facts.to_dict(),
        }


def probe_evidence(verified_by: dict[str, Any] | None, facts: Facts) -> str | None:
    """What the probe that proves an entry said on this box, if it ran: the strongest evidence there is."""
    if not verified_by or not facts.kernels:
        return None
    result = facts.kernels.get(verified_by.get("probe"))
    if not isinstance(result, dict) or result.get("status") in (None, "skipped"):
        return None
    status, expect = result["status"], verified_by.get("expect")
    verdict = "confirms this entry" if status == expect else f"this entry expects {expect}"
    detail = f": {result['detail']}" if result.get("detail") else ""
    return f"probe {verified_by['probe']} {status}{detail} → {verdict}"


def build_report(facts: Facts, matrix: Matrix, fail_on: str = "error", ignore: set[str] | None = None) -> Report:
    ignore = ignore or set()
    facts.arch = settle(facts.arch)  # one place for every path: live, snapshot, hand-built (sparkdoctor.arch)
    evaluations = evaluate_all(matrix, facts)
    findings = [
        Finding.from_evaluation(ev) for ev in evaluations if ev.outcome == "match" and ev.entry.id not in ignore
    ]
    for finding in findings:
        line = probe_evidence(finding.verified_by, facts)
        if line:
            finding.evidence.append(line)
    findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.component, f.id))
    ignored = sorted(ev.entry.id for ev in evaluations if ev.outcome == "match" and ev.entry.id in ignore)
    stacks: list[StackDistance] = []
    if facts.packages is not None:
        stacks = sorted((stack_distance(s, facts) for s in matrix.stacks), key=lambda d: len(d.differences))
    return Report(facts, evaluations, findings, ignored, fail_on, matrix.files, stacks)
