"""Console output on a pipe or in a file (`-o FILE`) carried rich's padding: every line of `check`'s report, the
matrix list, `recipe show`, `explain` ended in spaces up to the console's width (109 of them in a broken GB10's
check). Now only a terminal gets the lines as rich draws them; a pipe or file gets none at a line's end, also with
FORCE_COLOR (the spaces before a line's closing colour codes)."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

import sparkdoctor.views.check
import sparkdoctor.views.matrix  # noqa: F401 (each view is registered by the module that defines it)
from sparkdoctor import emit, views
from sparkdoctor.check import CheckRequest, check
from sparkdoctor.matrix import load
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink

FACTS = Path(__file__).parent / "data" / "facts"


def test_unpadded_drops_line_end_spaces_also_before_closing_colour_codes():
    from sparkdoctor.sink import unpadded

    assert unpadded("a  b   \n  \nc") == "a  b\n\nc"
    assert unpadded("\x1b[1mhead\x1b[0m   \x1b[2m   \x1b[0m\n") == "\x1b[1mhead\x1b[0m\x1b[2m\x1b[0m\n"
    assert unpadded("x\x1b[0m") == "x\x1b[0m" and unpadded("") == ""


def results() -> list[Result[object]]:
    outcome = check(CheckRequest(snapshot=FACTS / "gb10-broken.json"))
    return [Result("check", "report", outcome.report), Result("matrix list", "matrix-list", load())]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("where", ["pipe", "file"])
def test_console_documents_on_a_pipe_or_in_a_file_end_no_line_in_a_space(where, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    for result in results():
        output = tmp_path / "out.txt" if where == "file" else None
        text = emit.render(result, Format.console, output)
        padded = [line for line in text.splitlines() if line.endswith(" ")]
        assert len(text.splitlines()) > 10 and not padded, (result.command, padded[:3])


def test_a_terminal_gets_the_lines_as_rich_draws_them(monkeypatch):
    monkeypatch.setattr(sys, "stdout", Terminal())
    for result in results():  # rich numbers each hyperlink anew
        drawn, ours = (re.sub(r"id=\d+;", "", text) for text in (views.render(result, Format.console, Sink()),
                                                               emit.render(result, Format.console)))
        assert ours == drawn and "\x1b[" in ours, result.command
