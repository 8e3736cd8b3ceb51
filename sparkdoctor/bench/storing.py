"""Where a measured run is stored: the ledger bench writes to (opened before measuring only when it exists, so a
failed run creates none), and a file `history --import` stores when the ledger cannot take the run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, ParamSpec, TypeVar

from sparkdoctor.bench import run
from sparkdoctor.bench.document import RunDocument
from sparkdoctor.bench.failures import StoreFailed

if TYPE_CHECKING:
    from sparkdoctor.ledger import Ledger, RunRecord

P = ParamSpec("P")
T = TypeVar("T")


def open_ledger(path: Path | None, store: bool, create: bool = True) -> Ledger | None:
    """The ledger to store in. Without `create` (before measuring) only one that exists is opened, so a damaged
    file refuses the run first and a run that fails creates no ledger (`history` then says there is none); and one
    that could not be written (made, or stored in) refuses the run too, before anything is launched or measured."""
    from sparkdoctor.ledger import Ledger, default_path, unwritable

    if not store:
        return None
    where = Path(path or default_path())
    if not create and (why := unwritable(where)):
        raise StoreFailed(f"ledger {where}: {why}; nothing was launched or measured: pass another --ledger, or "
                          "--no-store")
    if not (create or where.exists()):
        return None
    return ledger_call(Ledger, path)


def ledger_call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """A ledger read or write whose failure (a malformed or read-only file) is a Failure with exit 5."""
    from sparkdoctor.ledger import LedgerError

    try:
        return fn(*args, **kwargs)
    except LedgerError as exc:
        raise StoreFailed(str(exc)) from None


def store(ledger: Ledger | None, result: run.RunResult, comparison_id: int | None = None) -> None:
    """The measured run into the ledger; one the ledger cannot take is kept in a file, never lost."""
    if ledger is None:
        return
    record = run.record(result, comparison_id)
    try:
        result.run_id = ledger_call(ledger.add_run, record)
    except StoreFailed as exc:
        keep(record, exc)


def begin_comparison(ledger: Ledger | None, path: Path | None, first: run.RunResult, a_label: str,
                     b_label: str) -> tuple[Ledger, int]:
    """The ledger (made now when it was not there) and an A/B's comparison in it, begun once its first run was
    measured: a comparison whose first arm failed leaves nothing behind. One the ledger cannot take keeps that run in
    a file (always raises then)."""
    try:
        ledger = ledger if ledger is not None else open_ledger(path, True)
        assert ledger is not None  # store is on
        return ledger, ledger_call(ledger.begin_comparison, a_label, b_label)
    except StoreFailed as exc:
        keep(run.record(first), exc)


def keep(record: RunRecord, exc: StoreFailed) -> NoReturn:
    """A measured run the ledger could not take, kept in a file `history --import` stores; always raises."""
    from sparkdoctor.ledger import unstored

    try:
        kept = unstored.keep(record)
    except OSError as why:
        raise StoreFailed(f"{exc}; the measured run could not be kept in {unstored.folder()} either "
                          f"({why.strerror or why}): its numbers are lost") from None
    raise StoreFailed(f"{exc}; the measured run is kept in {kept}: `sparkdoctor history --import {kept}` stores it",
                      kept=str(kept)) from None


def document(ledger: Ledger | None, result: run.RunResult, path: Path | None, store_it: bool) -> RunDocument:
    """The run stored and its document: in the ledger opened before measuring, else in one created now that there
    is a run to store."""
    if ledger is None and store_it:
        try:
            ledger = open_ledger(path, store_it)
        except StoreFailed as exc:
            keep(run.record(result), exc)
    store(ledger, result)
    return RunDocument(result, str(ledger.path) if ledger else None, ledger_call(run.stored_run, ledger, result))
