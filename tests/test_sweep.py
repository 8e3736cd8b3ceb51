"""Every verb's path, number and string options given hostile values through the real CLI in-process
(cli.main, as the console script runs it): each ends with a documented exit code and at most one line on
stderr, never an internal error, and each case's CPU time is bounded (a hang is stopped, never waited out).

Each verb gets a base of arguments that keeps it offline and quick (a snapshot instead of a live target, a
recipe that does not exist, a ledger of its own); the option under test replaces its own value in the base.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from typer.core import TyperOption

from sparkdoctor import cli
from sparkdoctor.commands import VERBS, load_verb
from tests.gb10 import gb10_facts
from tests.inproc import Hung

NAME_MAX = "n" * 300  # longer than a file name may be (255): Python 3.11's Path.exists() raises there
HOSTILE = {
    "path": [NAME_MAX, f"{NAME_MAX}/x", "bad-\udcff-byte", "{folder}"],
    "int": ["1" * 30, "-1", "0"],
    "float": ["1" * 30, "1e400", "nan", "-inf"],
    "string": ["s" * 100_000, "\udcff", "\x1b[31m\nsecond line", NAME_MAX],
}
# README "Exit codes", per verb
EXITS = {
    "check": {0, 1, 2, 3}, "fix": {0, 1, 2, 3, 4, 5, 6}, "bench": {0, 2, 4, 5}, "history": {0, 2, 4, 5},
    "rerun": {0, 1, 2, 4, 5}, "conclusions": {0, 1, 2, 4, 5}, "recipe check": {0, 1, 2, 3, 6}, "recipe show": {0, 2},
    "audit": {0, 1, 2}, "explain": {0, 1, 2}, "diff": {0, 1, 2}, "report": {0, 2, 3}, "whatif": {0, 1, 2, 3},
    "mods check": {0, 1, 2, 3}, "fleet check": {0, 1, 2, 3}, "matrix": {0, 1, 2},
}
CPU_SECONDS = 20


def bases(d: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """verb -> (positional arguments, options) that keep it offline and quick."""
    snap, missing = str(d / "facts.json"), str(d / "missing")
    return {
        "check": ([], {"--facts": snap}),
        "matrix list": ([], {}),
        "matrix show": (["no-such-entry"], {}),
        "matrix track": ([], {"--matrix": missing}),
        "matrix update": ([missing], {}),
        "matrix validate": ([missing], {}),
        "matrix verify": (["no-such-entry"], {}),
        "fix": ([], {"--python": missing}),
        "bench": ([missing + ".toml"], {}),
        "history": ([], {"--ledger": str(d / "ledger.sqlite")}),
        "conclusions": ([], {"--ledger": str(d / "ledger.sqlite")}),
        "rerun": ([], {"--ledger": str(d / "ledger.sqlite")}),
        "audit": ([missing], {}),
        "recipe check": ([missing + ".toml"], {"--python": missing}),
        "recipe show": ([missing + ".toml"], {}),
        "report": ([], {"--facts": snap}),
        "explain": ([str(d / "server.log")], {}),
        "diff": ([snap, snap], {}),
        "whatif": (["not a requirement!"], {"--facts": snap}),
        "fleet check": ([], {"--inventory": missing, "--node-timeout": "5"}),
        "mods check": ([missing], {}),
    }


def _commands():
    def walk(command, words):
        if hasattr(command, "commands"):  # a group (typer carries its own click)
            for name, sub in sorted(command.commands.items()):
                yield from walk(sub, [*words, name])
        else:
            yield words, command

    for verb in VERBS:
        yield from walk(load_verb(verb), [verb])


def _kind(param) -> str | None:
    name = type(param.type).__name__
    if isinstance(param, TyperOption) and param.is_flag:
        return None
    if "Path" in name or "File" in name or param.name in ("output", "html", "save_facts"):
        return "path"
    return {"IntParamType": "int", "FloatParamType": "float", "StringParamType": "string"}.get(name)


def cases() -> list[tuple[str, str, str, int]]:
    found = []
    for words, command in _commands():
        for param in command.params:
            kind = _kind(param)
            if kind is None:
                continue
            label = param.opts[0] if isinstance(param, TyperOption) else param.name
            found += [(" ".join(words), label, kind, i) for i in range(len(HOSTILE[kind]))]
    return found


def argv_for(verb: str, label: str, value: str, d: Path) -> list[str]:
    positionals, options = bases(d)[verb]
    options = {k: v for k, v in options.items() if k != label}
    if label.startswith("-"):
        tail = [*positionals, *(x for kv in options.items() for x in kv), label, value]
    else:  # the positional under test stands for the base's
        tail = [value, *(x for kv in options.items() for x in kv)]
    return [*verb.split(), *tail]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    from sparkdoctor.ledger import Ledger

    d = tmp_path_factory.mktemp("sweep")
    gb10_facts().save(d / "facts.json")
    Ledger(d / "ledger.sqlite").close()
    (d / "server.log").write_text("INFO starting the server\nINFO ready\n")
    (d / "folder").mkdir()
    (d / "empty.toml").write_text("")
    return d


def run_main(argv: list[str], d: Path, capsys) -> tuple[int, str]:
    """cli.main() with these arguments, its CPU time bounded; (exit code, stderr)."""

    def alarm(signum, frame):
        raise Hung(f"still running after {CPU_SECONDS} s of CPU time")

    saved_argv, saved_cwd = sys.argv, os.getcwd()
    sys.argv = ["sparkdoctor", *argv]
    os.chdir(d / "folder")
    previous = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, CPU_SECONDS, 1.0)
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("verb, label, kind, index", cases())
def test_hostile_option_values_end_in_one_line_and_a_documented_exit(work, capsys, monkeypatch, verb, label, kind, index):
    for name, sub in (("SPARKDOCTOR_STATE_DIR", "state"), ("SPARKDOCTOR_CACHE_DIR", "cache"), ("XDG_CONFIG_HOME", "xdg")):
        monkeypatch.setenv(name, str(work / sub))
    monkeypatch.setenv("SPARKDOCTOR_CONFIG", str(work / "empty.toml"))
    monkeypatch.delenv("SPARKDOCTOR_DEBUG", raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # whatif's resolutions stay on this machine
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    value = HOSTILE[kind][index].replace("{folder}", str(work / "folder"))
    code, stderr = run_main(argv_for(verb, label, value, work), work, capsys)
    shown = f"{verb} {label} {value[:60]!r}: exit {code}, stderr {stderr[:300]!r}"
    assert "internal error" not in stderr and "Traceback" not in stderr, shown
    assert len(stderr.splitlines()) <= 1, shown
    assert code in EXITS.get(verb, EXITS.get(verb.split()[0], set())), shown


def test_the_sweep_covers_every_verb():
    assert {verb.split()[0] for verb, *_ in cases()} == set(VERBS)
    assert len(cases()) > 500


# ---- the sweep's findings, each through the real command -------------------------------------------------


@pytest.mark.parametrize("hosts, words", [
    ("a" * 100_000, "a host name of 100,000 characters"),  # was over 60 s in rich's highlighter
    ("a," * 50_000, "more than 4,096 hosts"),
])
def test_fleet_hosts_too_long_is_refused_before_anything_runs(work, capsys, hosts, words):
    code, stderr = run_main(["fleet", "check", "--hosts", hosts], work, capsys)
    assert code == 2 and words in stderr and len(stderr.splitlines()) == 1, stderr[:300]


@pytest.mark.parametrize("args, words", [
    (["--limit", "1" * 30], "--limit 111111111111111111111111111111: a number from 1 to"),
    (["--recipe", "qwen\udcff"], "--recipe qwen\\udcff: not a recipe name"),
    (["1" * 30], "RUN_ID 111111111111111111111111111111: a number from 1 to"),
])
def test_history_numbers_and_names_the_ledger_cannot_hold_are_usage_errors(work, capsys, args, words):
    code, stderr = run_main(["history", "--ledger", str(work / "ledger.sqlite"), *args], work, capsys)
    assert code == 2 and words in stderr and len(stderr.splitlines()) == 1, stderr


def test_bench_python_that_is_no_interpreter_is_a_usage_error(work, capsys):
    """README documents 0, 2, 4, 5 for bench; a bad --python exited 3."""
    recipe = Path(__file__).resolve().parent.parent / "recipes" / "qwen36-fp8.toml"
    code, stderr = run_main(["bench", str(recipe), "--python", "BAD"], work, capsys)
    assert code == 2 and "--python BAD: no such interpreter" in stderr, stderr


def test_a_file_name_over_name_max_is_one_line_naming_it(work, capsys):
    code, stderr = run_main(["matrix", "validate", NAME_MAX], work, capsys)
    assert code == 2 and stderr.startswith("sparkdoctor: error: nnnn") and "File name too long" in stderr, stderr
    assert "internal error" not in stderr and len(stderr.splitlines()) == 1
