"""`sparkdoctor conclusions`: every recorded conclusion, fresh / stale (and exactly what changed) /
flipped / broken / incomparable, each with its evidence (comparison, runs, fingerprints). The work is
in sparkdoctor/conclusions/; this module parses and renders."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from sparkdoctor.cli_support import Fatal, open_ledger

FORMATS = ("console", "json")


def register(app: typer.Typer) -> None:
    app.command("conclusions")(conclusions)


def conclusions(
    name: Optional[str] = typer.Argument(None, help="Only this conclusion."),
    ledger: Optional[Path] = typer.Option(None, "--ledger", help="Ledger file (default: the state folder's ledger.sqlite)."),
    fmt: str = typer.Option("console", "--format", help="console or json (json: only the versioned JSON on stdout)."),
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
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    from rich.console import Console

    from sparkdoctor.conclusions import render

    render.conclusions(Console() if sys.stdout.isatty() else Console(width=160), doc)
