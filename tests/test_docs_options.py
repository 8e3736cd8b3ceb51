"""The options the documentation names are the options the command line has, both ways.

A reader copies `sparkdoctor <verb> ...` lines from README.md and docs/*.md: every `--option` on such a line must
exist for that verb (an option renamed or removed in the code fails here, not on a user's machine). And every
option a verb has is named in its guide (docs/<verb>.md and the others below), so `--help` is never the only
place an option is explained. `--format`, `-o/--output` and `--help` are every verb's and are described once, in
README.md's tour. Reads the click commands (no subprocess) and the Markdown files: well under a second of CPU.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sparkdoctor.commands import VERBS, load_verb

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Where each command is explained to a user (docs/ relative); every one of its options is named there.
GUIDES = {
    "check": ["check.md", "containers.md"],
    "fix": ["fix.md"],
    "whatif": ["whatif.md"],
    "recipe show": ["recipes.md"],
    "recipe check": ["recipes.md", "memory.md", "mods.md"],
    "mods check": ["mods.md"],
    "bench": ["bench.md", "correctness.md", "memory.md"],
    "history": ["bench.md", "history-html.md"],
    "conclusions": ["rerun.md"],
    "rerun": ["rerun.md"],
    "audit": ["audit.md"],
    "explain": ["explain.md"],
    "report": ["report.md"],
    "diff": ["report.md"],
    "fleet check": ["fleet.md", "memory.md"],
    "matrix list": ["matrix.md"],
    "matrix show": ["matrix.md"],
    "matrix validate": ["matrix.md", "matrix-tracking.md"],
    "matrix verify": ["matrix.md", "matrix-tracking.md"],
    "matrix track": ["matrix-tracking.md"],
    "matrix update": ["matrix-tracking.md"],
}
EVERY_VERBS = {"--format", "--output", "-o", "-f", "--help"}  # README's tour describes these for all

# `sparkdoctor VERB [SUB]` followed by the rest of the example, up to a comment, a closing backtick, a pipe, the
# end of a shell command or the next sparkdoctor command on the line.
EXAMPLE = re.compile(r"(?<![\w.-])sparkdoctor ([a-z]+)((?: [a-z]+(?=\s|$))?)(.*?)(?=\s#|`|\s\||;|&&|\bsparkdoctor\b|$)")
OPTION = re.compile(r"(?<![\w./=-])(--?[a-zA-Z][\w-]*)")


def _commands() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for verb in VERBS:
        command = load_verb(verb)
        subs = getattr(command, "commands", {})
        found[verb] = command
        for name, sub in subs.items():
            found[f"{verb} {name}"] = sub
    return found


COMMANDS = _commands()


def _options(command: Any) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names.update(o for o in [*param.opts, *param.secondary_opts] if o.startswith("-"))
    return names


def examples(text: str) -> list[tuple[int, str, str]]:
    """(line, command, option) for every option on every `sparkdoctor ...` example in `text`."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in EXAMPLE.finditer(line):
            verb, sub, rest = match.group(1), match.group(2).strip(), match.group(3)
            if verb not in COMMANDS:
                continue
            command = f"{verb} {sub}" if sub and f"{verb} {sub}" in COMMANDS else verb
            rest = re.sub(r"\$\([^)]*\)", "", rest)  # a shell substitution's own options: `$(command -v python)`
            found += [(number, command, option.split("=")[0]) for option in OPTION.findall(rest)]
    return found


def test_the_example_reader_finds_options_and_stops_at_comments() -> None:
    text = ("sparkdoctor check --python X --arch sm_121a   # not --this\n"
            "`sparkdoctor recipe check R --model M` and `--elsewhere`\n"
            "/tmp/sd/bin/sparkdoctor bench tiny-cpu --vs B.toml; vllm serve --max-model-len 9\n"
            "sparkdoctor recipe check R --python \"$(command -v python)\" -o x.xml\n")
    assert examples(text) == [(1, "check", "--python"), (1, "check", "--arch"), (2, "recipe check", "--model"),
                              (3, "bench", "--vs"), (4, "recipe check", "--python"), (4, "recipe check", "-o")]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_option_in_an_example_exists(doc: Path) -> None:
    wrong = [f"{doc.name}:{line}: `sparkdoctor {command}` has no {option}"
             for line, command, option in examples(doc.read_text(encoding="utf-8"))
             if option not in _options(COMMANDS[command])]
    assert not wrong, "\n".join(wrong)


def named(option: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


@pytest.mark.parametrize("command", sorted(GUIDES))
def test_every_option_is_in_its_guide(command: str) -> None:
    text = "".join((ROOT / "docs" / name).read_text(encoding="utf-8") for name in GUIDES[command])
    missing = []
    for param in COMMANDS[command].params:
        names = [o for o in [*param.opts, *param.secondary_opts] if o.startswith("-")]
        if not names or getattr(param, "hidden", False) or EVERY_VERBS & set(names):
            continue
        if not any(named(name, text) for name in names):
            missing.append(names[0])
    assert not missing, f"{command}: {missing} not in docs/{', docs/'.join(GUIDES[command])}"


def test_every_command_has_a_guide_and_readme_describes_the_common_options() -> None:
    leaves = {name for name, command in COMMANDS.items() if not getattr(command, "commands", None)}
    assert leaves == set(GUIDES)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(named(option, readme) for option in ("--format", "-o", "--output"))
