"""Recipes as a new user and an attacker leave them: each case was read, shown or followed before
(docs/evidence/revrecipe3-2026-12-01.md) and is now refused in one line, or read as the server itself reads it.

- a container recipe's absolute `--config /path.yaml` was read from this machine (any file of that name here: another
  file than the one the server opens inside its image);
- `--set env.NAME=value` took any NAME (`1X`, `A B`, `$(id)`), which the recipe's own env block refuses;
- a NUL (YAML "\\0", TOML "\\u0000") in an argument was read and shown; only the launch refused it;
- a recipe linked to /dev/zero, a FIFO or a folder was "not a recipe file" without saying what it is.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sparkdoctor import recipes
from sparkdoctor.audit.fromrecipe import recipe_settings
from sparkdoctor.recipes import RecipeError
from sparkdoctor.recipes.vllm_config import serve_config
from tests.hostile import hang_guard

ROOT = Path(__file__).resolve().parents[1]
EUGR = 'recipe_version: "1"\nname: r\ncontainer: vllm/vllm-openai:latest\ncommand: |\n  {command}\n'


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def one_line_error(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2 and p.stderr.count("\n") == 1, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    for word in words:
        assert word in p.stderr, p.stderr


# ---- 1. a container recipe's --config is the image's file -------------------------------------------------------
def test_a_container_recipes_absolute_config_is_not_read_from_this_machine(tmp_path):
    here = tmp_path / "serve.yaml"
    here.write_text("max-model-len: 999\nkv-cache-dtype: fp8\n")
    path = tmp_path / "r.yaml"
    path.write_text(EUGR.format(command=f"vllm serve org/m --config {here}"))
    recipe = recipes.load(path)
    config = serve_config(recipe)
    assert config is not None and config.args == () and not config.fatal
    assert "inside the container vllm/vllm-openai:latest" in str(config.problem), config.problem
    values, sources = recipe_settings(recipe, {})
    assert values["max_model_len"] is None and values["kv_cache_dtype"] == "auto", (values, sources)
    # the same command run on this machine reads it, as vLLM here would
    local = replace(recipe, container=None)
    assert recipe_settings(local, {})[0]["max_model_len"] == 999


def test_a_container_recipes_relative_config_is_not_read_from_the_recipes_folder(tmp_path):
    """The container launch mounts the model's folder, not the recipe's (serve/container_launch.py run_argv): the
    server opens a relative --config in the container's working folder, so the recipe folder's file is not judged."""
    (tmp_path / "serve.yaml").write_text("max-model-len: 999\n")
    path = tmp_path / "r.yaml"
    path.write_text(EUGR.format(command="vllm serve org/m --config serve.yaml"))
    recipe = recipes.load(path)
    config = serve_config(recipe)
    assert config is not None and config.args == () and not config.fatal
    assert "inside the container vllm/vllm-openai:latest" in str(config.problem), config.problem
    assert recipe_settings(recipe, {})[0]["max_model_len"] is None
    assert recipe_settings(replace(recipe, container=None), {})[0]["max_model_len"] == 999


def test_a_config_file_linked_into_proc_is_refused_without_reading(tmp_path):
    (tmp_path / "serve.yaml").symlink_to("/proc/self/environ")
    path = tmp_path / "r.toml"
    path.write_text('name = "r"\ncommand = ["vllm", "serve", "org/m", "--config", "serve.yaml"]\n')
    config = serve_config(recipes.load(path))
    assert config is not None and config.fatal and "is a kernel file" in str(config.problem), config


# ---- 2. --set env.NAME is checked as the env block is ------------------------------------------------------------
@pytest.mark.parametrize("name", ["1X", "A B", "$(id)", "A-B", "X\nY"])
def test_set_env_takes_only_a_variable_name(tmp_path, name):
    path = tmp_path / "r.yaml"
    path.write_text(EUGR.format(command="vllm serve org/m"))
    with pytest.raises(RecipeError, match="is not an environment variable name") as info:
        recipes.load(path, {f"env.{name}": "v"})
    assert "\n" not in str(info.value)
    block = tmp_path / "b.yaml"  # the recipe's own env block refuses the same name
    block.write_text(EUGR.format(command="vllm serve org/m") + f"env:\n  {name!r}: v\n".replace("'", '"'))
    with pytest.raises(RecipeError, match="is not an environment variable name"):
        recipes.load(block)


def test_set_env_of_a_variable_name_is_kept_and_a_nul_value_refused(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(EUGR.format(command="vllm serve org/m"))
    assert recipes.load(path, {"env.PATH": "/x", "env._A1": "y"}).env == {"PATH": "/x", "_A1": "y"}
    with pytest.raises(RecipeError, match="NUL byte"):
        recipes.load(path, {"env.A": "a\0b"})


# ---- 3. a NUL in an argument is refused at read time --------------------------------------------------------------
@pytest.mark.parametrize(("name", "text"), [
    ("r.yaml", EUGR.format(command="vllm serve org/m --served-model-name {x}") + 'defaults:\n  x: "a\\0b"\n'),
    ("r.yaml", 'recipe_version: "2"\nmodel: "org/m\\0x"\nruntime: vllm\n'),
    ("r.toml", 'name = "r"\ncommand = ["vllm", "serve", "org/m", "--served-model-name", "a\\u0000b"]\n'),
    ("r.toml", 'name = "r"\ncommand = ["vllm", "serve", "org/m"]\ncontainer = "img\\u0000x"\n'),
])
def test_a_nul_in_the_command_is_refused_when_the_recipe_is_read(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(RecipeError, match=r"holds a NUL byte") as info:
        recipes.load(path)
    assert "\n" not in str(info.value) and "\0" not in str(info.value)


def test_recipe_show_refuses_a_nul_in_one_line(tmp_path):
    path = tmp_path / "r.toml"
    path.write_text('name = "r"\ncommand = ["vllm", "serve", "org/m", "--served-model-name", "a\\u0000b"]\n')
    one_line_error(cli("recipe", "show", path), "argument 5 of the command", "NUL byte")


# ---- 4. a recipe that is no file says what it is -----------------------------------------------------------------
@pytest.mark.parametrize(("make", "said"), [
    (lambda p: p.symlink_to("/dev/zero"), "a link to /dev/zero, a device"),
    (lambda p: os.mkfifo(p), "a FIFO (named pipe)"),
    (lambda p: p.mkdir(), "a directory"),
    (lambda p: p.symlink_to("/proc/self/environ"), "is a kernel file"),
])
def test_a_recipe_that_is_no_regular_file_is_named_for_what_it_is(tmp_path, make, said):
    path = tmp_path / "recipe.yaml"
    make(path)
    with hang_guard(30):
        with pytest.raises(RecipeError) as info:
            recipes.load(path)
    assert said in str(info.value) and "not a recipe file" in str(info.value), str(info.value)


def test_a_nul_or_control_character_in_a_sparkrun_template_with_doubled_braces_stays_itself(tmp_path):
    """`{{`/`}}` waited as "\\x00"/"\\x01" while placeholders were filled: a "\\0" the recipe wrote became "{" (and so
    passed the NUL check), a "\\x01" became "}"; the command shown was not the recipe's."""
    path = tmp_path / "r.yaml"
    path.write_text('recipe_version: "2"\nmodel: m\nruntime: vllm\ncommand: "vllm serve {model} --a {{x}} --b \\x01z"\n')
    assert recipes.load(path).argv == ["vllm", "serve", "m", "--a", "{x}", "--b", "\x01z"]
    path.write_text('recipe_version: "2"\nmodel: m\nruntime: vllm\ncommand: "vllm serve {model} --a {{x}} --b \\0y"\n')
    with pytest.raises(RecipeError, match="NUL byte"):
        recipes.load(path)
