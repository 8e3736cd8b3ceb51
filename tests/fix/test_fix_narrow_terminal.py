"""`fix` at a narrow terminal (a real pseudo-terminal, 60 columns): the plan's and the history's lines fit, each
wrapped under its own text; on a pipe they are the lines of before, one a journal, whatever COLUMNS says."""

import os
import re
import sys

import pytest

from tests.fix import scenario
from tests.fix.scenario import DATA, fix_cli
from tests.pty_terminal import at_terminal

pytestmark = pytest.mark.slow


def squeezed(text: str) -> str:
    return re.sub(r"\s", "", text)


def test_history_fits_a_narrow_terminal_one_journal_an_item(applied_again, tmp_path):
    # before: one plain line a journal (id, status, size, fixes, target), 150 columns and more, broken by the terminal
    python, *_, journal = applied_again
    seen = at_terminal([sys.executable, "-m", "sparkdoctor", "fix", "--history"], 60, dict(os.environ), cwd=str(tmp_path))
    assert seen.code == 0, seen.text
    lines = [line for line in seen.lines if line.strip()]
    assert max(len(line) for line in lines) <= 60, [line for line in lines if len(line) > 60]
    assert lines[0].startswith(f"{journal.name}  applied  ")
    column = len(journal.name) + 2
    item = lines[1:lines.index(next(line for line in lines if line.startswith("1 journal(s)")))]
    assert item and all(line[:column].isspace() and not line[column].isspace() for line in item), item
    assert squeezed(str(python)) in squeezed("".join(item)), "the target, folded under the journal, whole"


def test_history_on_a_pipe_is_one_line_a_journal_whatever_columns_says(applied_again):
    python, *_, journal = applied_again
    for columns in (None, "40"):
        res = fix_cli(None, "--history", env={"COLUMNS": columns} if columns else None)
        first = res.stdout.splitlines()[0]
        assert res.returncode == 0 and first.startswith(f"{journal.name}  applied ") and first.endswith(f"  {python}"), first


def test_plan_fits_a_narrow_terminal_each_line_under_its_own_text(tmp_path, wheels):
    """At 60 columns every line of the plan fits; a step goes on under the text after its number, and `Target: PATH
    (installer: pip)` and `Fix ID: TITLE (asked for by: ...)`, which have no indent of their own, under the text after
    their label (`Target: `), or after their first word where the label is too wide (`Fix `): they went on at column
    0, word by word, as if each continued line were a line of the plan."""
    python = scenario.make_target(tmp_path, "pip", wheels)
    argv = [sys.executable, "-m", "sparkdoctor", "fix", "--python", str(python), "--no-kernels",
            "--matrix", str(DATA / "matrix"), "--fixes", str(DATA / "fixes")]
    seen = at_terminal(argv, 60, dict(os.environ, SPARKDOCTOR_STATE_DIR=str(tmp_path / "state")), cwd=str(tmp_path))
    assert seen.code in (0, 1), seen.text
    # stderr's lines (fix's notices, check's warnings about the target: this one is a copy, its scripts name the first
    # venv) are one line each by design, whatever the width: a line to grep, not part of the plan
    lines = [line for line in seen.lines if line.strip() and not line.startswith(("sparkdoctor fix: ", "sparkdoctor: warning: "))]
    assert max(len(line) for line in lines) <= 60, [line for line in lines if len(line) > 60]
    start = lines.index("Steps, in order:") + 1
    steps = lines[start:lines.index(next(line for line in lines[start:] if not line.startswith(" ")))]
    assert any(re.match(r"  \d+\. install ", line) for line in steps), seen.text
    for line in steps:  # a step's number, or its text continued under the text after the number (`  2. `)
        assert re.match(r"  \d+\. \S", line) or re.match(r" {5}\S", line), line
    assert any(re.match(r" {5}\S", line) for line in steps), f"a step wider than 60 columns continues under its text: {steps}"
    first = next(i for i, line in enumerate(lines) if line.startswith("Target: "))
    # the rest, under the label's text (where the path itself is wider than its column, it is folded there too)
    assert lines[first + 1][:8].isspace() and not lines[first + 1][8].isspace(), lines[first:first + 3]
    assert squeezed(f"Target: {python}  (installer:") in squeezed("".join(lines[first:first + 4]))
    fixes = [i for i, line in enumerate(lines) if line.startswith("Fix ") and lines[i + 1].startswith(" ")]
    assert fixes, "a Fix line wider than 60 columns"
    for i in fixes:  # under the text after `Fix ID: `, or after `Fix ` where that label is wider than 20 columns
        hang = len(lines[i].split(": ", 1)[0]) + 2
        hang = hang if hang <= 20 else 4
        assert lines[i + 1][:hang].isspace() and not lines[i + 1][hang].isspace(), lines[i:i + 2]
