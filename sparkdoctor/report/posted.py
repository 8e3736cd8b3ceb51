"""The bug report as `sparkdoctor report` hands it to its view (sparkdoctor/views/bug_report.py): made to fit a GitHub issue or a forum post, per
format, and where the whole report went when it did not fit (sparkdoctor/commands/report.py writes it there)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkdoctor.findings import Report


@dataclass
class BugReport:
    judged: Report  # what it is drawn from
    attachment: Path
    redact: bool = True
    local: bool = False
    texts: dict[str, str] = field(default_factory=dict)
    whole: str | None = None  # the whole report (written to `attachment`), when the posted one was shortened

    def text(self, fmt: str) -> str:
        """The report made to fit `fmt` (github, forum)."""
        if fmt not in self.texts:
            from sparkdoctor.report import build_bug_report_fitted

            self.texts[fmt], whole = build_bug_report_fitted(self.judged, fmt, self.attachment.name,
                                                             redact=self.redact, local=self.local)
            self.whole = self.whole or whole
        return self.texts[fmt]
