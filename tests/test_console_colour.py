"""What README's "Console output" paragraph promises about colour on a terminal: NO_COLOR removes colour and keeps
bold and dim (no-color.org covers colour only), TERM=dumb removes every style, no TERM at all is coloured (as
pip-audit's rich and pipx do), a pipe gets no style."""

from __future__ import annotations

import io
import re
import sys

import pytest

from sparkdoctor.sink import Sink

SGR = re.compile(r"\x1b\[([0-9;]*)m")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def codes(monkeypatch, stdout: io.StringIO, **env: str | None) -> set[str]:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLORTERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value) if value is not None else monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdout", stdout)
    text = Sink().capture(lambda console: console.print("[bold red]error[/] [dim]why[/]"))
    return {param for param in SGR.findall(text) if param not in ("", "0")}  # not the resets


@pytest.mark.parametrize(("env", "expected"), [
    ({"TERM": "xterm"}, {"1;31", "2"}),
    ({}, {"1;31", "2"}),  # no TERM: a terminal of unknown kind, coloured
    ({"TERM": "xterm", "NO_COLOR": "1"}, {"1", "2"}),  # colour gone, bold and dim kept
    ({"TERM": "xterm", "NO_COLOR": ""}, {"1;31", "2"}),  # an empty NO_COLOR is not set (no-color.org)
    ({"TERM": "dumb"}, set()),
], ids=["xterm", "no-term", "no-color", "empty-no-color", "dumb"])
def test_styles_on_a_terminal(monkeypatch, env, expected):
    assert codes(monkeypatch, Terminal(), **env) == expected


def test_a_pipe_gets_no_style(monkeypatch):
    assert codes(monkeypatch, io.StringIO(), TERM="xterm") == set()
