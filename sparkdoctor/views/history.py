"""`history`'s view: the list, one run in full, two runs compared, a kept run stored or a run removed, with bench's console text (views/bench.py);
the page `--html` wrote is said on stderr, so its console text is empty."""

from __future__ import annotations

from rich.console import Console

from sparkdoctor.bench.history import (
    HistoryCompare,
    HistoryDelete,
    HistoryDocument,
    HistoryImport,
    HistoryList,
    HistoryPage,
    HistoryRun,
)
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View
from sparkdoctor.views.bench import render_compare, render_history, render_run


def _console(result: Result[HistoryDocument], sink: Sink) -> str:
    found = result.data
    if isinstance(found, HistoryPage):
        return ""

    def draw(console: Console) -> None:
        if isinstance(found, HistoryList):
            render_history(console, found.runs, found.ledger, found.recipe)
        elif isinstance(found, HistoryRun):
            run = found.run
            console.print(f"run {run['id']} at {run['created_at']} (bench version {run['bench_version']}, "
                          f"sparkdoctor {run['tool_version']})", markup=False)  # a ledger's text: never markup
            render_run(console, {"run_id": run["id"], "recipe": run["recipe"], "server": run["server"],
                                 "base_url": run["base_url"], "model": run["model"], "fingerprint": run["fingerprint"],
                                 "levels": run["summary"].get("levels", []), "headline": run["summary"].get("headline"),
                                 "findings": run["findings"], "memory": run.get("memory"),
                                 "load": run["summary"].get("load"), "correctness": run["summary"].get("correctness")})
        elif isinstance(found, HistoryCompare):
            render_compare(console, found.to_json())
        elif isinstance(found, HistoryImport):
            said = "was stored already, as run" if found.already else "as run"
            console.print(f"stored {found.file} {said} {found.run_id} in {found.ledger}", markup=False, highlight=False,
                          soft_wrap=True)
            console.print("  the file is removed: the ledger holds the run now" if found.removed else
                          "  the file could not be removed: delete it, so that it is not stored twice", markup=False)
        elif isinstance(found, HistoryDelete):
            _deleted(console, found)

    return sink.wide(draw)


def _deleted(console: Console, found: HistoryDelete) -> None:
    run, headline = found.run, found.run.get("headline")
    tps = headline.get("decode_tps_per_stream") if isinstance(headline, dict) else None
    label = (f"recipe {run['recipe_name']}" if run.get("recipe_name") else
             f"server {run.get('base_url')}")  # a `bench --url` run has no recipe
    what = ", ".join(filter(None, [label, f"measured {run.get('created_at')}",
                                   f"{tps:.1f} decode tok/s/stream" if isinstance(tps, (int, float)) else None,
                                   f"arm {run.get('arm')} of comparison {run.get('comparison_id')}"
                                   if run.get("comparison_id") is not None else None]))
    said = "removed from" if found.deleted else "would be removed from"
    console.print(f"run {found.run_id} ({what}) {said} {found.ledger}", markup=False, highlight=False, soft_wrap=True)
    if found.conclusions:
        console.print(f"  conclusions that name it (a rerun reports them broken: record them again): "
                      f"{', '.join(found.conclusions)}", markup=False, highlight=False, soft_wrap=True)
    if found.deleted:
        console.print(f"  kept in {found.kept} first: `sparkdoctor history --import {found.kept}` stores it again "
                      "(as a new run)", markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(f"  nothing changed: `sparkdoctor history --delete {found.run_id} --yes` removes it "
                      "(kept in a file first)", markup=False, highlight=False, soft_wrap=True)


VIEW = View(HistoryDocument, {Format.console: _console, Format.json: lambda result, sink: result.data.to_json()})
