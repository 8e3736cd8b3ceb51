"""What the command line quotes back and reads from the values a user gives: an empty path is refused, naming its
option, never read as the working folder; an error quotes at most the start of a huge value, with its length."""

from __future__ import annotations

import json

import pytest

from tests.test_cli import run  # noqa: F401  # the fixture: the real command in a subprocess

EMPTY_PATHS = [
    (["check", "--facts", ""], "--facts"),
    (["check", "--config", ""], "--config"),
    (["check", "--facts=", "--format", "json"], "--facts"),
    (["check", "--constraints", "x.txt", "--constraints", ""], "--constraints"),
    (["history", "--ledger", ""], "--ledger"),
    (["history", "--import", ""], "--import"),
    (["mods", "check", ""], "PATHS"),
    (["mods", "check", "m.patch", "--site", ""], "--site"),
    (["diff", "", ""], "A.json"),
    (["fix", "--env-file", ""], "--env-file"),
    (["fix", "--python", ""], "--python"),
    (["fix", "--rollback", ""], "JOURNAL"),  # it rolled back the newest journal
    (["recipe", "show", ""], "RECIPE"),
    (["recipe", "check", ""], "RECIPE"),
    (["bench", ""], "RECIPE"),
    (["explain", ""], "[FILE|-]"),
    (["matrix", "list", "--matrix", ""], "--matrix"),
    (["fleet", "check", "--inventory", ""], "--inventory"),
    (["audit", "--recipe", ""], "--recipe"),
]


@pytest.mark.parametrize(("args", "named"), EMPTY_PATHS, ids=[" ".join(a) for a, _ in EMPTY_PATHS])
def test_an_empty_path_is_refused_naming_its_option(run, args, named):  # noqa: F811
    """An empty string where a path is taken read as `.`: `mods check ''` judged the working folder as a mod,
    `check --facts ''` said ".: cannot read snapshot", `history --ledger ''` ended in the ledger's exit 5."""
    p = run(*args)
    assert p.returncode == 2, (args, p.returncode, p.stderr)
    assert p.stderr == f"sparkdoctor: error: {named} '': an empty path (it would name the working folder); give a file or folder\n", p.stderr
    if "json" in args:
        assert json.loads(p.stdout)["errors"][0]["code"] == "usage"
