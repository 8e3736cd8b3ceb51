"""`sparkdoctor matrix verify [ENTRY]`: prove entries (install their affected and fixed versions and run the probe;
read their released wheels), or `--bisect`, `--latest`, `--bounds`, `--stacks`; registered by commands/matrix.py.
The Result's kind is the mode's document: verify, verify-bisect, verify-latest, bounds, stacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from sparkdoctor.commands.options import Fmt, Output, format_option, output_option
from sparkdoctor.errors import UsageError, VerifyIncomplete
from sparkdoctor.exitcodes import EXIT_VERIFY_ERROR
from sparkdoctor.result import Format, Result
from sparkdoctor.verify.modes import Answer
from sparkdoctor.views.verify import VIEW

FORMATS = VIEW.formats
KINDS = ("all", "installs", "files")


@dataclass
class VerifyCommand:
    entry_id: Annotated[str | None, typer.Argument(help="Entry id (default: every entry with a verify or files table).")] = None
    keep: Annotated[bool, typer.Option("--keep", help="Keep the scratch environments (reused by the next run).")] = False
    matrix: Annotated[Path | None, typer.Option("--matrix", help="Matrix folder or file (default: bundled).")] = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    kind: Annotated[str, typer.Option("--kind", help="all | installs (probe in scratch venvs) | files (released wheels).")] = "all"
    bisect: Annotated[str | None, typer.Option("--bisect", metavar="ENTRY", help="Walk the released versions to find where ENTRY's file checks stop holding.")] = None
    latest: Annotated[bool, typer.Option("--latest", help="Run the file checks and verify tables on the newest releases.")] = False
    bounds: Annotated[bool, typer.Option("--bounds", help="Bracket every version bound with its file checks on released files (read remotely).")] = False
    stacks: Annotated[bool, typer.Option("--stacks", help="Resolve every known-good stack for linux aarch64 with a pip dry run (ENTRY: a stack id).")] = False
    output: Annotated[Output, output_option("Write the document here instead of stdout (- is stdout).")] = None

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
    result = Result("matrix verify", kind, answer, exit_code=answer.exit_code)
    if answer.exit_code == EXIT_VERIFY_ERROR:  # exit 2 says why, in `errors` and on stderr
        doc = answer.to_json()
        rows = doc.get("bounds") or doc.get("stacks") or doc.get("results") or doc.get("latest") or [doc.get("bisect")]
        rows = rows if isinstance(rows, list) else []
        failed = [f"{r.get('id') or 'the bisection'}: {r.get('why')}" for r in rows if isinstance(r, dict) and r.get("verdict") == "error"]
        why = f"{len(failed)} could not be built, downloaded or probed; the first: {failed[0]}" if failed else "could not build, download or probe"
        result.fail(VerifyIncomplete(why)).notes.append(f"matrix verify: {why}")
    return result


HELP = """Prove entries: install affected/fixed versions and run the probe; read their released wheels.

    Exit 0: all confirmed; 1: an entry is contradicted (or its bound differs); 2: could not build, download or probe."""
