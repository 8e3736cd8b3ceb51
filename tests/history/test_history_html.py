"""`history --html FILE` (issue 28, items 3 and 4): one self-contained page from a real ledger, generated for
10,000 runs in seconds, and loaded in a real headless Chromium (Debian's, installed by the suite's setup as
dockerd is): no console errors with the network cut off, every plot has as many points as the ledger holds
(counted in the DOM Chromium rendered), and a screenshot kept in pytest's cache (.pytest_cache/d/history-html/)."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import debian
from tests.history.ledger_fixture import build

REPO = Path(__file__).resolve().parents[2]


def cli(*args: object, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    base.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(cwd / "state"), SPARKDOCTOR_CACHE_DIR=str(cwd / "cache"))
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], check=False, cwd=cwd, env=base,
                          capture_output=True, text=True, timeout=600)


def chromium() -> str:
    """Debian's chromium: installed with apt-get when missing (tests/debian.py)."""
    return debian.install(("chromium",), lambda: shutil.which("chromium")) or pytest.fail(
        "chromium is not installed and this user cannot apt-get install it")


def browse(page: Path, *extra: str) -> subprocess.CompletedProcess:
    """Chromium, headless, with every network request sent to a dead proxy; console messages on stderr."""
    argv = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
            "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--virtual-time-budget=20000",
            "--window-size=1400,2400", *extra, page.as_uri()]
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=300)


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def points_per_trace(dom: str, div_id: str) -> list[int]:
    start = dom.index(f'id="{div_id}"')
    end = dom.find('<div id="sd-', start + 10)  # the next plot
    part = dom[start:end if end > 0 else len(dom)]
    traces = part.split('<g class="trace scatter')[1:]
    return [t.count('class="point"') for t in traces]


def test_ten_thousand_runs_make_one_page_in_seconds(tmp_path):
    ledger = tmp_path / "l.sqlite"
    held = build(ledger, 10_000)
    t0, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = cli("history", "--html", tmp_path / "h.html", "--ledger", ledger, cwd=tmp_path)
    took, cpu1 = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    # the command's CPU seconds: a loaded machine stretches its wall time, not its work
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "h.html").read_text()
    meta = json.loads(re.search(r"<script type='application/json' id='sd-meta'>(.*?)</script>", page).group(1))
    assert meta["runs"] == 10_000 and meta["changes"] == held["changes"] and meta["comparisons"] == held["comparisons"]
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", page)  # nothing is fetched when it is viewed
    print(f"history --html of 10,000 runs: {took:.2f} s ({cpu:.2f} s of CPU, the whole command), page {len(page.encode()) / 1e6:.2f} MB")
    assert cpu < 60, cpu  # generous; measured numbers: docs/evidence/history-html.md


@pytest.mark.slow  # installs Debian's chromium when it is missing
def test_the_page_loads_in_chromium_with_every_point_and_no_console_error(tmp_path):
    ledger = tmp_path / "l.sqlite"
    held = build(ledger, 1_500)
    page = tmp_path / "h.html"
    p = cli("history", "--html", page, "--ledger", ledger, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    shown = browse(page, "--dump-dom")
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert console_lines(shown.stderr) == []
    dom = shown.stdout
    decode = points_per_trace(dom, "sd-decode")
    assert decode == [held["per_recipe"][r] for r in sorted(held["per_recipe"])] + [held["changes"]]
    assert points_per_trace(dom, "sd-ratios") == [held["comparisons"]]
    verdicts = held["verdicts"]  # traces in the page's order: wrong, correct, reference (the verdicts present)
    assert points_per_trace(dom, "sd-correctness") == [verdicts["wrong"], verdicts["correct"], verdicts["reference"]]
    assert "compile-helps" in dom and "flipped" in dom and "packages.vllm" in dom  # conclusions and a named change
    shot = tmp_path / "history.png"
    taken = browse(page, f"--screenshot={shot}")
    assert taken.returncode == 0 and shot.stat().st_size > 10_000, taken.stderr[-2000:]
    # the console check can fail: a page with an error and a fetch shows both
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script src='http://example.invalid/x.js'></script>"
                   "<script>console.error('planted'); nosuch();</script></body></html>")
    lines = console_lines(browse(bad, "--dump-dom").stderr)
    assert any("planted" in line for line in lines) and any("nosuch" in line for line in lines)


def test_without_plotly_it_is_one_line_saying_how_to_get_it(tmp_path):
    ledger = tmp_path / "l.sqlite"
    build(ledger, 3)
    blocker = tmp_path / "block" / "plotly"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('blocked by the test')\n")
    p = cli("history", "--html", tmp_path / "h.html", "--ledger", ledger, cwd=tmp_path,
            env={"PYTHONPATH": f"{tmp_path / 'block'}{os.pathsep}{REPO}"})
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "sparkdoctor-gb10[html]" in p.stderr
    assert not (tmp_path / "h.html").exists()


def test_a_damaged_row_is_left_out_and_counted(tmp_path):
    import sqlite3

    ledger = tmp_path / "l.sqlite"
    build(ledger, 30)
    db = sqlite3.connect(ledger)
    db.execute("UPDATE runs SET summary_json = '{not json' WHERE id = 5")
    db.commit()
    db.close()
    p = cli("history", "--html", tmp_path / "h.html", "--ledger", ledger, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "h.html").read_text()
    assert "1 damaged rows left out" in page and '"runs": 29' in page


def test_markup_in_a_recipe_name_is_text_in_the_plots():
    """plotly renders a subset of HTML in trace names and hover text (`<a href>`, `<span style>`): a recipe, an arm or
    a verdict named with markup put a link into the page's legend. Every such string is escaped now."""
    from sparkdoctor.ledger.timeline import Timeline
    from sparkdoctor.views.history_html import (
        correctness_figure,
        decode_figure,
        ratio_figure,
    )

    evil = "<a href='https://example.invalid/x'>click</a><span style='font-size:99px'>big</span>"
    tl = Timeline(runs=[{"id": 1, "recipe": evil, "created_at": "2026-11-30T00:00:00", "fingerprint": "f" * 16, "tps": 10.0,
                         "comparison": None, "arm": evil, "correctness": evil}],
                  changes=[{"recipe": evil, "run": 1, "created_at": "2026-11-30T00:00:00", "tps": 10.0, "what": [evil]}],
                  comparisons=[{"id": 1, "created_at": "2026-11-30", "a": evil, "b": evil, "status": "ok", "concurrency": evil,
                                "ratio": 1.0, "low": 0.9, "high": 1.1, "verdict": evil}])
    figures = json.dumps([decode_figure(tl), correctness_figure(tl), ratio_figure(tl)])
    assert "<a " not in figures and "<span" not in figures and "&lt;a href=" in figures


def test_markup_in_a_ledger_time_is_text_in_the_page(tmp_path):
    """A row's created_at is the plots' x value (and the hover's): it went into the figures as it was stored, so a
    ledger whose times hold markup put a link (`<a href>`) on the time axis of the decode and correctness plots. It is
    escaped now, like every other string from the ledger; an ISO time reads the same escaped."""
    import sqlite3

    ledger = tmp_path / "l.sqlite"
    build(ledger, 6)
    evil = "<a href='https://example.invalid/x'>click</a>"
    db = sqlite3.connect(ledger)
    db.execute("UPDATE runs SET created_at = ? WHERE id % 2 = 0", (evil,))
    db.commit()
    db.close()
    p = cli("history", "--html", tmp_path / "h.html", "--ledger", ledger, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "h.html").read_text()
    shown = [page[max(0, i - 40):i] for i in range(len(page)) if page.startswith("example.invalid", i)]
    assert shown and all("&lt;a href=" in before and "\\u003ca" not in before for before in shown), shown


def test_a_recipe_name_stored_as_bytes_is_text_not_an_internal_error(tmp_path):
    """SQLite keeps a BLOB in a TEXT column: a run whose recipe_name was bytes (X'ff3c623e', not even UTF-8) made the
    recipes unsortable, and `history --html` ended in an internal error (TypeError: bytes < str) where `history`
    listed the ledger. It is read as text now, escaped like any other name."""
    import sqlite3

    ledger = tmp_path / "l.sqlite"
    build(ledger, 6)
    db = sqlite3.connect(ledger)
    db.execute("UPDATE runs SET recipe_name = X'ff3c623e' WHERE id = 2")
    db.commit()
    db.close()
    p = cli("history", "--html", tmp_path / "h.html", "--ledger", ledger, cwd=tmp_path)
    assert p.returncode == 0 and "internal error" not in p.stderr, p.stderr
    page = (tmp_path / "h.html").read_text()
    assert '"name":"\\ufffd&lt;b&gt;"' in page and '"runs": 6' in page


def test_figures_that_are_no_finite_numbers_are_left_out_not_an_internal_error(tmp_path):
    """A comparison whose stored CI bound was a 401-digit integer (valid JSON) ended `history --html` in an internal
    error (OverflowError in the error bars' arithmetic). A bound, a ratio or a headline that is no finite number (a
    huge integer, true) is now not drawn, as a missing one is."""
    import sqlite3

    ledger = tmp_path / "l.sqlite"
    build(ledger, 6)
    big = "1" + "0" * 400
    db = sqlite3.connect(ledger)
    db.execute("UPDATE comparisons SET result_json = ? WHERE id = 1", ('{"levels": [{"concurrency": 1, "ratio": {"ratio": '
               f'1.1, "ci_low": 1.02, "ci_high": {big}, "verdict": "faster"}}}}, {{"concurrency": 4, "ratio": {{"ratio": {big}, '
               '"ci_low": 1, "ci_high": 2, "verdict": "faster"}}]}',))
    db.execute("UPDATE runs SET summary_json = ? WHERE id IN (1, 2)", (f'{{"headline": {{"decode_tps_per_stream": {big}}}}}',))
    db.execute("UPDATE runs SET summary_json = ? WHERE id = 3", ('{"headline": {"decode_tps_per_stream": true}}',))
    db.commit()
    db.close()
    p = cli("history", "--html", tmp_path / "h.html", "--ledger", ledger, cwd=tmp_path)
    assert p.returncode == 0 and "internal error" not in p.stderr, p.stderr
    meta = json.loads(re.search(r"<script type='application/json' id='sd-meta'>(.*?)</script>", (tmp_path / "h.html").read_text()).group(1))
    assert meta["runs"] == 6 and meta["runs_with_headline"] == 3, meta


def test_json_nested_deeper_than_python_reads_is_a_damaged_row(tmp_path):
    """A ledger column of 200,000 nested brackets is JSON Python cannot read (RecursionError, which is no ValueError):
    `history` and `conclusions` counted such a row as damaged, `history --html` ended in an internal error."""
    import sqlite3

    ledger = tmp_path / "l.sqlite"
    build(ledger, 6)
    deep = "[" * 200_000 + "]" * 200_000
    db = sqlite3.connect(ledger)
    db.execute("UPDATE runs SET summary_json = ? WHERE id = 3", (deep,))
    db.execute("UPDATE runs SET fingerprint = 'other', facts_json = ? WHERE id = 4", (deep,))
    db.execute("UPDATE comparisons SET result_json = ?", (deep,))
    db.execute("UPDATE conclusions SET data_json = ?", (deep,))
    db.commit()
    db.close()
    p = cli("history", "--html", tmp_path / "h.html", "--ledger", ledger, cwd=tmp_path)
    assert p.returncode == 0 and "internal error" not in p.stderr, p.stderr
    page = (tmp_path / "h.html").read_text()
    assert "1 damaged rows left out" in page and '"runs": 5' in page and "(damaged)" in page


def test_a_ledger_sqlite_cannot_read_is_one_line_exit_5(tmp_path):
    """A current-schema ledger missing a table (dropped by hand, or by another program): `history` says what it can,
    `history --html` ended in an internal error (sqlite3.OperationalError, exit 2). It is one line, exit 5 now, as a
    ledger that cannot be read is everywhere (README's exit codes)."""
    import sqlite3

    ledger = tmp_path / "l.sqlite"
    build(ledger, 4)
    db = sqlite3.connect(ledger)
    db.execute("DROP TABLE conclusions")
    db.commit()
    db.close()
    p = cli("history", "--html", tmp_path / "h.html", "--ledger", ledger, cwd=tmp_path)
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and "no such table: conclusions" in p.stderr, p.stderr
    assert "internal error" not in p.stderr and not (tmp_path / "h.html").exists()
