"""`report`'s view: the bug report made to fit a GitHub issue (markdown, long parts folded) or a forum post."""

from sparkdoctor.report.posted import BugReport
from sparkdoctor.result import Format
from sparkdoctor.views import View

VIEW = View(BugReport, {Format.github: lambda result, sink: result.data.text(Format.github.value),
                        Format.forum: lambda result, sink: result.data.text(Format.forum.value)})
