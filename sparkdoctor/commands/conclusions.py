"""`sparkdoctor conclusions`: every recorded conclusion, fresh / stale (and exactly what changed) /
flipped / broken / incomparable, each with its evidence (comparison, runs, fingerprints). The work is
in sparkdoctor/conclusions/; this module parses and renders."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal, open_ledger
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format

FORMATS = ("console", "json")


def register(app: typer.Typer) -> None:
    app.command("conclusions")(conclusions)


def conclusions(
    name: str | None = typer.Argument(None, help="Only this conclusion."),
    ledger: Path | None = typer.Option(None, "--ledger", help="Ledger file (default: the state folder's ledger.sqlite)."),
    fmt: str = format_option(Format.console, Format.json),
) -> None:
    """List conclusions: fresh, stale (and what changed in the toolchain), flipped by a rerun, broken."""
    if fmt not in FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    from sparkdoctor.bench.flow import progress_line
    from sparkdoctor.conclusions import staleness, store
    from sparkdoctor.conclusions.model import CONCLUSION_VERSION
    from sparkdoctor.conclusions.toolchain import Toolchains

    led = open_ledger(ledger)
    try:
        found = store.latest(led, name)
        if name is not None and not found:
            raise Fatal(f"no conclusion named {name!r} in ledger {led.path}")
        with progress_line() as progress:
            toolchains = Toolchains(progress)
            statuses = [staleness.judge(c, led, toolchains).to_dict() for c in found]
    finally:
        led.close()
    doc = {"schema": 1, "conclusion_version": CONCLUSION_VERSION, "kind": "conclusions", "ledger": str(led.path),
           "conclusions": statuses}
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        emit_json("conclusions", "conclusions", doc)
        return
    from rich.console import Console

    from sparkdoctor.conclusions import render
    from sparkdoctor.emit import emit_console

    emit_console(lambda console: render.conclusions(console, doc), Console() if sys.stdout.isatty() else Console(width=160))
