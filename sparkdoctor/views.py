"""Every document kind and the formats it renders in: one table, so `--format` choices, the renderers and
the exhaustive test (tests/test_contract.py) read the same list.

A view is `kind -> {Format: "module:function"}`; the function takes `(result, sink)` and returns the whole
text, final newline included (console, junit, markdown, ...) or, for `json`, the document as a dict (emit puts the common header in
front of it). Modules load only when their format is asked for, so `check` pays for no other verb.
"""

from __future__ import annotations

import json
from importlib import import_module
from typing import TYPE_CHECKING, Any

from sparkdoctor.result import Format, Result, with_header

if TYPE_CHECKING:
    from sparkdoctor.sink import Sink

V = "sparkdoctor.render.views"
D = {Format.console: "sparkdoctor.render.documents:document_console", Format.json: "sparkdoctor.render.documents:document_json"}
"""The documents that render themselves (sparkdoctor/render/documents.py)."""

VIEWS: dict[str, dict[Format, str]] = {
    # check
    "report": {Format.console: f"{V}:report_console", Format.json: f"{V}:report_json",
               Format.junit: f"{V}:report_junit", Format.markdown: f"{V}:report_markdown",
               Format.sarif: f"{V}:report_sarif"},
    # matrix list | show | validate
    "matrix-list": {Format.console: f"{V}:matrix_list_console", Format.json: f"{V}:matrix_list_json"},
    "matrix-item": {Format.console: f"{V}:matrix_item_console", Format.json: f"{V}:matrix_item_json"},
    "matrix-validate": {Format.console: f"{V}:matrix_validate_console", Format.json: f"{V}:matrix_validate_json"},
    # fix, bench, history, conclusions, rerun: each kind's JSON `kind` is its document's own (run, history-run, ...)
    "fix": D,
    "bench": {**D, Format.sarif: f"{V}:bench_view_sarif"},
    "history": D,
    "conclusions": D,
    "rerun": {**D, Format.sarif: f"{V}:rerun_view_sarif"},
    # fleet check
    "fleet": {Format.console: "sparkdoctor.fleet.render:fleet_view_console", Format.json: "sparkdoctor.fleet.render:fleet_view_json"},
    # audit, diff, explain
    "audit": {Format.console: "sparkdoctor.audit.report:audit_view_console", Format.json: "sparkdoctor.audit.report:audit_view_json"},
    "diff": {Format.console: "sparkdoctor.diff.render:diff_view_console", Format.json: "sparkdoctor.diff.render:diff_view_json"},
    "explain": {Format.console: "sparkdoctor.render.explain:explain_view_console",
                Format.json: "sparkdoctor.render.explain:explain_view_json"},
    # mods check
    "mods": {Format.console: "sparkdoctor.mods.report:mods_view_console", Format.json: "sparkdoctor.mods.report:mods_view_json"},
    # recipe show | check
    "recipe": {Format.console: "sparkdoctor.recipes.show:recipe_view_console", Format.json: "sparkdoctor.recipes.show:recipe_view_json"},
    "recipe-check": {Format.console: "sparkdoctor.conclusions.recipe_check_view:recipe_check_view_console",
                     Format.json: "sparkdoctor.conclusions.recipe_check_view:recipe_check_view_json",
                     Format.junit: "sparkdoctor.conclusions.recipe_check_view:recipe_check_view_junit",
                     Format.sarif: "sparkdoctor.conclusions.recipe_check_view:recipe_check_view_sarif"},
    # report
    "bug-report": {Format.github: "sparkdoctor.report.posted:report_view_github",
                   Format.forum: "sparkdoctor.report.posted:report_view_forum"},
    # matrix verify (and its modes), matrix track, matrix update
    "verify": {Format.console: "sparkdoctor.render.verify:verify_view_console", Format.json: "sparkdoctor.render.verify:verify_view_json"},
    "verify-bisect": {Format.console: "sparkdoctor.render.verify:bisect_view_console", Format.json: "sparkdoctor.render.verify:verify_view_json"},
    "verify-latest": {Format.console: "sparkdoctor.render.verify:latest_view_console", Format.json: "sparkdoctor.render.verify:verify_view_json"},
    "bounds": {Format.console: "sparkdoctor.render.verify:bounds_view_console", Format.json: "sparkdoctor.render.verify:verify_view_json"},
    "stacks": {Format.console: "sparkdoctor.render.verify:stacks_view_console", Format.json: "sparkdoctor.render.verify:verify_view_json"},
    "track": {Format.console: "sparkdoctor.track.answer:track_view_console", Format.json: "sparkdoctor.track.answer:track_view_json",
              Format.markdown: "sparkdoctor.track.answer:track_view_markdown"},
    "matrix-update": {Format.console: "sparkdoctor.track.answer:update_view_console", Format.json: "sparkdoctor.track.answer:update_view_json"},
    # whatif
    "whatif": {Format.console: "sparkdoctor.whatif.render:whatif_view_console", Format.json: "sparkdoctor.whatif.render:whatif_view_json"},
}


def formats_of(kind: str) -> tuple[Format, ...]:
    """The formats a document kind renders in (the order `--format` lists them)."""
    return tuple(VIEWS[kind])


def render(result: Result, fmt: Format, sink: Sink) -> str:
    """The whole document, ready to write."""
    views = VIEWS.get(result.kind)
    if views is None or fmt not in views:
        from sparkdoctor.errors import UsageError

        allowed = ", ".join(f.value for f in (views or {}))
        raise UsageError(f"--format {fmt.value}: `{result.command}` writes {allowed or 'no document'}")
    module, _, function = views[fmt].partition(":")
    rendered = getattr(import_module(module), function)(result, sink)
    if fmt is Format.json:
        # a bare array stays one (`matrix list`): it has no keys to put a header beside
        return dump(with_header(result, rendered) if isinstance(rendered, dict) else rendered)
    return str(rendered)


def dump(document: Any) -> str:
    return json.dumps(document, indent=2, default=str) + "\n"
