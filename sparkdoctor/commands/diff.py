"""`sparkdoctor diff A.json B.json`: drift between two saved snapshots (`check --save-facts`).

Exit 0: no risky difference; 1: a risky one (what a multi-node run or an upgrade must not carry);
2: a file that is not a snapshot, said in one line naming the file and the field.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.commands.options import format_option
from sparkdoctor.exitcodes import EXIT_DIFF_BAD_INPUT, EXIT_DIFF_RISKY, EXIT_DIFF_SAFE
from sparkdoctor.result import Format

DIFF_FORMATS = ("console", "json")


def register(app: typer.Typer) -> None:
    app.command("diff")(diff)


def diff(
    a: Path = typer.Argument(..., metavar="A.json", help="A Facts snapshot (check --save-facts): the reference node, or before."),
    b: Path = typer.Argument(..., metavar="B.json", help="The other snapshot: the second node, or after."),
    fmt: str = format_option(Format.console, Format.json),
) -> None:
    """Compare two snapshots field by field; each difference is risky (for a multi-node run) or benign."""
    if fmt not in DIFF_FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(DIFF_FORMATS)}", EXIT_DIFF_BAD_INPUT)
    from sparkdoctor.diff import compare
    from sparkdoctor.diff.render import diff_json, render_console
    from sparkdoctor.facts import Facts

    facts = (Facts.load(a), Facts.load(b))  # a FactsError is exit 2 (EXIT_DIFF_BAD_INPUT) by itself
    comparison = compare(*facts)
    names = (str(a), str(b))
    if sys.stdout is None:
        raise Fatal("stdout is closed: nowhere to write the diff", EXIT_DIFF_BAD_INPUT)
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        emit_json("diff", "diff", diff_json(comparison, names, facts), EXIT_DIFF_RISKY if comparison.risky else EXIT_DIFF_SAFE)
    else:
        from rich.console import Console

        from sparkdoctor.emit import emit_console

        emit_console(lambda console: render_console(comparison, names, facts, console), Console(soft_wrap=True, highlight=False))
    sys.stdout.flush()
    raise typer.Exit(EXIT_DIFF_RISKY if comparison.risky else EXIT_DIFF_SAFE)
