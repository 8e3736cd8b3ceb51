"""`sparkdoctor diff A.json B.json`: drift between two saved snapshots (`check --save-facts`).

Exit 0: no risky difference; 1: a risky one (what a multi-node run or an upgrade must not carry); 2: a file that
is not a snapshot, said in one line naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from sparkdoctor.commands.options import (
    Fmt,
    Output,
    format_option,
    refuse_writing_over_an_input,
    verb,
)
from sparkdoctor.diff.document import DiffDocument
from sparkdoctor.result import Format, Result
from sparkdoctor.views.diff import VIEW

FORMATS = VIEW.formats


@dataclass
class DiffCommand:
    a: Annotated[Path, typer.Argument(metavar="A.json", help="A Facts snapshot (check --save-facts): the reference node, or before.")]
    b: Annotated[Path, typer.Argument(metavar="B.json", help="The other snapshot: the second node, or after.")]
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None

    def refuse_bad_options(self) -> None:
        Format.parse(self.fmt, FORMATS)
        refuse_writing_over_an_input(self.output, {"A": self.a, "B": self.b})


def run(options: DiffCommand) -> Result[DiffDocument]:
    """The two snapshots compared; a FactsError (one line naming the file and field) is exit 2 by itself."""
    from sparkdoctor.diff.compare import compare
    from sparkdoctor.facts import Facts

    options.refuse_bad_options()
    facts = (Facts.load(options.a), Facts.load(options.b))
    document = DiffDocument.of(compare(*facts), (str(options.a), str(options.b)), facts)
    return Result("diff", "diff", document, exit_code=document.exit_code)


def register(app: typer.Typer) -> None:
    app.command("diff")(verb(DiffCommand, run, """
        Compare two snapshots field by field; each difference is risky (for a multi-node run) or benign."""))
