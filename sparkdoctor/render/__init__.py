"""Renderers: every output is drawn from one Report. `console` is for people; `json` (versioned),
`junit` (CI), `sarif` (code scanning) and `markdown` (bug reports) print only their document on stdout.

A new document format is one row in DOCUMENTS: (module, function) imported only when asked for, so
`check` does not pay for renderers it does not use.
"""

from __future__ import annotations

from importlib import import_module

DOCUMENTS = {
    "json": ("sparkdoctor.render.json", "render_json"),
    "junit": ("sparkdoctor.render.junit", "render_junit"),
    "markdown": ("sparkdoctor.render.markdown", "render_markdown"),
    "sarif": ("sparkdoctor.render.sarif", "render_sarif"),
}
FORMATS = ("console", *DOCUMENTS)


def render_text(report, fmt: str) -> str:
    """The document for a machine-readable format."""
    if fmt not in DOCUMENTS:
        raise ValueError(f"unknown format {fmt!r}")
    module, function = DOCUMENTS[fmt]
    return getattr(import_module(module), function)(report)
