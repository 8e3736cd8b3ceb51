"""`sparkdoctor history --html FILE`: the ledger as one self-contained page (sparkdoctor/render/history_html.py).

Parse and deliver only: the timeline comes from sparkdoctor/ledger/timeline.py, the latest toolchain's findings
from findings.build_report on the latest run's Facts, the page from the renderer. Plotly is optional: without it
the command says how to get it, in one line (exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path

from sparkdoctor.cli_support import Fatal


def write_html(led, name: str) -> None:
    if not name:
        raise Fatal("--html '': give a file name")
    try:
        import plotly  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        raise Fatal("--html needs plotly, which is optional: pip install 'sparkdoctor-gb10[html]' (or pip install plotly)") from None
    from sparkdoctor.files import OutputError, target_of, write_text
    from sparkdoctor.ledger.timeline import read
    from sparkdoctor.render.history_html import render_page

    path = Path(name)
    try:
        target_of(path)
    except OutputError as exc:
        raise Fatal(f"--html {name}: {exc}") from None
    timeline = read(led.db)
    page = render_page(timeline, _latest_findings(timeline.latest_facts), str(led.path))
    try:
        write_text(path, page)
    except OutputError as exc:
        raise Fatal(f"--html {name}: {exc}") from None
    sys.stderr.write(f"wrote {name}: {len(timeline.runs):,} runs, {len(timeline.changes):,} toolchain changes, "
                     f"{len(page) / 1e6:.1f} MB\n")


def _latest_findings(facts: dict | None) -> list:
    if not facts:
        return []
    from sparkdoctor.facts import Facts
    from sparkdoctor.findings import build_report
    from sparkdoctor.matrix import load

    try:
        return build_report(Facts.from_dict(facts, source="ledger"), load(None)).findings
    except Exception:  # noqa: BLE001 (the page still shows the runs when the stored Facts cannot be judged)
        return []
