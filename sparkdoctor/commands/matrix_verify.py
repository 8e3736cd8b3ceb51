"""`sparkdoctor matrix verify [ENTRY]`: prove entries (install their affected and fixed versions and run the probe;
read their released wheels), or `--bisect`, `--latest`, `--bounds`, `--stacks`. The typer command is declared in
commands/matrix.py; it calls `verify_command` here.

`VerifyCommand` holds the options, `run()` returns a Result whose kind is the mode's document (verify,
verify-bisect, verify-latest, bounds, stacks; data: a sparkdoctor.verify.modes answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.verify.modes import Answer
from sparkdoctor.views.verify import VIEW

FORMATS = VIEW.formats
KINDS = ("all", "installs", "files")


@dataclass
class VerifyCommand:
    """Everything `matrix verify` is told; the defaults are the command line's."""

    entry_id: str | None = None
    keep: bool = False
    matrix: Path | None = None
    fmt: Format = Format.console
    kind: str = "all"
    bisect: str | None = None
    latest: bool = False
    bounds: bool = False
    stacks: bool = False
    output: Path | None = None

    def refuse_bad_options(self) -> None:
        """Every usage error of `matrix verify` (exit 2, one line), before the matrix is read."""
        Format.parse(self.fmt, FORMATS)
        if self.kind not in KINDS:
            raise UsageError(f"--kind {self.kind}: choose one of {', '.join(KINDS)}")
        modes = [name for name, on in (("--bounds", self.bounds), ("--stacks", self.stacks),
                                       ("--bisect", self.bisect is not None), ("--latest", self.latest)) if on]
        if len(modes) > 1:  # each is its own run; the second one used to be silently ignored
            raise UsageError(f"{' and '.join(modes)} exclude each other: give one")


def run(options: VerifyCommand) -> Result[Answer]:
    """The chosen mode's answer; its exit code: 0 confirmed, 1 contradicted, 2 could not build, download or probe."""
    from sparkdoctor.matrix import load
    from sparkdoctor.verify import modes

    options.refuse_bad_options()
    matrix = load(options.matrix)  # a MatrixError is exit 2 by itself
    if options.bounds:
        answer: modes.EntryChecks | modes.Bisection | modes.Latest | modes.Bounds | modes.Stacks = modes.bounds(matrix, options.entry_id)
        kind = "bounds"
    elif options.stacks:
        answer, kind = modes.stacks(matrix, options.entry_id), "stacks"
    elif options.bisect is not None:
        answer, kind = modes.bisection(matrix, options.bisect), "verify-bisect"
    elif options.latest:
        answer, kind = modes.latest(matrix, options.entry_id, options.kind), "verify-latest"
    else:
        answer, kind = modes.entry_checks(matrix, options.entry_id, options.keep, options.kind), "verify"
    return Result("matrix verify", kind, answer, exit_code=answer.exit_code)


def verify_command(entry_id: str | None, keep: bool, matrix_path: Path | None, fmt: str, kind: str = "all",
                   bisect_id: str | None = None, latest: bool = False, bounds: bool = False, stacks: bool = False,
                   output: Path | None = None) -> int:
    """The typer body of `matrix verify` (commands/matrix.py): the options, run, emit; the exit code."""
    from sparkdoctor.emit import emit

    options = VerifyCommand(entry_id, keep, matrix_path, Format(fmt), kind, bisect_id, latest, bounds, stacks, output)
    return emit(run(options), options.fmt, options.output)
