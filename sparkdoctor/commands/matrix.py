"""`sparkdoctor matrix list|show|validate|verify`: the knowledge base, read, checked and proved.

list, show and validate are `run_*(options) -> Result` functions (tests call them without typer); verify's
work is in sparkdoctor/commands/matrix_verify.py (its pipeline: sparkdoctor/verify/modes.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from sparkdoctor.commands.options import Fmt, Parsed, format_option, verb
from sparkdoctor.errors import UsageError
from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK
from sparkdoctor.matrix import Entry, Matrix, Stack, load
from sparkdoctor.matrix.consistency import Validation
from sparkdoctor.result import Format, Result
from sparkdoctor.views.matrix import LIST

FORMATS = LIST.formats
MATRIX_HELP = "Matrix folder or file (default: bundled)."


@dataclass
class MatrixCommand:
    """What `matrix list` is told; `matrix show` and `matrix validate` are told a little more."""

    matrix: Annotated[Path | None, typer.Option("--matrix", help=MATRIX_HELP)] = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    item_id: str | None = None
    output: Path | None = None  # no option: list, show and validate write to stdout


@dataclass
class ShowCommand(MatrixCommand):
    item_id: Annotated[str | None, typer.Argument(help="Entry or stack id."), Parsed(name="entry_id", default=...)] = None


@dataclass
class ValidateCommand(MatrixCommand):
    matrix: Annotated[Path | None, typer.Argument(help=MATRIX_HELP), Parsed(name="path")] = None
    bounds_doc: Annotated[Path | None, typer.Option("--bounds", metavar="FILE", help=(
        "A `matrix verify --bounds --format json` document: refuse `checked` entries whose checks held outside their "
        "bound there."))] = None
    fixes: Annotated[Path | None, typer.Option("--fixes", metavar="FOLDER", help=(
        "The fixes folder the entries' `fix` ids must name (default: the bundled one), as for `fix --fixes`."))] = None


def run_list(options: MatrixCommand) -> Result[Matrix]:
    """Every entry and known-good stack."""
    Format.parse(options.fmt, FORMATS)
    m = load(options.matrix)
    return Result("matrix list", "matrix-list", m, notes=m.notes())


def run_show(options: MatrixCommand) -> Result[Entry | Stack]:
    """One entry (or stack) in full; UsageError when no entry or stack has the id."""
    Format.parse(options.fmt, FORMATS)
    m = load(options.matrix)
    item = m.get(options.item_id or "") or next((s for s in m.stacks if s.id == options.item_id), None)
    from sparkdoctor.findings import ENGINE_FINDING_PREFIXES

    if item is None and (options.item_id or "").startswith(ENGINE_FINDING_PREFIXES):
        raise UsageError(f"{options.item_id!r} is a finding check makes itself, not a matrix entry: check's output has its "
                         "evidence and remedy (`--format json` has all of it); docs/check.md describes it")
    if item is None:
        raise UsageError(f"no matrix entry or stack with id {options.item_id!r} (try `sparkdoctor matrix list`)")
    return Result("matrix show", "matrix-item", item, notes=m.notes())


def run_validate(options: MatrixCommand, bounds_doc: Path | None = None, fixes: Path | None = None) -> Result[Validation]:
    """The matrix checked as `fix --matrix` and `matrix verify` check it (a MatrixError names file, entry, field;
    every `fix` id names a fix of `fixes`, default the bundled ones, and every fix file there loads as `fix` loads it),
    then across entries (sparkdoctor.matrix.consistency): problems are listed and end in exit 1."""
    from sparkdoctor.fix.definitions import load_all
    from sparkdoctor.matrix.consistency import problems, report_delay

    m = load(options.matrix, fixes, strict_fixes=True)
    load_all(fixes)  # each fix file as `fix` reads it (DefinitionError: one line naming file and field), not its id alone
    if options.matrix is None and m.fallback:
        from sparkdoctor.locations import installed_matrix
        from sparkdoctor.matrix import MatrixError

        try:
            installed = installed_matrix()
        except OSError:  # the data folder cannot be read: the fallback says so
            installed = None
        if installed is not None:
            load(installed, fixes, strict_fixes=True)  # validate judges what `matrix update` installed: its MatrixError, not the fallback
        raise MatrixError(m.fallback)  # it is gone, or the data folder cannot be read
    levels = {lv: sum(1 for e in m.entries if e.evidence == lv) for lv in ("reproduced", "checked", "reported")}
    found, unlisted = problems(m, _bounds_document(bounds_doc) if bounds_doc else None)
    return Result("matrix validate", "matrix-validate",
                  Validation(len(m.entries), len(m.stacks), len(m.files), levels, str(getattr(m, "source", "") or ""), found,
                             report_delay(m), unlisted),
                  exit_code=EXIT_FINDINGS if found else EXIT_OK)


def _bounds_document(path: Path) -> dict[str, Any]:
    """A `matrix verify --bounds --format json` document, read with a byte cap; one line when it is not one."""
    from sparkdoctor.inputs import NotJSON, json_answer, read_text

    try:
        doc = json_answer(read_text(path, 64 << 20))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the bounds document: {exc.strerror or exc}") from None
    except ValueError as exc:  # UnicodeDecodeError too
        raise UsageError(f"{path}: not a bounds document: {f'it {exc}' if isinstance(exc, NotJSON) else str(exc)[:120]}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "bounds":
        raise UsageError(f"{path}: not a bounds document (kind must be \"bounds\", from `matrix verify --bounds --format json`)")
    from sparkdoctor.matrix.consistency import bounds_doc_problem

    problem = bounds_doc_problem(doc)
    if problem:
        raise UsageError(f"{path}: not a bounds document: {problem}")
    return doc


def register(app: typer.Typer) -> None:
    from sparkdoctor.commands import (
        matrix_tracking,  # matrix track / matrix update
        matrix_verify,
    )

    matrix_app = typer.Typer(help="List, show, validate and verify the knowledge base.", no_args_is_help=True)
    app.add_typer(matrix_app, name="matrix")
    matrix_tracking.register(matrix_app)
    matrix_app.command("list")(verb(MatrixCommand, run_list, "List every entry and known-good stack."))
    matrix_app.command("show")(verb(ShowCommand, run_show, "Show one entry (or stack) in full."))
    matrix_app.command("validate")(verb(ValidateCommand, lambda options: run_validate(options, options.bounds_doc, options.fixes), """
        Check matrix files against the schema, probe ids and verify tables, then across entries (remedies that another entry says break; `checked` entries that bracket nothing).

        Exit 1: a problem across entries."""))
    matrix_app.command("verify")(verb(matrix_verify.VerifyCommand, matrix_verify.run, matrix_verify.HELP))
