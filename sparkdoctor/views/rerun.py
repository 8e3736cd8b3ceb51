"""`rerun`'s view: what is stale and why (--dry-run), or what re-measuring found (views/conclusions.py draws both)."""

from typing import Any

from sparkdoctor.conclusions.documents import RerunDocument
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View
from sparkdoctor.views.conclusions import plan, results


def _sarif(result: Result[RerunDocument], sink: Sink) -> str:
    """`rerun --format sarif`: for each conclusion and workaround re-measured, what judged its launches (the memory
    preflight, the post-mortem of a launch that died, log symptoms)."""
    from sparkdoctor.views.sarif import render_findings_sarif

    doc = result.data.to_json()
    findings: list[dict[str, Any]] = []
    for row in [*(doc.get("results") or []), *(doc.get("workarounds") or [])]:
        name = row.get("name") or row.get("label")
        findings += [{**f, "arm": f"{name}{' ' + f['arm'] if f.get('arm') else ''}"} for f in row.get("findings") or []]
    props = {"ledger": doc.get("ledger"), "dry_run": doc.get("dry_run"), "failed": doc.get("failed")}
    return render_findings_sarif(findings, category="rerun", properties=props, exit_code=result.exit_code) + "\n"


VIEW = View(RerunDocument, {
    Format.console: lambda result, sink: sink.wide(
        lambda console: (plan if result.data.dry_run else results)(console, result.data.to_json())),
    Format.json: lambda result, sink: result.data.to_json(),
    Format.sarif: _sarif})
