"""A recipe command with a `--` before its own arguments gets no --host/--port appended after the `--`.

Appended there, a server reads them as positional arguments (`python srv.py -- x`): it bound its own default address and
port, and the launch ended at the ready timeout, the server listening on its default address meanwhile. vLLM refuses
them outright (`vllm serve M -- --host H`: "unrecognized arguments"), and a wrapper's `--` (`uv run -- vllm serve M`)
wants them after it: which `--` it is cannot be told from the argv, so such a command is refused in one line, before
anything starts, unless the recipe writes --host and --port itself or what follows the last `--` is
vLLM's own command line (`vllm serve`, `python -m vllm...`) (their values are then replaced where they stand)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sparkdoctor.recipes.model import Recipe
from sparkdoctor.serve import LaunchError, launch
from sparkdoctor.serve.binding import RebindRefused, rebind

FAKE = Path(__file__).resolve().parent / "fake_server.py"
# A server that reads its options with argparse, as vLLM and most do: after `--` everything is positional.
ARGPARSE_SERVER = f"""
import argparse, os, sys
p = argparse.ArgumentParser()
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", default="0")
p.add_argument("rest", nargs="*")
a = p.parse_args()
os.execv(sys.executable, [sys.executable, {str(FAKE)!r}, "ready", "--host", a.host, "--port", a.port])
"""


@pytest.mark.parametrize("argv, missing", [
    (["python", "srv.py", "--", "x"], "--host or --port"),
    (["uv", "run", "--", "vllm", "serve", "m", "--", "x"], "--host or --port"),  # vLLM's own `--` last
    (["uv", "run", "--", "vllm", "bench", "m"], "--host or --port"),
    (["python", "srv.py", "--port", "1", "--", "x"], "--host"),
    (["python", "srv.py", "--", "--host=0.0.0.0"], "--port"),
])
def test_a_flag_to_add_to_a_command_with_a_separator_is_refused_in_one_line(argv, missing):
    with pytest.raises(RebindRefused) as raised:
        rebind(argv, "127.0.0.1", 5)
    message = str(raised.value)
    assert f"has a `--` and no {missing}:" in message and "where the server reads them" in message and "\n" not in message


@pytest.mark.parametrize("argv, expected", [
    (["python", "srv.py", "--host", "0.0.0.0", "--port", "1", "--", "x"],
     ["python", "srv.py", "--host", "127.0.0.1", "--port", "5", "--", "x"]),
    (["uv", "run", "--", "vllm", "serve", "m", "--host=::", "--port=9"],
     ["uv", "run", "--", "vllm", "serve", "m", "--host=127.0.0.1", "--port=5"]),
    (["--", "srv"], ["--", "srv", "--host", "127.0.0.1", "--port", "5"]),  # a program named `--`: no separator
    # a wrapper's `--` before vLLM's own command line: vLLM reads them after it
    (["uv", "run", "--", "vllm", "serve", "m"], ["uv", "run", "--", "vllm", "serve", "m", "--host", "127.0.0.1", "--port", "5"]),
    (["env", "--", "/opt/v/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
     ["env", "--", "/opt/v/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--host", "127.0.0.1",
      "--port", "5"]),
])
def test_flags_the_recipe_wrote_are_replaced_where_they_stand_separator_or_not(argv, expected):
    assert rebind(argv, "127.0.0.1", 5) == expected


def test_a_launch_of_such_a_command_fails_at_once_and_starts_nothing(tmp_path):
    recipe = Recipe(name="sep", source_path="test", format="sparkdoctor",
                    argv=[sys.executable, "-c", ARGPARSE_SERVER, "--", "x"])
    with pytest.raises(LaunchError) as raised:
        with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=5, grace=1):
            pytest.fail("the server must not start")
    message = str(raised.value)
    assert message.startswith("sep: its command has a `--` and no --host or --port:"), message
    assert not (tmp_path / "server.log").exists()  # nothing was started, not even the log


def test_the_same_server_with_its_flags_before_the_separator_serves_on_the_chosen_port(tmp_path):
    recipe = Recipe(name="sep-ok", source_path="test", format="sparkdoctor",
                    argv=[sys.executable, "-c", ARGPARSE_SERVER, "--host", "0.0.0.0", "--port", "8000", "--", "x"])
    with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=60, grace=1) as server:
        assert server.argv[-6:] == ["--host", "127.0.0.1", "--port", str(server.port), "--", "x"]
    assert server.teardown is not None and server.teardown.clean


@pytest.mark.parametrize("argv, expected", [
    # vLLM's parser keeps argparse's abbreviations: `--hos 0.0.0.0` after the replaced `--host` was the address vLLM
    # bound (the last one wins), open to other machines while the model loaded, until the readiness check saw it
    (["vllm", "serve", "m", "--host", "0.0.0.0", "--hos", "0.0.0.0", "--port", "1", "--por=2"],
     ["vllm", "serve", "m", "--host", "127.0.0.1", "--host", "127.0.0.1", "--port", "5", "--port=5"]),
    (["vllm", "serve", "m", "--ho=::"], ["vllm", "serve", "m", "--host=127.0.0.1", "--port", "5"]),
    (["vllm", "serve", "m", "--po", "7"], ["vllm", "serve", "m", "--port", "5", "--host", "127.0.0.1"]),
])
def test_an_abbreviated_host_or_port_is_replaced_too(argv, expected):
    assert rebind(argv, "127.0.0.1", 5) == expected
