"""`sparkdoctor mods check PATH...`: does each mod (a diff, a patch script, an eugr mod folder) still apply to
the target, is it already upstream, or will it break the launch? The pipeline is sparkdoctor.mods; nothing
here or there changes the target."""

from __future__ import annotations

from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format


def register(app: typer.Typer) -> None:
    mods_app = typer.Typer(help="Judge the mods (patches, patch scripts) a recipe applies.", no_args_is_help=True)
    app.add_typer(mods_app, name="mods")

    @mods_app.command("check")
    def check(
        paths: list[Path] = typer.Argument(..., help="Mods: a folder (eugr mods/<name>/ with run.sh), *.patch, *.diff, *.py or *.sh."),
        python: str | None = typer.Option(None, "--python", help="Judge against this environment's installed files (default: $VIRTUAL_ENV, else this interpreter)."),
        site: list[Path] | None = typer.Option(None, "--site", help="Judge against this folder standing for a site-packages folder (repeatable)."),
        releases: list[str] | None = typer.Option(None, "--release", metavar="NAME==VERSION", help="Judge against a released wheel, read without installing it (repeatable), e.g. vllm==0.33.0."),
        container: str | None = typer.Option(None, "--container", help="Judge against the files of the interpreter inside this running container (docker/podman; read through the container CLI, never changed)."),
        container_python: str | None = typer.Option(None, "--container-python", help="The interpreter inside the container or image (default: the one holding vLLM, as check finds it)."),
        image: str | None = typer.Option(None, "--image", help="Judge against the files of this container image (a throwaway container of it is started and removed; never pulled)."),
        strict: bool = typer.Option(False, "--strict", help="Also fail on a superseded mod or one that cannot be judged."),
        timeout: float | None = typer.Option(None, "--timeout", help="Seconds one mod script may run (default 60)."),
        fmt: str = format_option(Format.console, Format.json),
    ) -> None:
        """Say, for each mod and each file it touches: applies, already applied, superseded upstream, fails (and
        where it diverged) or cannot tell (and why). Exit 0: no mod fails; 1: a mod fails (--strict: or is
        superseded or cannot be judged); 2: bad input."""
        if fmt not in ("console", "json"):
            raise Fatal(f"--format {fmt}: choose one of console, json")
        if timeout is not None and not timeout > 0:
            raise Fatal(f"--timeout {timeout}: a number of seconds above 0")
        from sparkdoctor.mods.report import ModsOptions, render_console, run, to_json

        options = ModsOptions(list(paths), python, list(site or []), list(releases or []), strict, timeout, container,
                              container_python, image)
        report = run(options)  # a ModError is exit 2 by itself
        if fmt == "json":
            from sparkdoctor.emit import emit_json

            emit_json("mods check", "mods", to_json(report), report.exit_code)
        else:
            from sparkdoctor.emit import emit_console

            emit_console(lambda console: render_console(report, console))
        raise typer.Exit(report.exit_code)
