"""`sparkdoctor history`: list the ledger's runs, show one, or compare two (what changed in the
toolchain, what changed in the numbers). Reads only; the work is in sparkdoctor/ledger/."""

from __future__ import annotations

from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal, open_ledger
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format

FORMATS = ("console", "json")
HISTORY_SCHEMA = 1


def register(app: typer.Typer) -> None:
    app.command("history")(history)


def _refuse_damaged(path: Path, run_id: int, run: dict) -> None:
    """A run whose stored JSON is damaged cannot be shown or compared: one line naming what is wrong, exit 5
    (`history` without RUN_ID still lists it, marked, among the others)."""
    from sparkdoctor.exitcodes import EXIT_LEDGER

    if run.get("damaged"):
        raise Fatal(f"ledger {path}: run {run_id} is damaged: {'; '.join(run['damaged'])}", EXIT_LEDGER, code="ledger")


def history(
    run_id: int | None = typer.Argument(None, help="Show this run in full (its levels, toolchain and findings)."),
    recipe: str | None = typer.Option(None, "--recipe", help="Only runs of this recipe name."),
    compare: list[int] | None = typer.Option(None, "--compare", help="Two run ids: --compare A --compare B."),
    limit: int = typer.Option(50, "--limit", help="List at most this many runs."),
    samples: bool = typer.Option(False, "--samples", help="With RUN_ID: include the raw per-request samples (json)."),
    ledger: Path | None = typer.Option(None, "--ledger", help="Ledger file (default: the state folder's ledger.sqlite)."),
    fmt: str = format_option(Format.console, Format.json),
    html_file: str | None = typer.Option(None, "--html", metavar="FILE", help="Write the whole ledger as one self-contained HTML page (plots need plotly: pip install 'sparkdoctor-gb10\\[html]')."),
) -> None:
    """List, show and compare stored benchmark runs."""
    if html_file is not None:
        from sparkdoctor.commands.history_html import write_html

        with open_ledger(ledger) as led:
            write_html(led, html_file)
        return
    if fmt not in FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    if compare and len(compare) != 2:
        raise Fatal(f"--compare takes two run ids (--compare A --compare B), got {len(compare)}")
    if compare and run_id is not None:
        raise Fatal("give RUN_ID or --compare A --compare B, not both")
    from sparkdoctor.bench import render
    from sparkdoctor.bench.session import envelope
    from sparkdoctor.ledger.compare import compare_runs

    with open_ledger(ledger) as led:  # a LedgerError is exit 5 by itself
        path = led.path
        if compare:
            runs = [led.run(i) for i in compare]
            missing = [str(i) for i, r in zip(compare, runs, strict=False) if r is None]
            if missing:
                raise Fatal(f"ledger {path}: no run {', '.join(missing)} (see `sparkdoctor history`)")
            for i, r in zip(compare, runs, strict=False):
                _refuse_damaged(path, i, r)
            doc = envelope("history-compare", compare_runs(runs[0], runs[1]))
        elif run_id is not None:
            run = led.run(run_id, with_samples=samples)
            if run is None:
                raise Fatal(f"ledger {path}: no run {run_id} (see `sparkdoctor history`)")
            _refuse_damaged(path, run_id, run)
            doc = envelope("history-run", {"run": run})
        else:
            doc = envelope("history", {"ledger": str(path), "runs": led.runs(recipe, limit)})
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        emit_json("history", doc["kind"], doc)
        return
    from sparkdoctor.emit import emit_console

    emit_console(lambda console: _draw(render, console, doc), render.console())


def _draw(render, console, doc) -> None:
    if doc["kind"] == "history-compare":
        render.render_compare(console, doc)
    elif doc["kind"] == "history-run":
        run = doc["run"]
        shown = {"run_id": run["id"], "recipe": run["recipe"], "server": run["server"], "base_url": run["base_url"],
                 "model": run["model"], "fingerprint": run["fingerprint"], "levels": run["summary"]["levels"],
                 "headline": run["summary"]["headline"], "findings": run["findings"]}
        console.print(f"run {run['id']} at {run['created_at']} (bench version {run['bench_version']}, "
                      f"sparkdoctor {run['tool_version']})")
        render.render_run(console, shown)
    else:
        render.render_history(console, doc["runs"])
