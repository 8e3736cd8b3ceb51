"""The judgement part of a bug report (verdict, findings, what could not be evaluated, the nearest
known-good stack) as redacted plain strings, shared by the GitHub and forum renderers.

Findings are judged on the real Facts, so their evidence can quote a path, an address or a probe's
output: every string here passes through the Redactor, matrix prose included (it costs nothing and
a probe finding's title is made from probe output).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sparkdoctor.anonymize import Redactor
from sparkdoctor.describe import (
    PROSE_CHARS,
    SEVERITY_HEADING,
    clip,
    stack_also_includes,
    summary_line,
    unverified_line,
)

if TYPE_CHECKING:
    from sparkdoctor.facts import Facts
    from sparkdoctor.findings import Report


def shown_fingerprint(facts: Facts, redactor: Redactor) -> str:
    """The fingerprint as an anonymized document may show it: the real one (the one `check` prints) when none of the
    values it is a hash of was replaced; else withheld, since a hash of a few guessable values (an address, a user
    name in a path) gives them back to whoever tries them. A value longer than any shown is not read whole: withheld."""
    material = json.loads(json.dumps(facts.fingerprint_material(), default=list))
    if not redactor.enabled or (_clip(material) == material and redactor.data(material) == material):
        return facts.fingerprint()
    return WITHHELD


def clipped(data: Mapping[str, object]) -> dict[str, object]:
    """`data` with every string cut to PROSE_CHARS characters: what a report shows of it at most, and so all its
    Redactor needs to learn from (learning from a 25 MB field took 15 s)."""
    return {k: _clip(v) for k, v in data.items()}


def _clip(data: object) -> object:
    if isinstance(data, str):
        return data[:PROSE_CHARS]
    if isinstance(data, dict):
        return {k: _clip(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_clip(v) for v in data]
    return data


WITHHELD = "withheld (it is a hash of values this report replaced)"


@dataclass
class FindingText:
    severity: str  # error | warning | info
    id: str
    title: str
    where: str  # component · action
    evidence: list[str] = field(default_factory=list)
    remedy: str = ""
    fix: str = ""
    refs: list[str] = field(default_factory=list)


def verdict_line(report: Report, r: Redactor) -> str:
    return r.text(summary_line(report))


def findings(report: Report, r: Redactor) -> list[FindingText]:
    return [FindingText(
        severity=SEVERITY_HEADING.get(f.severity, f.severity),
        id=clip(r.text(f.id), 200),
        title=clip(r.text(f.title), PROSE_CHARS),
        where=clip(r.text(f"{f.component} · {f.action}"), 200),
        evidence=[clip(r.text(e)) for e in f.evidence],
        remedy=clip(r.text(f.remedy or ""), PROSE_CHARS),
        fix=clip(r.text(f.fix or ""), 200),
        refs=[clip(r.text(ref), 500) for ref in f.refs],
    ) for f in report.findings]


def not_evaluated(report: Report, r: Redactor) -> list[str]:
    """`entry-id: why` for every entry that could not be evaluated, and the unverified probes."""
    lines = [clip(r.text(f"{ev.entry.id}: {'; '.join(ev.unknowns)}"), PROSE_CHARS) for ev in report.unknown]
    if report.unverified:
        lines.append(clip(r.text(unverified_line(report)), PROSE_CHARS))
    return lines


def nearest_stack(report: Report, r: Redactor) -> list[str]:
    """The nearest known-good stack: its id and title, then each difference."""
    nearest = report.nearest_stack
    if nearest is None:
        return []
    lines = [clip(r.text(f"{nearest.id}: {nearest.title}"), PROSE_CHARS)]
    if nearest.image_only:  # not something pip can move this box to
        lines.append(clip(r.text(f"image only: {nearest.image_only}"), PROSE_CHARS))
    if not nearest.differences:
        lines.append("this environment matches it" if nearest.matches else "what this environment has of it matches")
    lines += [clip(r.text(d)) for d in nearest.differences]
    also = stack_also_includes(nearest)
    if also:
        lines.append(clip(r.text(also), PROSE_CHARS))
    return lines


def ignored(report: Report) -> list[str]:
    return [clip(i, 200) for i in report.ignored]
