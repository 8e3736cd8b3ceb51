"""`sparkdoctor recipe show RECIPE`: what a recipe resolves to (argv, env, model, port) and where each
value came from. The pipeline (sparkdoctor.recipes) loads inside the command, so `check` never pays for
PyYAML."""

from __future__ import annotations

import typer

from sparkdoctor.cli_support import Fatal, time_limited, timeout_option, warn
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format

FORMATS = ("console", "json")


def parse_sets(values: list[str] | None) -> dict[str, str]:
    """--set key=value (repeatable) into a dict; Fatal on a value without '='."""
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise Fatal(f"--set {item!r}: write key=value (e.g. --set port=9000 or --set env.NAME=value)")
        out[key.strip()] = value
    return out


def register(app: typer.Typer) -> None:
    recipe_app = typer.Typer(help="Read serving recipes (ours, eugr/spark-vllm-docker, sparkrun).", no_args_is_help=True)
    app.add_typer(recipe_app, name="recipe")

    @recipe_app.command("show")
    def show(
        recipe: str = typer.Argument(..., help="A recipe file (.toml, .yaml) or the name of a shipped recipe."),
        sets: list[str] | None = typer.Option(None, "--set", help="Override a parameter: key=value, or env.NAME=value (repeatable)."),
        fmt: str = format_option(Format.console, Format.json),
        timeout: float = timeout_option(),
    ) -> None:
        """Show the resolved command, env, model and port of a recipe, and where each value came from."""
        if fmt not in FORMATS:
            raise Fatal(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
        overrides = parse_sets(sets)
        from sparkdoctor.recipes import load
        from sparkdoctor.recipes.show import render_console, to_json

        with time_limited(timeout, "recipe show"):  # an OutOfTime, like a RecipeError, is exit 2 by itself
            resolved = load(recipe, overrides)
            if fmt == "json":
                text = to_json(resolved)
            else:
                from sparkdoctor.emit import emit_console

                emit_console(lambda console: render_console(resolved, console))
                return
        from sparkdoctor.emit import emit_json

        emit_json("recipe show", "recipe", text)
        for warning in resolved.warnings:
            warn(warning)

    @recipe_app.command("check")
    def check(
        recipe: str = typer.Argument(..., help="A recipe file (.toml, .yaml) or the name of a shipped recipe."),
        sets: list[str] | None = typer.Option(None, "--set", help="Override a parameter: key=value, or env.NAME=value (repeatable)."),
        python: str | None = typer.Option(None, "--python", help="Interpreter (or venv) of the vLLM to judge against (default: the recipe command's venv, else as check)."),
        matrix_path: str | None = typer.Option(None, "--matrix", help="Matrix folder or file (default: bundled)."),
        fail_on: str = typer.Option("error", "--fail-on", help="Lowest severity that fails: info | warn | error."),
        fmt: str = format_option(Format.console, Format.json, Format.junit, Format.sarif),
        container: str | None = typer.Option(None, "--container", help="Judge against the vLLM inside this running container (read through the container CLI, never changed)."),
        container_python: str | None = typer.Option(None, "--container-python", help="The interpreter inside the container (default: the one holding vLLM)."),
    ) -> None:
        """Judge a recipe without launching it: stale env vars and flags, stale workarounds, wrong settings."""
        from sparkdoctor.commands.recipe_check import check_command

        check_command(recipe, parse_sets(sets), python, matrix_path, fail_on, fmt, container, container_python)
