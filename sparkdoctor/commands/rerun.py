"""`sparkdoctor rerun`: the post-upgrade command and a CI gate. `--dry-run` says what is stale and
why; without it every stale conclusion is re-measured (the same A/B on the current toolchain) and
reported as holds / flipped / changed with old and new numbers side by side, and every stale
workaround is measured with and without. `--fail-on flipped|regression` exits 1 when a conclusion
flipped or a recipe got measurably slower. Parses and renders; the work is in sparkdoctor/conclusions/."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal, open_ledger
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format

FORMATS = ("console", "json")
FAIL_ON = ("flipped", "regression")


def register(app: typer.Typer) -> None:
    app.command("rerun")(rerun)


def _fail_on(values: list[str] | None) -> set[str]:
    wanted = {v.strip() for item in values or [] for v in item.split(",") if v.strip()}
    bad = sorted(wanted - set(FAIL_ON))
    if bad:
        raise Fatal(f"--fail-on {bad[0]}: choose flipped or regression (or both: --fail-on flipped,regression)")
    return wanted


def rerun(
    names: list[str] | None = typer.Argument(None, help="Only these conclusions (default: every stale one)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what is stale and what changed; measure nothing."),
    fail_on: list[str] | None = typer.Option(None, "--fail-on", help="flipped and/or regression: exit 1 when one happened."),
    ledger: Path | None = typer.Option(None, "--ledger", help="Ledger file (default: the state folder's ledger.sqlite)."),
    matrix_path: Path | None = typer.Option(None, "--matrix", help="Matrix folder or file that judges workarounds (default: bundled)."),
    ready_timeout: float = typer.Option(600.0, "--ready-timeout", help="Seconds to wait for each launched server."),
    fmt: str = format_option(Format.console, Format.json),
    allow_load_difference: bool = typer.Option(False, "--allow-load-difference", help="Call a flip even when the old and new runs (or an A/B's arms) ran under clearly different machine load."),
) -> None:
    """Re-measure stale conclusions and stale workarounds on the current toolchain."""
    if fmt not in FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    wanted = _fail_on(fail_on)
    from sparkdoctor.bench.flow import progress_line
    from sparkdoctor.conclusions import rerun as pipeline
    from sparkdoctor.conclusions.toolchain import Toolchains
    from sparkdoctor.exitcodes import EXIT_RERUN_FAIL_ON, EXIT_RERUN_INCOMPLETE
    from sparkdoctor.matrix import load

    matrix = load(matrix_path)
    led = open_ledger(ledger)
    opts = pipeline.Options(ledger=led.path, matrix=matrix_path, ready_timeout=ready_timeout, names=tuple(names or ()),
                            allow_load_difference=allow_load_difference)
    try:
        with progress_line() as progress:
            planned = pipeline.plan(led, matrix, Toolchains(progress), opts.names)
            doc = {"schema": 1, "rerun_version": pipeline.RERUN_VERSION, "kind": "rerun-plan" if dry_run else "rerun",
                   "ledger": str(led.path), "dry_run": dry_run,
                   "conclusions": [s.to_dict() for s in planned["conclusions"]], "workarounds": planned["workarounds"]}
            if not dry_run:
                doc.update(pipeline.execute(led, planned, opts, progress))
    finally:
        led.close()
    failed = []
    if not dry_run:
        if "flipped" in wanted and any(r["outcome"] in ("flipped", "broken") for r in doc["results"]):
            failed.append("flipped")
        if "regression" in wanted and any(r.get("regression") for r in doc["results"]):
            failed.append("regression")
    doc["failed"] = failed
    code = 0
    if failed:
        code = EXIT_RERUN_FAIL_ON
    elif not dry_run and (any(r["outcome"] == "not re-run" for r in doc["results"])
                          or any(not w.get("cost") and w.get("kind") != "mod" for w in doc["workarounds"])):
        code = EXIT_RERUN_INCOMPLETE
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        emit_json("rerun", doc["kind"], doc, code)
    else:
        from rich.console import Console

        from sparkdoctor.conclusions import render
        from sparkdoctor.emit import emit_console

        draw = render.plan if dry_run else render.results
        emit_console(lambda console: draw(console, doc), Console() if sys.stdout.isatty() else Console(width=160))
    if code:
        raise typer.Exit(code)
