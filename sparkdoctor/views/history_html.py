"""`history --html FILE`: the ledger as one self-contained page (no network when it is viewed).

Plotly draws the plots: its JavaScript is inlined once, the figures are plain dicts written without plotly's
Python validation (benchmarks/history_html_libraries.py: 10,000 runs in 0.2 s, a 5.3 MB page of which 4.7 MB is
plotly.js; matplotlib's static SVG took 0.6 s warm, 8.8 s cold, for 1.1 MB with no hover and no zoom; see
docs/evidence/history-html.md). Plotly is an optional dependency (`pip install 'sparkdoctor-gb10[html]'`): nothing
else in sparkdoctor needs it, and it is imported only here.

The page: decode tok/s per stream (each run's headline) per recipe over time, each toolchain change marked
(an x) and named (hover, and the table under the plot); each run's correctness verdict; the A/B ratios with
their confidence intervals; the conclusions with their reruns (held, flipped, changed); the findings of the
latest run's toolchain judged by today's matrix. Every plot's point count is the ledger's
(tests/history/test_history_html.py counts them in Chromium).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkdoctor.findings import Finding
    from sparkdoctor.ledger.timeline import Timeline

PLOT_IDS = ("sd-decode", "sd-correctness", "sd-ratios")
VERDICTS = ("wrong", "unchecked", "unscored", "indecisive", "correct", "reference")  # bottom to top
VERDICT_COLOURS = {"wrong": "#d62728", "unchecked": "#7f7f7f", "unscored": "#bcbd22", "indecisive": "#ff7f0e",
                   "correct": "#2ca02c", "reference": "#1f77b4"}


STYLE = ("<style>body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1400px}table{border-collapse:collapse;"
         "margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:left}"
         "tr:nth-child(even){background:#f6f6f6}.none{color:#777}</style></head><body>")
NOT_STORED = ("<h2>Not in the ledger</h2><p>The share of the roofline is printed by `bench` but not stored in the ledger, "
              "so it cannot be drawn here.</p>")


def _esc(value: object) -> str:
    return html.escape(str(value if value is not None else ""))


def _table(head: list[str], rows: Sequence[Sequence[object]], cls: str = "") -> str:
    if not rows:
        return "<p class='none'>none</p>"
    out = [f"<table class='{cls}'><thead><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    out += ["<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows]
    return "\n".join(out) + "</tbody></table>"


def decode_figure(tl: Timeline) -> dict[str, object]:
    traces = []
    for recipe in sorted({r["recipe"] for r in tl.runs}):
        runs = [r for r in tl.runs if r["recipe"] == recipe and r["tps"] is not None]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": _esc(recipe), "x": [_esc(r["created_at"]) for r in runs],
                       "y": [r["tps"] for r in runs], "marker": {"size": 5},
                       "text": [_esc(f"run {r['id']} · toolchain {str(r['fingerprint'])[:12]}" + (f" · arm {r['arm']}" if r["arm"] else ""))
                                for r in runs], "hoverinfo": "x+y+text+name"})
    marked = [c for c in tl.changes if c["tps"] is not None]
    traces.append({"type": "scatter", "mode": "markers", "name": "toolchain changed", "x": [_esc(c["created_at"]) for c in marked],
                   "y": [c["tps"] for c in marked], "marker": {"symbol": "x", "size": 11, "color": "black"},
                   "text": [_esc(f"{c['recipe']}, run {c['run']}: ") + "<br>".join(_esc(w) for w in c["what"][:8]) for c in marked],
                   "hoverinfo": "x+text"})
    return {"data": traces, "layout": {"title": {"text": "Decode tok/s per stream (each run's headline), per recipe"},
                                       "xaxis": {"title": {"text": "run time (UTC)"}},
                                       "yaxis": {"title": {"text": "tok/s per stream"}}, "height": 520,
                                       "legend": {"orientation": "h"}}}


def correctness_figure(tl: Timeline) -> dict[str, object]:
    """Each run whose answers the correctness gate judged: one trace per verdict, the recipe on hover."""
    known = [v for v in VERDICTS if any(r["correctness"] == v for r in tl.runs)]
    other = sorted({r["correctness"] for r in tl.runs if r["correctness"] and r["correctness"] not in VERDICTS})
    traces = []
    for verdict in [*known, *other]:
        runs = [r for r in tl.runs if r["correctness"] == verdict]
        traces.append({"type": "scatter", "mode": "markers", "name": _esc(verdict), "x": [_esc(r["created_at"]) for r in runs],
                       "y": [_esc(verdict)] * len(runs), "marker": {"size": 6, "color": VERDICT_COLOURS.get(verdict, "#9467bd")},
                       "text": [_esc(f"run {r['id']} · {r['recipe']}") for r in runs], "hoverinfo": "x+text+name"})
    return {"data": traces, "layout": {"title": {"text": "Correctness of the answers (the correctness gate), per run"},
                                       "yaxis": {"type": "category", "categoryorder": "array",
                                                 "categoryarray": [*VERDICTS, *map(_esc, other)]}, "height": 300,
                                       "showlegend": False}}


def ratio_figure(tl: Timeline) -> dict[str, object]:
    cs = tl.comparisons
    labels = [_esc(f"#{c['id']} c={c['concurrency']}") for c in cs]
    trace = {"type": "scatter", "mode": "markers", "name": "B/A", "x": labels, "y": [c["ratio"] for c in cs],
             "error_y": {"type": "data", "symmetric": False,
                         "array": [(c["high"] - c["ratio"]) if isinstance(c["high"], (int, float)) else 0 for c in cs],
                         "arrayminus": [(c["ratio"] - c["low"]) if isinstance(c["low"], (int, float)) else 0 for c in cs]},
             "text": [_esc(f"{c['a']} vs {c['b']}: {c['verdict']} ({c['created_at']})") for c in cs], "hoverinfo": "y+text"}
    return {"data": [trace], "layout": {"title": {"text": "A/B comparisons: decode ratio B/A with its confidence interval"},
                                        "yaxis": {"title": {"text": "B/A"}}, "height": 420,
                                        "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                                                    "line": {"dash": "dot"}}]}}


def render_page(tl: Timeline, findings: list[Finding], ledger_path: str) -> str:
    """The whole page. `findings`: the latest run's toolchain judged by the matrix (findings.Finding)."""
    import plotly.io as pio

    config = {"displaylogo": False, "responsive": True}
    plots: list[str] = []
    for div_id, fig in zip(PLOT_IDS, (decode_figure(tl), correctness_figure(tl), ratio_figure(tl)), strict=False):
        plots.append(pio.to_html(fig, include_plotlyjs=not plots, full_html=False, div_id=div_id, config=config,
                                 validate=False))
    flips = [[c["id"], c["name"], c["created_at"], c["outcome"], c["verdict"]] for c in tl.conclusions]
    changes = [[c["run"], c["recipe"], c["created_at"], "; ".join(c["what"][:12]) or "(same material)"] for c in tl.changes]
    found = [[f.severity, f.id, f.title] for f in findings]
    n_tps = sum(1 for r in tl.runs if r["tps"] is not None)
    n_checked = sum(1 for r in tl.runs if r["correctness"])
    meta = {"runs": len(tl.runs), "runs_with_headline": n_tps, "runs_checked": n_checked, "changes": len(tl.changes),
            "comparisons": len(tl.comparisons), "conclusions": len(tl.conclusions), "damaged_rows": tl.damaged}
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>sparkdoctor history</title>",
        STYLE,
        f"<h1>sparkdoctor history</h1><p>Ledger {_esc(ledger_path)}: {len(tl.runs):,} runs ({n_tps:,} with a decode "
        f"headline), {len(tl.changes):,} toolchain changes, {len(tl.comparisons):,} A/B levels, "
        f"{len(tl.conclusions):,} conclusion records" + (f", {tl.damaged} damaged rows left out" if tl.damaged else "") + ".</p>",
        "<p class='none'>Not anonymized: paths, addresses and names are as the ledger stores them. To share, send what "
        "<code>sparkdoctor report</code> writes.</p>",
        plots[0],
        "<h2>Toolchain changes</h2>", _table(["run", "recipe", "when", "what changed (fingerprint material)"], changes, "changes"),
        plots[1] if n_checked else "<h2>Correctness</h2><p class='none'>no run was checked by the correctness gate</p>",
        plots[2],
        "<h2>Conclusions and their reruns</h2>",
        _table(["id", "name", "when", "outcome", "verdict"], flips, "conclusions"),
        "<h2>Findings of the latest run's toolchain (today's matrix)</h2>",
        _table(["severity", "entry", "title"], found, "findings"),
        NOT_STORED,
        f"<script type='application/json' id='sd-meta'>{json.dumps(meta)}</script>",
        "</body></html>",
    ]
    return "\n".join(parts)
