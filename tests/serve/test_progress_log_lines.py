"""A server's log line shown as progress never reaches the terminal raw.

While a server starts, bench's status shows its last log line. On a terminal that went through rich's markup: a
chat template's `[/INST]` (in vLLM's request logs) was taken for a closing tag, and the bench ended in `internal error:
MarkupError` (exit 2); `[sparkdoctor]` vanished as an unknown tag. In plain mode (a pipe, CI) an escape sequence the
server printed (`ESC c` resets a terminal; ANSI colour is stripped before, this is not) was written as is."""

from __future__ import annotations

import io

from sparkdoctor import progress as progress_module

LINE = "starting srv (3s): prompt <s>[INST] hi [/INST] [sparkdoctor] \x1bc\x1b]0;title\x07\x08done"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_line_with_markup_and_escapes_on_a_terminal(monkeypatch):
    fake = _Terminal()
    monkeypatch.setattr(progress_module.sys, "stderr", fake)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    with progress_module.progress_line() as say:
        say(LINE)  # raised MarkupError
    shown = fake.getvalue()
    assert "[/INST]" in shown and "[sparkdoctor]" in shown
    assert "\x1bc" not in shown and "\x07" not in shown and "\x08" not in shown


def test_a_log_line_with_escapes_in_plain_progress(monkeypatch, capsys):
    monkeypatch.setenv("SPARKDOCTOR_PROGRESS_AFTER_S", "0")
    with progress_module.progress_line() as say:
        say(LINE)
    err = capsys.readouterr().err
    assert "[/INST]" in err and "\\x1bc" in err
    assert "\x1b" not in err and "\x07" not in err and "\x08" not in err


class _HungUp(_Terminal):
    """A terminal that was closed (SIGHUP): every write fails with EIO."""

    def write(self, text: str) -> int:
        raise OSError(5, "Input/output error")


def test_a_hung_up_terminal_loses_the_progress_not_the_teardown_or_the_outcome(monkeypatch):
    """bench's teardown says "stopping the server" before it stops anything: with the terminal gone that raised
    OSError, skipping sparkdoctor's own teardown; the status's stop raised it again over the SIGHUP's interrupt (exit 2,
    "cannot write", instead of 129)."""
    monkeypatch.setattr(progress_module.sys, "stderr", _HungUp())
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    stopped = []
    try:
        with progress_module.progress_line() as say:
            say("stopping the server")
            stopped.append(True)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert stopped == [True]


def test_the_status_line_names_the_command_that_runs(monkeypatch):
    # every command's status line said "bench: ..." (recipe check, conclusions, rerun)
    fake = _Terminal()
    monkeypatch.setattr(progress_module.sys, "stderr", fake)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    with progress_module.progress_line(command="recipe check") as say:
        say("sizing the launch against the memory free now")
    shown = fake.getvalue()
    assert "recipe check: sizing the launch" in shown and "bench" not in shown
