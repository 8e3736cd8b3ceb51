"""`sparkdoctor report`: a bug report people can post, anonymized by default.

The report is drawn from the same Report `check` builds (findings judged on the real Facts), but
everything that leaves the box passes through one Redactor (anonymize/__init__.py) first: the Facts
are redacted as data (so the sections and the folded snapshot are), and every finding string is
redacted as text. Two shapes: GitHub markdown with the long parts folded in <details>
(report/github.py) and plain text for a forum (report/forum.py).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sparkdoctor.anonymize import Redactor, redactor_for
from sparkdoctor.facts import Facts
from sparkdoctor.fit import FORUM_LIMIT, GITHUB_LIMIT, fit, join
from sparkdoctor.report import judgement
from sparkdoctor.report.forum import forum_blocks, forum_notice, forum_stub
from sparkdoctor.report.github import github_blocks, github_notice, github_stub

if TYPE_CHECKING:
    from sparkdoctor.findings import Report


def redacted_facts(facts: Facts, redactor: Redactor) -> Facts:
    """A copy of `facts` with every string redacted (the original is not touched)."""
    data = redactor.data(facts.to_dict())
    return dataclasses.replace(facts, **{f.name: data[f.name] for f in dataclasses.fields(facts) if f.name in data})


def build_bug_report_fitted(report: Report, fmt: str, attachment: str, redact: bool = True,
                            local: bool = False) -> tuple[str, str | None]:
    """(the report for `report` (a findings.Report) in `fmt` (github | forum), made to fit a GitHub issue or a forum
    post; the whole report for the attachment named `attachment`, or None when the report fits as it is).

    `local`: the report is made on the box the Facts describe, so this machine's user and host
    names are learned as identities too (a snapshot from elsewhere teaches only its own)."""
    redactor = redactor_for(judgement.clipped(report.facts.to_dict()), enabled=redact, local=local)
    shown = redacted_facts(report.facts, redactor) if redact else report.facts
    if fmt == "github":
        blocks = github_blocks(report, shown, redactor)
        text, moved = fit(blocks, GITHUB_LIMIT, attachment, github_stub, github_notice)
    else:
        blocks = forum_blocks(report, shown, redactor)
        text, moved = fit(blocks, FORUM_LIMIT, attachment, forum_stub, forum_notice)
    return text, (join(blocks) if moved else None)
