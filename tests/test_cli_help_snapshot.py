"""Every command's `--help`, and the error line each typed option gives for a value of the wrong kind, compared
with a snapshot taken from the code before the options were declared as dataclass fields (tests/data/cli_snapshot.json).

The options' names, help texts, defaults, metavars and hidden options are the command line's contract; how they
are declared in the code is not. Rich's width is pinned so that the snapshot is the same on every terminal.
Regenerate after a deliberate change with SPARKDOCTOR_WRITE_SNAPSHOT=1 and read the diff.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.rich_utils
from typer.core import TyperOption
from typer.testing import CliRunner

from sparkdoctor import cli
from sparkdoctor.commands import VERBS, load_verb
from sparkdoctor.commands.options import EMPTY, Output, Parsed, command
from tests.inproc import invoke

SNAPSHOT = Path(__file__).resolve().parent / "data" / "cli_snapshot.json"
TYPED = {"IntParamType", "FloatParamType", "IntRange", "FloatRange", "Choice"}


def _commands() -> list[tuple[list[str], object]]:
    found = []

    def walk(node: object, words: list[str]) -> None:
        found.append((words, node))
        for name, sub in sorted(getattr(node, "commands", {}).items()):
            walk(sub, [*words, name])

    for verb in VERBS:
        walk(load_verb(verb), [verb])
    return found


def _bad_values() -> list[list[str]]:
    """For each option that parses its value (a number, a choice, --format): that option given 'bogus'."""
    argvs = []
    for words, cmd in _commands():
        for param in getattr(cmd, "params", []):
            if isinstance(param, TyperOption) and not param.is_flag and (
                    type(param.type).__name__ in TYPED or param.opts[0] == "--format"):
                argvs.append([*words, param.opts[0], "bogus"])
    return argvs


def _described(param: object) -> str:
    """What the command line sees of one parameter (hidden ones included), not the name the code gives it."""
    seen = {key: getattr(param, key, None) for key in ("opts", "secondary_opts", "hidden", "multiple", "is_flag",
                                                          "required", "nargs", "metavar", "count", "envvar")}
    default = getattr(param, "default", None)
    seen["default"] = getattr(default, "value", default)  # an enum member and its value read the same on the command line
    seen["type"] = type(getattr(param, "type", None)).__name__
    return repr(sorted(seen.items()))


def current(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 120)
    monkeypatch.setattr(typer.rich_utils, "FORCE_TERMINAL", False)
    helps = {}
    for words, _ in [([], None), *_commands()]:
        result = CliRunner().invoke(cli.app, [*words, "--help"], env={"COLUMNS": "120", "NO_COLOR": "1"})
        assert result.exit_code == 0, (words, result.output)
        helps[" ".join(words) or "sparkdoctor"] = result.output
    params = {" ".join(words): [_described(p) for p in getattr(cmd, "params", [])] for words, cmd in _commands()}
    errors = {}
    for argv in _bad_values():
        code, _, line = invoke(*argv, cpu_seconds=20)
        errors[" ".join(argv)] = f"exit {code}: {line}"
    return {"help": helps, "params": params, "bad values": errors}


def test_help_and_bad_value_errors_match_the_snapshot(monkeypatch):
    seen = current(monkeypatch)
    if os.environ.get("SPARKDOCTOR_WRITE_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(seen, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    expected = json.loads(SNAPSHOT.read_text())
    assert sorted(seen["help"]) == sorted(expected["help"])
    for name, text in expected["help"].items():
        assert seen["help"][name] == text, name
    for name, params in expected["params"].items():  # the order the user sees is the help's
        assert sorted(seen["params"][name]) == sorted(params), name
    assert seen["bad values"] == expected["bad values"]


def test_the_snapshot_covers_every_verb_and_some_typed_options():
    expected = json.loads(SNAPSHOT.read_text())
    assert {name.split()[0] for name in expected["help"]} >= set(VERBS)
    assert len(expected["bad values"]) > 20



@dataclasses.dataclass
class Told:
    """A command's options, as a verb declares them (module level: the annotations are read in this module)."""

    path: Annotated[Path | None, typer.Argument(help="A path."), Parsed(name="where")] = None
    names: Annotated[list[str], typer.Option("--name"), EMPTY] = dataclasses.field(default_factory=list)
    read: Annotated[bool, typer.Option("--no-read"), Parsed(make=operator.not_, default=False)] = True
    output: Output = None
    internal: int = 7


def test_a_command_is_made_of_its_options_fields(tmp_path):
    """The fields carrying typer metadata become the parameters (a field without is not one); Parsed names a
    parameter, reads it as another type and makes the field's value of it; the body gets the dataclass."""
    seen: list[Told] = []

    def body(options: Told) -> None:
        """Say what was told."""
        seen.append(options)

    app = typer.Typer()
    app.command("told")(command(Told, body))
    app.command("other")(lambda: None)  # two commands: "told" is a subcommand
    out = str(tmp_path / "out.json")
    assert CliRunner().invoke(app, ["told", "x", "--name", "a", "--name", "b", "--no-read", "-o", out]).exit_code == 0
    assert CliRunner().invoke(app, ["told"]).exit_code == 0
    assert seen == [Told(Path("x"), ["a", "b"], False, Path(out)), Told()]
    shown = CliRunner().invoke(app, ["told", "--help"], env={"COLUMNS": "120"}).output
    assert "Say what was told." in shown and "where" in shown.lower() and "--internal" not in shown


def test_no_help_text_breaks_a_line_inside_a_paragraph():
    """Rich keeps a help string's single line breaks in the command lists (`sparkdoctor --help` printed audit's and
    whatif's summaries broken mid-sentence, ragged against the width): every paragraph is one line in the string,
    paragraphs are parted by a blank line (the first one is the summary the lists show)."""
    import inspect

    broken = []
    for words, cmd in _commands():
        texts = [("help", getattr(cmd, "help", None) or "")]
        texts += [(str(p.opts), getattr(p, "help", None) or "") for p in getattr(cmd, "params", [])]
        for where, text in texts:
            if any("\n" in paragraph for paragraph in inspect.cleandoc(text).split("\n\n")):
                broken.append(f"{' '.join(words)} {where}")
    assert len(_commands()) > 20 and not broken, broken
