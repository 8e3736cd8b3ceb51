"""`sparkdoctor history --html FILE`: the ledger as one self-contained page (sparkdoctor/views/history_html.py).

The timeline comes from sparkdoctor/ledger/timeline.py, the latest toolchain's findings from the check service
on the latest run's Facts, the page from the renderer; the page is written atomically. Plotly is optional: without
it the command says how to get it, in one line (exit 2)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sparkdoctor.bench.history import HistoryPage
from sparkdoctor.commands.options import output_path
from sparkdoctor.errors import UsageError

if TYPE_CHECKING:
    from sparkdoctor.findings import Finding
    from sparkdoctor.ledger.store import Ledger


def refuse_bad_name(name: str) -> Path:
    """The file `--html NAME` names, or UsageError (one line) when it cannot become a regular file."""
    if not name.isprintable():  # a control character or a byte that is not UTF-8: no name to print or put in the page
        from sparkdoctor.text import one_line

        raise UsageError(f"--html {one_line(name[:200])}: a file name with control characters or bytes that are not UTF-8")
    path = output_path("--html", name)  # '' and a name that cannot become a regular file: one line, as --output's
    assert path is not None  # a name was given
    return path


def write_html(led: Ledger, name: str) -> HistoryPage:
    """Write the page; what it holds (a line on stderr says it too)."""
    path = refuse_bad_name(name)
    try:
        import plotly  # noqa: F401
    except ImportError:
        raise UsageError("--html needs plotly, which is optional: pip install 'sparkdoctor-gb10[html]' (or pip install plotly)") from None
    from sparkdoctor.files import OutputError, write_text
    from sparkdoctor.ledger.schema import LedgerError, hint
    from sparkdoctor.ledger.timeline import read
    from sparkdoctor.views.history_html import render_page

    try:
        timeline = read(led.db)
    except sqlite3.Error as exc:  # a table gone, a damaged page: one line, exit 5, as `history` says it
        raise LedgerError(f"ledger {led.path}: {exc}{hint(exc)}") from None
    page = render_page(timeline, _latest_findings(timeline.latest_facts), str(led.path))
    try:
        write_text(path, page)
    except OutputError as exc:
        raise UsageError(f"--html {name}: {exc}") from None
    sys.stderr.write(f"wrote {name}: {len(timeline.runs):,} runs, {len(timeline.changes):,} toolchain changes, "
                     f"{len(page) / 1e6:.1f} MB\n")
    return HistoryPage(html=str(path), runs=len(timeline.runs), changes=len(timeline.changes), bytes=len(page.encode()))


def _latest_findings(facts: dict[str, object] | None) -> list[Finding]:
    if not facts:
        return []
    from sparkdoctor.check import CheckRequest, check
    from sparkdoctor.facts import Facts

    try:
        return list(check(CheckRequest(facts=Facts.from_dict(facts, source="ledger"))).report.findings)
    except Exception:  # noqa: BLE001 (the page still shows the runs when the stored Facts cannot be judged)
        return []
