"""`sparkdoctor mods check PATH...`: does each mod (a diff, a patch script, an eugr mod folder) still apply to
the target, is it already upstream, or will it break the launch? The pipeline is sparkdoctor.mods; nothing
here or there changes the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from sparkdoctor.commands.options import (
    EMPTY,
    NAMES_A_FILE,
    Fmt,
    Output,
    format_option,
    verb,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.mods.report import ModsReport
from sparkdoctor.result import Format, Result
from sparkdoctor.views.mods import VIEW

FORMATS = VIEW.formats


@dataclass
class ModsCommand:
    paths: Annotated[list[Path], typer.Argument(help="Mods: a folder (eugr mods/<name>/ with run.sh), *.patch, *.diff, *.py or *.sh.")]
    python: Annotated[str | None, typer.Option("--python", help="Judge against this environment's installed files (default: $VIRTUAL_ENV, else this interpreter)."), NAMES_A_FILE] = None
    site: Annotated[list[Path], typer.Option("--site", help="Judge against this folder standing for a site-packages folder (repeatable)."), EMPTY] = field(default_factory=list)
    releases: Annotated[list[str], typer.Option("--release", metavar="NAME==VERSION", help="Judge against a released wheel, read without installing it (repeatable), e.g. vllm==0.33.0."), EMPTY] = field(default_factory=list)
    strict: Annotated[bool, typer.Option("--strict", help="Also fail on a superseded mod or one that cannot be judged.")] = False
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds one mod script may run (default 60).")] = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    container: Annotated[str | None, typer.Option("--container", help="Judge against the files of the interpreter inside this running container (docker/podman; read through the container CLI, never changed).")] = None
    container_python: Annotated[str | None, typer.Option("--container-python", help="The interpreter inside the container or image (default: the one holding vLLM, as check finds it).")] = None
    image: Annotated[str | None, typer.Option("--image", help="Judge against the files of this container image (a throwaway container of it is started and removed; never pulled).")] = None

    def refuse_bad_options(self) -> None:
        """Every usage error of `mods check` (exit 2, one line), before a mod is read."""
        Format.parse(self.fmt, FORMATS)
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0):
            raise UsageError(f"--timeout {self.timeout}: a number of seconds above 0")
        if not self.paths:
            raise UsageError("give at least one mod: a folder, *.patch, *.diff, *.py or *.sh")
        if sum(bool(x) for x in (self.python, self.site, self.releases, self.container is not None,
                                 self.image is not None)) > 1:
            raise UsageError("--python, --site, --release, --container and --image exclude each other: judge against "
                             "one target at a time")
        if self.container is not None:
            from sparkdoctor.targets.choose import refuse_bad_target_options

            refuse_bad_target_options(None, self.container, self.container_python, False)
        elif self.container_python is not None and self.image is None:
            raise UsageError("--container-python needs --container or --image (for a local interpreter use --python)")


def run(options: ModsCommand) -> Result[ModsReport]:
    """Every mod judged; exit 1 when one fails (--strict: or is superseded or cannot be judged). A ModError is
    exit 2 by itself, a target that cannot be read (TargetError) exit 3."""
    from sparkdoctor.mods.report import ModsOptions
    from sparkdoctor.mods.report import run as judge

    options.refuse_bad_options()
    report = judge(ModsOptions(list(options.paths), options.python, list(options.site), list(options.releases),
                               options.strict, options.timeout, options.container, options.container_python,
                               options.image))
    return Result("mods check", "mods", report, exit_code=report.exit_code)


def register(app: typer.Typer) -> None:
    mods_app = typer.Typer(help="Judge the mods (patches, patch scripts) a recipe applies.", no_args_is_help=True)
    mods_app.command("check")(verb(ModsCommand, run, """
        Say, for each mod and each file it touches: applies, already applied, superseded upstream, fails (and where it diverged) or cannot tell (and why).

        Exit 0: no mod fails; 1: a mod fails (--strict: or is superseded or cannot be judged); 2: bad input; 3: the target (--python, --container, --image) cannot be read."""))
    app.add_typer(mods_app, name="mods")
