"""The bug report as `sparkdoctor report` hands it to its views: made to fit a GitHub issue or a forum post, per
format, and where the whole report went when it did not fit (sparkdoctor/commands/report.py writes it there)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkdoctor.result import Format

if TYPE_CHECKING:
    from sparkdoctor.result import Result
    from sparkdoctor.sink import Sink


@dataclass
class BugReport:
    """The report as posted (made to fit a GitHub issue or a forum post), per format; and where the whole report
    went when it did not fit."""

    judged: Any  # the findings.Report it is drawn from
    attachment: Path
    redact: bool = True
    local: bool = False
    texts: dict[Format, str] = field(default_factory=dict)
    whole: str | None = None  # the whole report (written to `attachment`), when the posted one was shortened

    def text(self, fmt: Format) -> str:
        if fmt not in self.texts:
            from sparkdoctor.report import build_bug_report_fitted

            self.texts[fmt], whole = build_bug_report_fitted(self.judged, fmt.value, self.attachment.name,
                                                             redact=self.redact, local=self.local)
            self.whole = self.whole or whole
        return self.texts[fmt]


# ---- views (sparkdoctor/views.py): (Result, Sink) -> the whole document -----------------------------------
def report_view_github(result: Result, sink: Sink) -> str:
    report: BugReport = result.data
    return report.text(Format.github)


def report_view_forum(result: Result, sink: Sink) -> str:
    report: BugReport = result.data
    return report.text(Format.forum)
