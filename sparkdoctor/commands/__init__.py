"""One module per verb beyond `check` and `matrix` (fix, bench, history, audit, ...).

Each module exposes `register(app: typer.Typer) -> None`, which adds its commands to the root app.
They are imported when the CLI starts, so a command module imports only typer and the standard
library at the top and loads its pipeline inside the command function: `check` must not pay for
`bench`. A command module parses and renders; the work lives in its pipeline package
(sparkdoctor/fix/, sparkdoctor/bench/, ...), which never imports a command module.
"""

from __future__ import annotations

import importlib

import typer

# Module names under sparkdoctor.commands, in the order their commands appear in --help.
VERBS: list[str] = [
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
]


def register_all(app: typer.Typer) -> None:
    for name in VERBS:
        importlib.import_module(f"sparkdoctor.commands.{name}").register(app)
