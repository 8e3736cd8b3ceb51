"""`-o -` wrote a file named `-` on every verb that takes --output. Now `-` is stdout wherever --output replaces
stdout (as when it is left out), and is refused in one line where a file is written besides stdout's document
(`matrix track -o`, `check --save-facts`, `history --html`, `bench --export`): never a file named `-`."""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.models import ParameterInfo

from sparkdoctor import commands
from sparkdoctor.commands.options import Parsed, output_path
from sparkdoctor.errors import UsageError
from tests.test_cli import snap

BESIDES_STDOUT = {"sparkdoctor.commands.matrix_tracking.TrackCommand"}  # its -o also writes JSON, whatever -f prints


def output_makers() -> Iterator[tuple[str, Callable[[str | None], Path | None]]]:
    """Every options dataclass of sparkdoctor.commands with an --output option, and how its value is made."""
    for info in pkgutil.iter_modules(commands.__path__):
        module = importlib.import_module(f"sparkdoctor.commands.{info.name}")
        for obj in vars(module).values():
            if not (isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__):
                continue
            hints = typing.get_type_hints(obj, include_extras=True)
            for f in dataclasses.fields(obj):
                meta = getattr(hints[f.name], "__metadata__", ())
                options = [m for m in meta if isinstance(m, ParameterInfo)]
                if options and "--output" in (options[-1].default, *(getattr(options[-1], "param_decls", None) or ())):
                    parsed = next(m for m in meta if isinstance(m, Parsed))
                    assert parsed.make is not None, f"{obj.__qualname__}.{f.name}: --output made without output_path"
                    yield f"{module.__name__}.{obj.__qualname__}", parsed.make


def test_every_verbs_output_dash_is_stdout_or_one_line_never_a_file():
    seen = dict(output_makers())
    assert len(seen) >= 15 and "sparkdoctor.commands.check.CheckCommand" in seen, sorted(seen)
    for name, make in seen.items():
        if name in BESIDES_STDOUT:
            with pytest.raises(UsageError, match=r"^--output -: this file is written besides the document on stdout"):
                make("-")
        else:
            assert make("-") is None, name  # stdout, as without -o
        assert make("./-") == Path("-"), name  # a file named - is still written when asked for as one


def test_the_options_that_write_besides_stdout_refuse_dash():
    from sparkdoctor.commands.bench import BenchCommand

    for option in ("--save-facts", "--html"):
        with pytest.raises(UsageError, match=f"^{option} -: this file is written besides"):
            output_path(option, "-")
    with pytest.raises(UsageError, match="^--export -: this file is written besides"):
        BenchCommand(url="http://127.0.0.1:9", export=Path("-")).refuse_bad_options()


def test_check_output_dash_writes_the_document_to_stdout(run, matrix):
    p = run("check", "--facts", snap("nogpu-clean"), "--matrix", matrix, "-f", "json", "-o", "-")
    assert p.returncode == 0 and json.loads(p.stdout)["command"] == "check", p.stderr
    assert not (run.cwd / "-").exists()
    p = run("check", "--facts", snap("missing"), "--matrix", matrix, "-f", "json", "-o", "-")  # a failure's document too
    assert p.returncode == 2 and json.loads(p.stdout)["kind"] == "error" and not (run.cwd / "-").exists()
