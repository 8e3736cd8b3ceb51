"""`rerun`'s view: what is stale and why (--dry-run), or what re-measuring found (views/conclusions.py draws both)."""

from sparkdoctor.conclusions.documents import RerunDocument
from sparkdoctor.result import Format
from sparkdoctor.views import View
from sparkdoctor.views.conclusions import plan, results

VIEW = View(RerunDocument, {
    Format.console: lambda result, sink: sink.wide(
        lambda console: (plan if result.data.dry_run else results)(console, result.data.to_json())),
    Format.json: lambda result, sink: result.data.to_json()})
