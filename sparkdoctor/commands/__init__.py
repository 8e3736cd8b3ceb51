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
import itertools
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from sparkdoctor.errors import UsageError

if TYPE_CHECKING:  # typer vendors click (typer._click): its types come from there, and click is never imported
    from typer._click.core import Context, Parameter

# Module names under sparkdoctor.commands, in the order their commands appear in --help.
VERBS: list[str] = ["check", "matrix", "fix", "bench", "history", "conclusions", "rerun", "audit", "recipe", "report",
                    "explain", "diff", "whatif", "fleet", "mods"]


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

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        from sparkdoctor.emit import written_once

        with written_once():  # --help, --version, and the help of a bare `sparkdoctor`
            return super().parse_args(ctx, args)

    def get_command(self, ctx: Any, name: str) -> Any:
        command = super().get_command(ctx, name)
        if command is None and name in VERBS:
            command = load_verb(name)
            self.add_command(command, name)
        return command if command is None else options_take_no_options(command)


def options_take_no_options(command: Any) -> Any:
    """click gives a value option the next word whatever it is: `fix --rollback --python --format json` made
    `--format` the interpreter and `json` the journal, `fix -o --yes` wrote a file named `--yes`. A value option
    followed by another option of the same command is one line now (exit 2); `--python=-odd` still passes a value
    that starts with "-". Applied to a group's commands too (`matrix verify`)."""
    if getattr(command, "_sparkdoctor_checked", False):
        return command
    parse = command.parse_args

    def parse_args(ctx: Any, args: list[str]) -> Any:
        takes, names = set(), set()
        for param in command.params:
            if getattr(param, "param_type_name", "") == "option":
                names.update([*param.opts, *param.secondary_opts])
                if not param.is_flag and not param.count and param.nargs == 1:
                    takes.update(param.opts)
        for word, following in itertools.pairwise(args):
            if word == "--":
                break
            if word in takes and following.split("=", 1)[0] in names:
                spelled = f"{word}=VALUE" if word.startswith("--") else f"{word}VALUE"
                raise UsageError(f"{word} needs a value, not the option {following} (a value that starts with '-': "
                                 f"{spelled})")
        from sparkdoctor.emit import written_once

        with written_once():  # --help (and a bare group's help): one write, a reader that leaves early is no error
            return parse(ctx, args)

    command.parse_args = parse_args
    command._sparkdoctor_checked = True
    for param in command.params:
        if getattr(param.type, "name", None) == "path":  # the click type typer gives a Path field (TyperPath)
            refuse_an_empty_path(param)
    for sub in (getattr(command, "commands", None) or {}).values():
        options_take_no_options(sub)
    return command


def refuse_an_empty_path(param: Parameter) -> None:
    """'' given to a Path option or argument is one line naming it (exit 2): the type made it Path('.'), and the
    command read the working folder as the snapshot, mod, ledger or recipe it was given."""
    process = param.process_value

    def process_value(ctx: Context, value: object) -> object:
        from sparkdoctor.inputs import a_url

        flag = next((o for o in param.opts if o.startswith("--")), None)  # an argument: its metavar, as --help shows it
        label = flag or param.metavar or str(param.name).upper()
        if value == "" or (isinstance(value, tuple | list) and "" in value):
            from sparkdoctor.commands.options import empty_path

            raise empty_path(label)
        for text in value if isinstance(value, tuple | list) else [value]:
            if isinstance(text, str) and (why := a_url(text)):  # Path() made it `https:/x`: "no such file"
                raise UsageError(f"{label} {why}")
        return process(ctx, value)

    param.process_value = process_value  # type: ignore[method-assign]  # this parameter's, as parse_args above
