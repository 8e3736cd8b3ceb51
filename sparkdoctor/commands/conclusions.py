"""`sparkdoctor conclusions`: every recorded conclusion, fresh / stale (and exactly what changed) / flipped /
broken / incomparable, each with its evidence (comparison, runs, fingerprints).

No conclusion of that name: a ConclusionError (2); a ledger that cannot be read: 5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from sparkdoctor.commands.options import Fmt, Ledger, Output, format_option, verb
from sparkdoctor.conclusions.documents import ConclusionsDocument
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.views.conclusions import VIEW

FORMATS = VIEW.formats


@dataclass
class ConclusionsCommand:
    name: Annotated[str | None, typer.Argument(help="Only this conclusion.")] = None
    ledger: Ledger = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None

    def refuse_bad_options(self) -> None:
        Format.parse(self.fmt, FORMATS)
        if self.name is not None and not self.name.isprintable():  # a byte that is not UTF-8 comes as a surrogate
            from sparkdoctor.text import one_line

            raise UsageError(f"{one_line(self.name[:80])}: not a conclusion name")


def run(options: ConclusionsCommand) -> Result[ConclusionsDocument]:
    """Every conclusion (or the one named), judged on the current toolchain."""
    from sparkdoctor.cli_support import open_ledger
    from sparkdoctor.conclusions import staleness, store
    from sparkdoctor.conclusions.model import ConclusionError
    from sparkdoctor.conclusions.toolchain import Toolchains
    from sparkdoctor.progress import progress_line

    options.refuse_bad_options()
    with open_ledger(options.ledger) as led:
        found = store.latest(led, options.name)
        if options.name is not None and not found:
            raise ConclusionError(f"no conclusion named {options.name!r} in ledger {led.path}")
        with progress_line(command="conclusions") as progress:
            toolchains = Toolchains(progress)
            statuses = [staleness.judge(c, led, toolchains) for c in found]
        return Result("conclusions", "conclusions", ConclusionsDocument(str(led.path), statuses))


def register(app: typer.Typer) -> None:
    app.command("conclusions")(verb(ConclusionsCommand, run, """
        List conclusions: fresh, stale (and what changed in the toolchain), flipped by a rerun, broken."""))
