"""Which plotting library `history --html` uses: the page for a ledger of 10,000 runs, measured.

    .venv/bin/python benchmarks/history_html_libraries.py

For each candidate: the seconds to build a self-contained page with the main plot (decode tok/s of 10,000 runs
over time, 5 recipes, toolchain changes marked) and the page's size. Candidates: plotly (its JS inlined: one
file, interactive), matplotlib (an inline SVG: no JS at all). Each is imported inside its own timing.
"""

from __future__ import annotations

import io
import random
import time

N, RECIPES, CHANGES = 10_000, 5, 40


def data():
    rng = random.Random(1)
    t0 = 1.7e9
    runs = [(t0 + i * 600, f"recipe-{i % RECIPES}", 40 + (i % RECIPES) * 5 + rng.gauss(0, 1)) for i in range(N)]
    changes = [t0 + k * N * 600 / CHANGES for k in range(1, CHANGES)]
    return runs, changes


def plotly_page(runs, changes, gl: bool) -> str:
    import datetime as dt

    import plotly.graph_objects as go

    fig = go.Figure()
    for r in sorted({r[1] for r in runs}):
        xs = [dt.datetime.fromtimestamp(t, dt.timezone.utc) for t, name, _ in runs if name == r]
        ys = [v for _, name, v in runs if name == r]
        fig.add_trace((go.Scattergl if gl else go.Scatter)(x=xs, y=ys, mode="markers", name=r))
    for c in changes:
        fig.add_vline(x=dt.datetime.fromtimestamp(c, dt.timezone.utc).timestamp() * 1000, line_dash="dot")
    return fig.to_html(include_plotlyjs=True, full_html=True)


def matplotlib_page(runs, changes) -> str:
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 4))
    for r in sorted({r[1] for r in runs}):
        ax.plot([t for t, n, _ in runs if n == r], [v for _, n, v in runs if n == r], ".", markersize=2, label=r)
    for c in changes:
        ax.axvline(c, linestyle=":", linewidth=0.8)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    return "<!doctype html><html><body>" + buf.getvalue() + "</body></html>"


def main() -> None:
    runs, changes = data()
    for name, build in (("plotly Scattergl (WebGL)", lambda: plotly_page(runs, changes, True)),
                        ("plotly Scatter (SVG)", lambda: plotly_page(runs, changes, False)),
                        ("matplotlib SVG", lambda: matplotlib_page(runs, changes))):
        t = time.perf_counter()
        page = build()
        took = time.perf_counter() - t
        t = time.perf_counter()
        build()
        again = time.perf_counter() - t
        print(f"{name:26s} first {took:5.2f} s  warm {again:5.2f} s  page {len(page.encode()) / 1e6:5.2f} MB")


if __name__ == "__main__":
    main()


def plotly_plain(runs, changes) -> str:
    """plotly with the figure as plain dicts (validate=False): what sparkdoctor does."""
    import datetime as dt

    import plotly.io as pio

    iso = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat()  # noqa: E731
    traces = [{"type": "scattergl", "mode": "markers", "name": r, "x": [iso(t) for t, n, _ in runs if n == r],
               "y": [v for _, n, v in runs if n == r]} for r in sorted({r[1] for r in runs})]
    shapes = [{"type": "line", "xref": "x", "yref": "paper", "x0": iso(c), "x1": iso(c), "y0": 0, "y1": 1,
               "line": {"dash": "dot"}} for c in changes]
    return pio.to_html({"data": traces, "layout": {"shapes": shapes}}, include_plotlyjs=True, full_html=True, validate=False)


if __name__ == "__main__":
    runs, changes = data()
    for _ in range(2):
        t = time.perf_counter()
        page = plotly_plain(runs, changes)
        print(f"{'plotly plain dicts':26s} {time.perf_counter() - t:5.2f} s  page {len(page.encode()) / 1e6:5.2f} MB")
