"""`sparkdoctor history`: list the ledger's runs, show one, compare two (what changed in the toolchain, what
changed in the numbers), write the whole ledger as one HTML page (`--html FILE`), or store a run `bench` kept in
a file when the ledger could not take it (`--import FILE`), or remove a run (`--delete RUN_ID`: a dry run; `--yes`
removes it, kept in a file first that `--import` stores again).

The JSON `kind` is the document's: history, history-run, history-compare, history-html, history-import,
history-delete (sparkdoctor/bench/history.py). Only --import and --delete --yes write. A missing run or a file that is not a kept run is a
UsageError (2); a ledger that cannot be read or written, or a run whose stored JSON is damaged, a LedgerFailure (5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sparkdoctor.commands.options import (
    EMPTY,
    NAMES_A_FILE,
    Fmt,
    Ledger,
    Output,
    format_option,
    refuse_writing_over_the_ledger,
    verb,
)
from sparkdoctor.errors import LedgerFailure, UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.views.history import VIEW

if TYPE_CHECKING:
    from sparkdoctor.bench.history import HistoryDelete, HistoryDocument, HistoryImport
    from sparkdoctor.ledger.store import Ledger as LedgerStore

FORMATS = VIEW.formats


@dataclass
class HistoryCommand:
    run_id: Annotated[int | None, typer.Argument(help="Show this run in full (its levels, toolchain and findings).")] = None
    recipe: Annotated[str | None, typer.Option("--recipe", help="Only runs of this recipe name.")] = None
    compare: Annotated[list[int], typer.Option("--compare", help="Two run ids: --compare A --compare B (or --compare A B)."), EMPTY] = field(default_factory=list)
    limit: Annotated[int, typer.Option("--limit", help="List at most this many runs.")] = 50
    samples: Annotated[bool, typer.Option("--samples", help="With RUN_ID: include the raw per-request samples (json).")] = False
    ledger: Ledger = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    html: Annotated[str | None, typer.Option("--html", metavar="FILE", help="Write the whole ledger as one self-contained HTML page (plots need plotly: pip install 'sparkdoctor-gb10\\[html]').")] = None
    import_file: Annotated[str | None, typer.Option("--import", metavar="FILE", help="Store a run `bench` kept in FILE because the ledger could not take it; the file is removed once stored."), NAMES_A_FILE] = None
    delete: Annotated[int | None, typer.Option("--delete", metavar="RUN_ID", help="Say what removing this run from the ledger would change; with --yes remove it, kept in a file first (--import FILE stores it again).")] = None
    yes: Annotated[bool, typer.Option("--yes", help="With --delete: remove the run.")] = False

    def refuse_bad_options(self) -> None:
        """Every usage error of `history`, before the ledger is opened (exit 2, one line)."""
        Format.parse(self.fmt, FORMATS)
        if len(self.compare) == 1 and self.run_id is not None:  # `--compare 1 2`: the second id lands in RUN_ID
            self.compare, self.run_id = [self.compare[0], self.run_id], None
        for name, number in (("RUN_ID", self.run_id), ("--limit", self.limit), ("--delete", self.delete),
                             *(("--compare", c) for c in self.compare)):
            if number is not None and not 0 < number < 2**63:  # what the ledger's integers hold
                raise UsageError(f"{name} {str(number)[:40]}: a number from 1 to {2**63 - 1}")
        if self.recipe is not None and not self.recipe.isprintable():  # a byte that is not UTF-8 comes as a surrogate
            from sparkdoctor.text import one_line

            raise UsageError(f"--recipe {one_line(self.recipe[:80])}: not a recipe name")
        if self.recipe is not None and (self.run_id is not None or self.compare or self.html is not None
                                        or self.import_file is not None or self.delete is not None):
            raise UsageError("--recipe narrows the list of runs: no RUN_ID, --compare, --html, --import or --delete with it")
        if self.compare and len(self.compare) != 2:
            raise UsageError(f"--compare takes two run ids (--compare A --compare B), got {len(self.compare)}")
        if self.compare and self.run_id is not None:
            raise UsageError("give RUN_ID or --compare A --compare B, not both")
        if self.samples and self.run_id is None:  # else a script that asked for samples gets a list without any
            raise UsageError("--samples goes with RUN_ID: `sparkdoctor history RUN_ID --samples`")
        if self.html is not None:
            from sparkdoctor.commands.history_html import refuse_bad_name

            refuse_writing_over_the_ledger(refuse_bad_name(self.html), self.ledger, "--html")
            if self.run_id is not None or self.compare:
                raise UsageError("--html writes the whole ledger: no RUN_ID or --compare with it")
            if self.output is not None:
                raise UsageError("--html FILE is where the page goes: -o does not go with it")
        if self.import_file is not None and (self.run_id is not None or self.compare or self.html is not None):
            raise UsageError("--import FILE stores one kept run: no RUN_ID, --compare or --html with it")
        if self.yes and self.delete is None:
            raise UsageError("--yes goes with --delete RUN_ID: `sparkdoctor history --delete RUN_ID --yes`")
        if self.delete is not None and (self.run_id is not None or self.compare or self.html is not None
                                        or self.import_file is not None):
            raise UsageError("--delete RUN_ID removes one run: no RUN_ID, --compare, --html or --import with it")


def run(options: HistoryCommand) -> Result[HistoryDocument]:
    """The document the options ask for, read from the ledger."""
    from sparkdoctor.cli_support import open_ledger

    options.refuse_bad_options()
    if options.import_file is not None:
        return Result("history", "history", _import(Path(options.import_file), options))
    if options.delete is not None:
        return Result("history", "history", _delete(options.delete, options))
    with open_ledger(options.ledger) as led:  # a LedgerError is exit 5 by itself
        return Result("history", "history", _read(led, options))


def _import(path: Path, options: HistoryCommand) -> HistoryImport:
    """The kept run read and checked before the ledger is opened (a bad file changes nothing), stored in one
    transaction, then its file removed so that it cannot be stored twice."""
    from dataclasses import replace

    from sparkdoctor.bench.history import HistoryImport
    from sparkdoctor.cli_support import open_ledger
    from sparkdoctor.ledger import unstored

    try:
        record = unstored.load(path)
    except unstored.UnreadableRun as exc:
        raise UsageError(f"--import {exc}") from None
    try:  # a ledger that cannot be opened for writing (read-only, held, damaged) keeps the file too
        with open_ledger(options.ledger, read_only=False) as led:
            if record.comparison_id is not None and not unstored.belongs(record, led.comparison(record.comparison_id)):
                record = replace(record, comparison_id=None)  # its comparison is in another ledger
            run_id, stored = led.add_run_once(record)  # a file imported twice (or by two at once) is one run
            ledger_path = str(led.path)
    except LedgerFailure as exc:
        raise LedgerFailure(f"{exc}; {path} is kept") from None
    try:
        path.unlink()
        removed = True
    except OSError:
        removed = False
    return HistoryImport(ledger_path, run_id, str(path), removed, already=not stored)


def _delete(run_id: int, options: HistoryCommand) -> HistoryDelete:
    """What removing the run changes; with --yes the run kept in a file (read back, so that `--import` takes it),
    then removed with its samples in one transaction. A file that cannot be written removes nothing (exit 5)."""
    from sparkdoctor.bench.history import HistoryDelete
    from sparkdoctor.cli_support import open_ledger
    from sparkdoctor.files import OutputError
    from sparkdoctor.ledger import unstored

    with open_ledger(options.ledger, read_only=not options.yes) as led:
        record = led.record(run_id)  # a damaged run is exit 5: it cannot be kept whole
        if record is None:
            raise UsageError(f"ledger {led.path}: no run {run_id} (see `sparkdoctor history`)")
        shown = {k: v for k, v in (led.run(run_id) or {}).items() if k in ("created_at", "recipe_name", "base_url", "comparison_id", "arm")}
        doc = HistoryDelete(str(led.path), run_id, False, {**shown, "headline": record.summary.get("headline")},
                            led.conclusions_naming(run_id))
        if not options.yes:
            return doc
        try:
            kept = unstored.keep(record, unstored.deleted_folder())
            unstored.load(kept)
        except (OSError, OutputError, unstored.UnreadableRun) as exc:
            raise LedgerFailure(f"run {run_id} could not be kept in a file before it is removed ({exc}); "
                                "nothing was removed") from None
        led.delete_run(run_id)
    doc.deleted, doc.kept = True, str(kept)
    return doc


def _read(led: LedgerStore, options: HistoryCommand) -> HistoryDocument:
    from sparkdoctor.bench.history import HistoryCompare, HistoryList, HistoryRun

    path = led.path
    if options.html is not None:
        from sparkdoctor.commands.history_html import write_html

        return write_html(led, options.html)
    if options.compare:
        runs = [led.run(i) for i in options.compare]
        missing = [str(i) for i, r in zip(options.compare, runs, strict=False) if r is None]
        if missing:
            raise UsageError(f"ledger {path}: no run {', '.join(missing)} (see `sparkdoctor history`)")
        stored = [r for r in runs if r is not None]
        for i, r in zip(options.compare, stored, strict=False):
            _refuse_damaged(path, i, r)
        from sparkdoctor.ledger.compare import compare_runs

        return HistoryCompare(compare_runs(stored[0], stored[1]))
    if options.run_id is not None:
        found = led.run(options.run_id, with_samples=options.samples)
        if found is None:
            raise UsageError(f"ledger {path}: no run {options.run_id} (see `sparkdoctor history`)")
        _refuse_damaged(path, options.run_id, found)
        return HistoryRun(found)
    return HistoryList(str(path), led.runs(options.recipe, options.limit), options.recipe)


def _refuse_damaged(path: Path, run_id: int, found: dict[str, Any]) -> None:
    """A run whose stored JSON is damaged cannot be shown or compared: one line naming what is wrong, exit 5
    (`history` without RUN_ID still lists it, marked, among the others)."""
    if found.get("damaged"):
        raise LedgerFailure(f"ledger {path}: run {run_id} is damaged: {'; '.join(found['damaged'])}")


def register(app: typer.Typer) -> None:
    app.command("history")(verb(HistoryCommand, run, """
        List, show and compare stored benchmark runs."""))
