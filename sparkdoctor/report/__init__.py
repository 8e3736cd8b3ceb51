"""`sparkdoctor report`: a bug report people can post, anonymized by default.

The report is drawn from the same Report `check` builds (findings judged on the real Facts), but
everything that leaves the box passes through one Redactor (anonymize/__init__.py) first: the Facts
are redacted as data (so the sections and the folded snapshot are), and every finding string is
redacted as text. Two shapes: GitHub markdown with the long parts folded in <details>
(report/github.py) and plain text for a forum (report/forum.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkdoctor.anonymize import Redactor, redactor_for
from sparkdoctor.facts import Facts
from sparkdoctor.fit import FORUM_LIMIT, GITHUB_LIMIT, Block, fit, join
from sparkdoctor.report import judgement
from sparkdoctor.report.forum import forum_blocks, forum_notice, forum_stub
from sparkdoctor.report.github import github_blocks, github_notice, github_stub

if TYPE_CHECKING:
    from sparkdoctor.findings import Report

REPORT_FORMATS = ("github", "forum")


def redacted_facts(facts: Facts, redactor: Redactor) -> Facts:
    """A copy of `facts` with every string redacted (the original is not touched)."""
    data = redactor.data(facts.to_dict())
    return dataclasses.replace(facts, **{f.name: data[f.name] for f in dataclasses.fields(facts) if f.name in data})


def build_bug_report(report: Report, fmt: str, redact: bool = True, local: bool = False) -> str:
    """The bug report for `report` (a findings.Report) in `fmt` (github | forum), whole, however long.

    `local`: the report is made on the box the Facts describe, so this machine's user and host
    names are learned as identities too (a snapshot from elsewhere teaches only its own)."""
    return join(_blocks(report, fmt, redact, local)[0])


def build_bug_report_fitted(report: Report, fmt: str, attachment: str, redact: bool = True,
                            local: bool = False) -> tuple[str, str | None]:
    """(the report, made to fit a GitHub issue or a forum post; the whole report for the attachment named
    `attachment`, or None when the report fits as it is)."""
    blocks, stub, notice = _blocks(report, fmt, redact, local)
    text, moved = fit(blocks, GITHUB_LIMIT if fmt == "github" else FORUM_LIMIT, attachment, stub, notice)
    return text, (join(blocks) if moved else None)


def _blocks(report: Report, fmt: str, redact: bool, local: bool) -> tuple[list[Block], Callable[[Block, str], list[str]], Callable[[str], list[str]]]:
    if fmt not in REPORT_FORMATS:
        raise ValueError(f"unknown report format {fmt!r}")
    redactor = redactor_for(judgement.clipped(report.facts.to_dict()), enabled=redact, local=local)
    shown = redacted_facts(report.facts, redactor) if redact else report.facts
    if fmt == "github":
        return github_blocks(report, shown, redactor), github_stub, github_notice
    return forum_blocks(report, shown, redactor), forum_stub, forum_notice
