"""`history`'s view: the list, one run in full, two runs compared, a kept run stored or a run removed, with bench's console text (views/bench.py);
the page `--html` wrote is said on stderr, so its console text is empty."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.text import Text

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
from sparkdoctor.views.bench import (
    HISTORY_HEADS,
    damaged,
    history_cells,
    render_compare,
    render_run,
    tabled,
)
from sparkdoctor.views.fitted import said


def _console(result: Result[HistoryDocument], sink: Sink) -> str:
    found = result.data
    if isinstance(found, HistoryPage):
        return ""

    def draw(console: Console) -> None:
        fitted = sink.at_terminal()  # a terminal too narrow for a table's cells gets its rows as items
        if isinstance(found, HistoryList):
            render_history(console, found.runs, found.ledger, found.recipe, fitted)
        elif isinstance(found, HistoryRun):
            run = found.run
            console.print(f"run {run['id']} at {run['created_at']} (bench version {run['bench_version']}, "
                          f"sparkdoctor {run['tool_version']})", markup=False)  # a ledger's text: never markup
            render_run(console, {"run_id": run["id"], "memory": run.get("memory"), "levels": run["summary"].get("levels", []),
                                 **{k: run[k] for k in ("recipe", "server", "base_url", "model", "fingerprint", "findings")},
                                 **{k: run["summary"].get(k) for k in ("headline", "load", "correctness")}}, fitted)
        elif isinstance(found, HistoryCompare):
            render_compare(console, found.to_json(), fitted)
        elif isinstance(found, HistoryImport):
            how = "was stored already, as run" if found.already else "as run"
            console.print(f"stored {found.file} {how} {found.run_id} in {found.ledger}", markup=False, highlight=False,
                          soft_wrap=True)
            console.print("  the file is removed: the ledger holds the run now" if found.removed else
                          "  the file could not be removed: delete it, so that it is not stored twice", markup=False)
        elif isinstance(found, HistoryDelete):
            _deleted(console, found)

    return sink.wide(draw)


def render_history(console: Console, runs: Sequence[Mapping[str, object]], ledger: str, recipe: str | None = None,
                   fitted: bool = False) -> None:
    """The list: a table, or at a terminal too narrow for it a run an item, a cell a line (rich would cut every cell to
    a letter and an ellipsis); a pipe or a file gets the table whole."""
    if not runs:
        words = f"no runs of recipe {recipe!r} in {ledger}" if recipe is not None else f"no runs recorded in {ledger}"
        console.print(words, markup=False, highlight=False, soft_wrap=True)
        return
    tabled(console, "runs, newest first", HISTORY_HEADS, [history_cells(r) for r in runs], fitted=fitted)
    damaged(console, runs)


def _deleted(console: Console, found: HistoryDelete) -> None:
    run, headline = found.run, found.run.get("headline")
    tps = headline.get("decode_tps_per_stream") if isinstance(headline, dict) else None
    label = (f"recipe {run['recipe_name']}" if run.get("recipe_name") else
             f"server {run.get('base_url')}")  # a `bench --url` run has no recipe
    what = ", ".join(filter(None, [label, f"measured {run.get('created_at')}",
                                   f"{tps:.1f} decode tok/s/stream" if isinstance(tps, (int, float)) else None,
                                   f"arm {run.get('arm')} of comparison {run.get('comparison_id')}"
                                   if run.get("comparison_id") is not None else None]))
    done = "removed from" if found.deleted else "would be removed from"
    console.print(f"run {found.run_id} ({what}) {done} {found.ledger}", markup=False, highlight=False, soft_wrap=True)
    if found.conclusions:
        console.print(f"  conclusions that name it (a rerun reports them broken: record them again): "
                      f"{', '.join(found.conclusions)}", markup=False, highlight=False, soft_wrap=True)
    if found.deleted:  # the command on a line of its own, whole at any width
        said(console, Text(f"kept in {found.kept} first: "), f"`sparkdoctor history --import {found.kept}` stores it "
             "again (as a new run)", indent=2)
    else:
        said(console, Text("nothing changed: "), f"`sparkdoctor history --delete {found.run_id} --yes` removes it "
             "(kept in a file first)", indent=2)


VIEW = View(HistoryDocument, {Format.console: _console, Format.json: lambda result, sink: result.data.to_json()})
