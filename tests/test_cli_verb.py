"""commands/options.verb(): the command of a verb that writes one document writes it, ends with the Result's exit
code, and (fix, report: `say_errors`) then says each of the Result's errors on stderr, one line each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer

from sparkdoctor.commands.options import Fmt, Output, format_option, verb
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.track.update import Updated
from sparkdoctor.views.track import UPDATE  # noqa: F401 (registers Updated's view)


@dataclass
class Options:
    fmt: Annotated[Fmt, format_option(Format.console, Format.json)] = Format.console
    output: Output = None


def run(options: Options) -> Result[Updated]:
    return Result("x", "matrix-update", Updated({"message": "the document"})).fail(UsageError("why it failed"))


@pytest.mark.parametrize("say_errors", [True, False])
def test_the_document_then_the_errors_on_stderr_only_when_asked(capsys, say_errors):
    command = verb(Options, run, "Help.", say_errors=say_errors)
    assert command.__doc__ == "Help."
    with pytest.raises(typer.Exit) as exited:
        command(fmt=Format.console, output=None)
    out, err = capsys.readouterr()
    assert exited.value.exit_code == 2  # the UsageError's
    assert out == "the document\n"
    assert err.splitlines() == (["sparkdoctor: error: why it failed"] if say_errors else [])
