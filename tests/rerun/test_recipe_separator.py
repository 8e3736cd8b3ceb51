"""A recipe command with a `--` and no --host/--port is refused by sparkdoctor's launcher (bench, rerun: it cannot
tell whether the server reads its options before or after the `--`). recipe check said nothing about it: the refusal
came only at launch. It is a warning now, in the three recipe formats; a wrapper's `--` before vLLM's own command
line, and a command that writes --host/--port itself, are not."""

from __future__ import annotations

import pytest

from sparkdoctor.conclusions import recipe_check
from sparkdoctor.matrix import load as load_matrix
from sparkdoctor.recipes import load as load_recipe
from tests.gb10 import gb10_facts
from tests.rerun.recipe_values import (  # noqa: F401
    FORMATS,
    dense_config,
    model_folder,
    no_hub_cache,
    recipe_file,
)


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(None)


def _launch(tmp_path, matrix, fmt, flags):
    folder = str(model_folder(tmp_path, "model", dense_config()))
    recipe = load_recipe(str(recipe_file(tmp_path, fmt, folder, flags)), {})
    return [f for f in recipe_check.check(recipe, matrix, gb10_facts(), None) if str(f["kind"]) == "launch"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_separator_without_host_and_port_is_said_before_the_launch(tmp_path, matrix, fmt):
    [found] = _launch(tmp_path, matrix, fmt, ["--", "--max-num-seqs", "4"])
    assert (found["id"], found["severity"]) == ("launch-separator:--", "warn"), found
    assert "--host 127.0.0.1 --port 8000" in str(found["remedy"]) and "`--`" in str(found["evidence"]), found


@pytest.mark.parametrize("flags", [["--max-num-seqs", "4"], ["--host", "0.0.0.0", "--port", "8000", "--", "x"]])
def test_a_command_the_launcher_takes_has_no_such_finding(tmp_path, matrix, flags):
    assert _launch(tmp_path, matrix, FORMATS[0], flags) == []
