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


HUGE = "a" * 130_000
QUOTED_HUGE = "a" * 200 + "… (130,000 characters)"
HUGE_VALUES = [
    (["check", "--python", HUGE, "--no-kernels"], 3),
    (["check", "--arch", HUGE, "--no-kernels"], 2),
    (["check", "--facts", HUGE], 2),
    (["check", "-f", HUGE], 2),
    (["check", "--timeout", HUGE], 2),
    (["check", f"--python={HUGE}", "--no-kernels"], 3),
    (["matrix", "show", HUGE], 2),
    (["matrix", "verify", HUGE], 2),
    (["history", HUGE], 2),
    (["history", "--delete", HUGE], 2),
    (["explain", HUGE], 2),
    (["bench", "--url", HUGE], 2),
    (["recipe", "show", HUGE], 2),
    (["fix", "--rollback", HUGE], 2),
]


@pytest.mark.parametrize(("args", "code"), HUGE_VALUES, ids=[" ".join(a).replace(HUGE, "HUGE") for a, _ in HUGE_VALUES])
def test_an_error_quotes_the_start_of_a_huge_value_and_its_length(run, args, code):  # noqa: F811
    """A 130,000-character argument was echoed whole by some one-line errors (`--python`, `--arch`, `matrix show`,
    `history`, `explain`, click's own "Invalid value"); others cut it at 100. Every error line now quotes at most
    200 characters of a value, then its length."""
    p = run(*args)
    assert p.returncode == code, (p.returncode, p.stderr[:300])
    assert p.stderr.count("\n") == 1 and len(p.stderr) < 700, p.stderr[:700]
    assert QUOTED_HUGE in p.stderr and "a" * 201 not in p.stderr, p.stderr[:700]


def test_a_huge_value_changed_on_its_way_and_the_json_message_are_cut_too(run, tmp_path):  # noqa: F811
    # a path the error names as it resolved it (the trailing "/" dropped): cut all the same, its own length said
    p = run("history", "--ledger", "a/" * 65_000)
    assert p.returncode == 5 and len(p.stderr) < 700 and "… (129,999 characters)" in p.stderr, p.stderr[:700]
    p = run("check", "--arch", HUGE, "--no-kernels", "--format", "json")
    message = json.loads(p.stdout)["errors"][0]["message"]
    assert p.returncode == 2 and QUOTED_HUGE in message and len(message) < 700, message[:700]


def test_error_line_cuts_each_long_value_once_and_keeps_what_follows():
    from sparkdoctor.text import error_line

    spaced = "x y " * 100  # a value with spaces: found whole in the line, cut as one
    assert error_line(f"--model {spaced}: no such model", ["--model", spaced]) == (
        f"--model {spaced[:200]}… (400 characters): no such model")
    # --opt=VALUE quotes VALUE; a path that holds it names the value's length, not the path's
    value = "b" * 300
    assert error_line(f"/state/journals/{value}: File name too long", [f"--journal={value}"]) == (
        f"/state/journals/{'b' * 200}… (300 characters): File name too long")
    # a value the line changed on its way (not on the command line): its run cut, the closing punctuation kept
    assert error_line(f"ledger '{'c' * 250}': is a folder", []) == f"ledger '{'c' * 200}… (250 characters)': is a folder"
    assert error_line("short: kept whole", []) == "short: kept whole"
