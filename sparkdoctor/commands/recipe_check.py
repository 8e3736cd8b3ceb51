"""`sparkdoctor recipe check RECIPE`: the body of the command `recipe.py` registers (kept apart so the
serve helper's recipe.py grows by a few lines only). Findings, --fail-on and exit codes as `check`."""

from __future__ import annotations

import sys

import typer

from sparkdoctor.cli_support import Fatal

FORMATS = ("console", "json", "junit", "sarif")


def check_command(recipe: str, overrides: dict, python: str | None, matrix_path: str | None, fail_on: str,
                  fmt: str, container: str | None = None, container_python: str | None = None) -> None:
    if fmt not in FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    if fail_on not in ("info", "warn", "error"):
        raise Fatal(f"--fail-on {fail_on}: choose one of info, warn, error")
    from sparkdoctor.bench.flow import progress_line
    from sparkdoctor.conclusions import recipe_check
    from sparkdoctor.exitcodes import EXIT_FINDINGS

    with progress_line() as progress:  # a RecipeError, MatrixError (2) or TargetError (3) says how it ends
        doc = recipe_check.run(recipe, overrides, python, matrix_path, fail_on, progress, container,
                                    container_python)
    from sparkdoctor.emit import emit_console, emit_json, write_stdout

    if fmt == "json":
        emit_json("recipe check", "recipe-check", doc, EXIT_FINDINGS if doc["failed"] else 0)
    elif fmt == "junit":
        from sparkdoctor.conclusions import junit

        write_stdout(junit.render(doc) + "\n")
    elif fmt == "sarif":
        from sparkdoctor.matrix import load
        from sparkdoctor.render.sarif import render_recipe_sarif

        write_stdout(render_recipe_sarif(doc, load(matrix_path)) + "\n")
    else:
        from rich.console import Console

        from sparkdoctor.conclusions import render

        emit_console(lambda console: render.recipe_check(console, doc), Console() if sys.stdout.isatty() else Console(width=160))
    if doc["failed"]:
        raise typer.Exit(EXIT_FINDINGS)
