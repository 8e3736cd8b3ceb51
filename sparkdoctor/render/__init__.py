"""Renderers: every output is drawn from one Report. `console` is for people; `json` (versioned),
`junit` (CI) and `markdown` (bug reports) print only their document on stdout."""

from __future__ import annotations

FORMATS = ("console", "json", "junit", "markdown")


def render_text(report, fmt: str) -> str:
    """The document for a machine-readable format."""
    if fmt == "json":
        from sparkdoctor.render.json import render_json

        return render_json(report)
    if fmt == "junit":
        from sparkdoctor.render.junit import render_junit

        return render_junit(report)
    if fmt == "markdown":
        from sparkdoctor.render.markdown import render_markdown

        return render_markdown(report)
    raise ValueError(f"unknown format {fmt!r}")
