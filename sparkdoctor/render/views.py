"""`check`'s report in each of its formats, as sparkdoctor/views.py calls them: (result, sink) -> text or document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparkdoctor.result import Result
    from sparkdoctor.sink import Sink


def report_console(result: Result, sink: Sink) -> str:
    from sparkdoctor.render.console import console_text

    verbose = bool(result.options.get("verbose"))
    return console_text(result.data, sink.console(), verbose, ascii_only=sink.ascii_only)


def report_json(result: Result, sink: Sink) -> dict[str, Any]:
    document: dict[str, Any] = result.data.to_dict()
    return document


def report_junit(result: Result, sink: Sink) -> str:
    from sparkdoctor.render.junit import render_junit

    return str(render_junit(result.data)) + "\n"


def report_markdown(result: Result, sink: Sink) -> str:
    from sparkdoctor.render.markdown import render_markdown

    return str(render_markdown(result.data)) + "\n"


def report_sarif(result: Result, sink: Sink) -> str:
    from sparkdoctor.render.sarif import render_sarif

    return str(render_sarif(result.data)) + "\n"


# ---- matrix list | show | validate ------------------------------------------------------------------


def matrix_list_console(result: Result, sink: Sink) -> str:
    from sparkdoctor.render.matrix import list_matrix

    return sink.capture(lambda console: list_matrix(result.data, console))


def matrix_list_json(result: Result, sink: Sink) -> list[dict[str, Any]]:
    """A bare array (as it always was: `jq '.[]'` keeps working); the one document without the header."""
    from sparkdoctor.render.matrix import sorted_rows

    return sorted_rows(result.data)


def matrix_item_console(result: Result, sink: Sink) -> str:
    from sparkdoctor.render.matrix import show_item

    return sink.capture(lambda console: show_item(result.data, console))


def matrix_item_json(result: Result, sink: Sink) -> dict[str, Any]:
    from sparkdoctor.render.matrix import item_dict

    return item_dict(result.data)


def matrix_validate_console(result: Result, sink: Sink) -> str:
    from sparkdoctor.render.describe import plural

    d = result.data
    levels = ", ".join(f"{n} {lv}" for lv, n in d["evidence"].items())
    if d.get("problems"):
        return "".join(f"problem: {p}\n" for p in d["problems"]) + f"{plural(len(d['problems']), 'problem')} across entries\n"
    delay = d.get("report_delay") or {}
    if delay.get("entries"):
        levels += f" · report to entry: median {delay['median_days']} days over {plural(delay['entries'], 'entry')}"
    return (f"ok: {plural(d['entries'], 'entry')}, {plural(d['stacks'], 'known-good stack')} in {plural(d['files'], 'file')}"
            f" · evidence: {levels}" + (f" · matrix: {d['matrix']}" if d.get("matrix") else "") + "\n")


def matrix_validate_json(result: Result, sink: Sink) -> dict[str, Any]:
    return {"valid": not result.data.get("problems"), **result.data}


# ---- bench and rerun: SARIF ----------------------------------------------------------------------------------
def bench_view_sarif(result: Result, sink: Sink) -> str:
    """`bench --format sarif`: a run's (or each A/B arm's) memory preflight verdict and the known problems its server's
    log printed. A run that failed is written by failure_sarif (emit.emit_error)."""
    from sparkdoctor.bench.document import ReproduceDocument, RunDocument
    from sparkdoctor.bench.session import finding_records
    from sparkdoctor.render.sarif import render_findings_sarif

    doc = result.data
    run = doc.run if isinstance(doc, ReproduceDocument) else doc
    if isinstance(run, RunDocument):
        recipe, done = run.result.recipe, run.result
        findings = finding_records(done)
        category = f"bench/{recipe.get('name') or 'url'}"
        props = {"recipe": recipe.get("name"), "recipe_path": recipe.get("source_path"), "run_id": done.run_id,
                 "fingerprint": done.toolchain.fingerprint, "memory": done.memory}
    else:
        findings = list(doc.findings)
        category = f"bench/{doc.a}-vs-{doc.b}"
        props = {"a": doc.a, "b": doc.b, "comparison_id": doc.comparison_id, "verdict": doc.verdict}
    return render_findings_sarif(findings, category=category, properties=props, exit_code=result.exit_code) + "\n"


def rerun_view_sarif(result: Result, sink: Sink) -> str:
    """`rerun --format sarif`: for each conclusion and workaround re-measured, what judged its launches (the memory
    preflight, the post-mortem of a launch that died, log symptoms)."""
    from sparkdoctor.render.sarif import render_findings_sarif

    doc = result.data.to_json()
    findings = []
    for row in [*(doc.get("results") or []), *(doc.get("workarounds") or [])]:
        name = row.get("name") or row.get("label")
        findings += [{**f, "arm": f"{name}{' ' + f['arm'] if f.get('arm') else ''}"} for f in row.get("findings") or []]
    props = {"ledger": doc.get("ledger"), "dry_run": doc.get("dry_run"), "failed": doc.get("failed")}
    return render_findings_sarif(findings, category="rerun", properties=props, exit_code=result.exit_code) + "\n"


def failure_sarif(command: str, error: BaseException, exit_code: int) -> str:
    """A bench or rerun that failed, as SARIF: what judged the launch (the memory preflight's refusal, the post-mortem
    of a launch that died) as results, the failure's one line as the invocation's notification."""
    from sparkdoctor.render.sarif import render_findings_sarif

    findings = list(getattr(error, "findings", None) or [])
    return render_findings_sarif(findings, category=command.replace(" ", "-"), properties={"command": command},
                                 exit_code=exit_code, failure=str(error)) + "\n"
