"""One module per verb (check, matrix, fix, bench, history, audit, ...).

Each module exposes `register(app: typer.Typer) -> None`, which adds its command (named like the
module) to an app. The root app's group is `LazyVerbs`: a verb's module is imported, and its command
built, only when that verb is called or listed in --help, so `check` pays for none of the others (importing
the ten modules and building their click commands cost 30-180 ms per start, measured by hand). A
command module imports only typer, the standard library and the base modules (commands.options, result, errors,
cli_support) at the top and loads its pipeline inside the command function. Its options are the fields of one
dataclass (commands/options.py makes the typer command of them). A command module parses and renders; the work lives in its pipeline package
(sparkdoctor/fix/, sparkdoctor/bench/, ...), which never imports a command module.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import (
    TyperGroup,  # typer vendors click (typer._click): no click import here
)

# Module names under sparkdoctor.commands, in the order their commands appear in --help.
VERBS: list[str] = [
    "check",
    "matrix",
    "fix",
    "bench",
    "history",
    "conclusions",
    "rerun",
    "audit",
    "recipe",
    "report",
    "explain",
    "diff",
    "whatif",
    "fleet",
    "mods",
]


def load_verb(name: str) -> Any:
    """The click command of one verb: its module registers it on an app of its own, built here."""
    sub = typer.Typer()
    importlib.import_module(f"sparkdoctor.commands.{name}").register(sub)
    return typer.main.get_group(sub).commands[name]


class LazyVerbs(TyperGroup):
    """The root group: the commands defined in cli.py, then VERBS, loaded on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        defined = super().list_commands(ctx)
        return defined + [name for name in VERBS if name not in defined]

    def get_command(self, ctx: Any, name: str) -> Any:
        command = super().get_command(ctx, name)
        if command is None and name in VERBS:
            command = load_verb(name)
            self.add_command(command, name)
        return command
