"""`sparkdoctor rerun`: the post-upgrade command and a CI gate. `--dry-run` says what is stale and why; without it
every stale conclusion is re-measured (the same A/B on the current toolchain) and reported as holds / flipped /
changed with old and new numbers side by side, and every stale workaround is measured with and without.
`--fail-on flipped|regression` exits 1 when a conclusion flipped (or broke: an arm's answers are wrong now, or its
stored row can no longer be judged) or a
recipe got measurably slower; 4 when a stale conclusion or workaround could not be re-measured. The JSON `kind` is rerun-plan or rerun
(sparkdoctor/conclusions/documents.py).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from sparkdoctor.commands.options import (
    EMPTY,
    Fmt,
    Ledger,
    Output,
    format_option,
    refuse_bad_seconds,
    refuse_unwritable_output,
    verb,
)
from sparkdoctor.conclusions.documents import RerunDocument
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.views.rerun import VIEW

FORMATS = VIEW.formats


@dataclass
class RerunCommand:
    names: Annotated[list[str], typer.Argument(help="Only these conclusions (default: every stale one)."), EMPTY] = field(default_factory=list)
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what is stale and what changed; measure nothing.")] = False
    fail_on: Annotated[list[str], typer.Option("--fail-on", help="flipped and/or regression: exit 1 when one happened."), EMPTY] = field(default_factory=list)
    ledger: Ledger = None
    matrix: Annotated[Path | None, typer.Option("--matrix", help="Matrix folder or file that judges workarounds (default: bundled).")] = None
    ready_timeout: Annotated[float, typer.Option("--ready-timeout", help="Seconds to wait for each launched server.")] = 600.0
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    allow_load_difference: Annotated[bool, typer.Option("--allow-load-difference", help="Call a flip even when the old and new runs (or an A/B's arms) ran under clearly different machine load.")] = False
    force: Annotated[bool, typer.Option("--force", help="Launch even when the memory preflight says a recipe does not fit in the memory free now.")] = False

    def refuse_bad_options(self) -> None:
        Format.parse(self.fmt, FORMATS)
        refuse_bad_seconds("--ready-timeout", self.ready_timeout)
        self.wanted()
        refuse_unwritable_output(self.output)  # before the re-measurements, which may take hours, not after

    def wanted(self) -> set[str]:
        """The --fail-on words (repeatable, or comma separated); UsageError for any other word."""
        from sparkdoctor.conclusions.documents import FAIL_ON

        empty = next((item for item in self.fail_on if not item.replace(",", "").strip()), None)
        if empty is not None:  # `--fail-on "$UNSET"` is no gate at all: refused, as check's --fail-on '' is
            raise UsageError(f"--fail-on {empty!r}: choose flipped or regression (or both: --fail-on flipped,regression)")
        wanted = {v.strip() for item in self.fail_on for v in item.split(",") if v.strip()}
        bad = sorted(wanted - set(FAIL_ON))
        if bad:
            raise UsageError(f"--fail-on {bad[0]}: choose flipped or regression (or both: --fail-on flipped,regression)")
        return wanted


def run(options: RerunCommand) -> Result[RerunDocument]:
    """What is stale (and, without --dry-run, what re-measuring it found); the exit code is --fail-on's gate."""
    from sparkdoctor.cli_support import open_ledger
    from sparkdoctor.conclusions import rerun as pipeline
    from sparkdoctor.conclusions.toolchain import Toolchains
    from sparkdoctor.files import file_lock
    from sparkdoctor.matrix import load
    from sparkdoctor.progress import progress_line

    options.refuse_bad_options()
    matrix = load(options.matrix)
    led = open_ledger(options.ledger, read_only=options.dry_run)  # a rerun records what it re-measured
    opts = pipeline.Options(ledger=led.path.absolute(), matrix=options.matrix, ready_timeout=options.ready_timeout,
                            names=tuple(options.names), allow_load_difference=options.allow_load_difference,
                            force=options.force)
    try:
        with contextlib.ExitStack() as held, progress_line(command="rerun") as progress:
            if not options.dry_run:  # one at a time: two reruns re-measured the same conclusions and recorded each twice
                held.enter_context(file_lock(Path(f"{led.path}.rerun-lock"), "rerun", led.path))
            planned = pipeline.plan(led, matrix, Toolchains(progress), opts.names)
            doc = RerunDocument(str(led.path), planned)
            if not options.dry_run:
                doc.done = pipeline.execute(led, planned, opts, progress)
    finally:
        led.close()
    doc.failed = doc.happened(options.wanted())
    return Result("rerun", "rerun", doc, exit_code=doc.exit_code, notes=matrix.notes())


def register(app: typer.Typer) -> None:
    app.command("rerun")(verb(RerunCommand, run, """
        Re-measure stale conclusions and stale workarounds on the current toolchain."""))
