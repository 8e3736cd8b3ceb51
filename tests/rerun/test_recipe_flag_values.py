"""recipe check refuses the values `vllm serve`'s own parser refuses (the server would not start), in the three
recipe formats: an unresolved sparkrun placeholder, a k suffix on an int flag, a share above 1, a bad first of two
occurrences (argparse converts each), a flag with no value; and leaves every form vLLM accepts alone."""

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


def _refused(tmp_path, matrix, fmt, flags):
    folder = str(model_folder(tmp_path, "model", dense_config()))
    recipe = load_recipe(str(recipe_file(tmp_path, fmt, folder, flags)), {})
    return {f["id"]: f for f in recipe_check.check(recipe, matrix, gb10_facts(), None) if str(f["id"]).startswith("flag-value:")}


REFUSED = [
    (["--max-num-seqs", "8k"], "--max-num-seqs"),
    (["--gpu-memory-utilization=1.2"], "--gpu-memory-utilization"),
    (["--gpu_memory_utilization", "nan"], "--gpu-memory-utilization"),
    (["--max-model-len", "32.5K", "--max-model-len", "32768"], "--max-model-len"),
    (["--max_num_batched_tokens=2k8"], "--max-num-batched-tokens"),
    (["-tp", "two"], "-tp"),
    (["--enforce-eager", "--max-model-len"], "--max-model-len"),
]
ACCEPTED = [["--max-model-len", "auto"], ["--max-model-len=-1"], ["--max_model_len", "32k", "--max-model-len", "32K"],
            ["--max-num-seqs", "8", "--gpu-memory-utilization", "1"], ["--kv-cache-memory-bytes", "8G", "-tp", "1"],
            ["--max-num-batched-tokens=25.6k"]]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flags,flag", REFUSED)
def test_a_value_vllms_parser_refuses_is_an_error(tmp_path, matrix, fmt, flags, flag):
    found = _refused(tmp_path, matrix, fmt, flags)
    assert list(found) == [f"flag-value:{flag}"] and found[f"flag-value:{flag}"]["severity"] == "error", found


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("flags", ACCEPTED)
def test_every_form_vllm_accepts_passes(tmp_path, matrix, fmt, flags):
    assert _refused(tmp_path, matrix, fmt, flags) == {}


def test_an_unresolved_sparkrun_placeholder_is_named_with_its_remedy(tmp_path, matrix):
    """docs/sparkrun.md's opt-in example passed `--max-model-len {max_model_len}` with no default: sparkrun keeps the
    placeholder, vLLM refuses it; recipe check called it `unjudged` (info) and passed."""
    path = tmp_path / "r.yaml"
    path.write_text('recipe_version: "2"\nmodel: Qwen/Qwen3-0.6B\nruntime: vllm\n'
                    "command: vllm serve {model} --port {port} --max-model-len {max_model_len}\n")
    found = recipe_check.check(load_recipe(str(path), {}), matrix, gb10_facts(), None)
    f = next(f for f in found if f["id"] == "flag-value:--max-model-len")
    assert f["severity"] == "error" and "'{max_model_len}'" in str(f["title"]), f
    assert "placeholder" in " ".join(map(str, f["evidence"])) and "`max_model_len` default" in str(f["remedy"])
    fixed = path.read_text().replace("runtime: vllm\n", "runtime: vllm\ndefaults:\n  max_model_len: 32768\n")
    path.write_text(fixed)
    assert not [f for f in recipe_check.check(load_recipe(str(path), {}), matrix, gb10_facts(), None) if f["kind"] == "flag"]


# a few of vLLM 0.32's serve flags, as probes/vllm_flags lists them
FLAGS = {"vllm": {"version": "0.32.0", "root": "/venv/vllm"},
         "flags": ["--gpu-memory-utilization", "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens", "--enforce-eager"]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_unique_prefix_is_what_argparse_reads_not_an_unknown_flag(tmp_path, matrix, fmt):
    """vLLM's parser keeps argparse's allow_abbrev: `--gpu-memory-util 0.8` starts; it was called unknown (an error,
    "would refuse to start"), so the sparkrun gate refused a launch that works."""
    folder = str(model_folder(tmp_path, "model", dense_config()))
    flags = ["--gpu-memory-util", "0.8", "--max-num", "8", "--no-such-flag"]
    recipe = load_recipe(str(recipe_file(tmp_path, fmt, folder, flags)), {})
    found = {f["id"]: f for f in recipe_check.check(recipe, matrix, gb10_facts(), FLAGS) if f["kind"] == "flag"}
    assert found["flag-abbreviated:--gpu-memory-util"]["severity"] == "warn"
    assert "as --gpu-memory-utilization" in str(found["flag-abbreviated:--gpu-memory-util"]["title"])
    # ambiguous (argparse refuses it) and unknown stay errors
    assert found["flag-unknown:--max-num"]["severity"] == "error" and found["flag-unknown:--no-such-flag"]["severity"] == "error"
    assert "flag-unknown:--gpu-memory-util" not in found


def test_recipe_check_shows_what_reading_the_recipe_found(tmp_path):
    """docs/recipes.md: `recipe show` and `recipe check` judge a shell line "with a warning naming what makes it a shell
    line"; recipe check showed none of the recipe's warnings (a shell line, placeholders kept, a key given twice)."""
    import json
    import subprocess
    import sys

    path = tmp_path / "r.yaml"
    path.write_text('recipe_version: "2"\nmodel: m\nruntime: vllm\ndefaults:\n  max_model_len: 4096\n'
                    "command: pip install x && vllm serve {model} --max-model-len {max_model_len} --served-model-name {nick}\n")
    run = [sys.executable, "-m", "sparkdoctor", "recipe", "check", str(path), "--python", sys.executable]
    console = subprocess.run(run, capture_output=True, text=True, timeout=120)
    text = " ".join(console.stdout.split())
    assert "warning: r.yaml: placeholders left as written (no value for them): {nick}" in text, console.stdout
    assert "'&&' makes it a shell line" in text
    doc = json.loads(subprocess.run([*run, "--format", "json"], capture_output=True, text=True, timeout=120).stdout)
    assert any("'&&' makes it a shell line" in w for w in doc["recipe"]["warnings"]) and len(doc["recipe"]["warnings"]) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_model_path_with_a_space_split_by_the_shell_is_named(tmp_path, fmt):
    """eugr and sparkrun hand the command to a shell: `vllm serve {model}` with `/m/my model` runs vllm serve on
    `/m/my` with a stray `model`, which vLLM refuses; recipe check said only that `/m/my` has no local files."""
    folder = str(model_folder(tmp_path, "my model", dense_config()))
    recipe = load_recipe(str(recipe_file(tmp_path, fmt, folder, ["--max-model-len", "4096"])), {})
    split = [w for w in recipe.warnings if "holds whitespace" in w]
    if fmt == "sparkdoctor":  # our TOML command is a list of arguments: the path stays one
        assert split == [] and folder in recipe.argv
    else:
        assert len(split) == 1 and f"vllm serve gets {str(tmp_path / 'my')!r}" in split[0], recipe.warnings
    quoted = tmp_path / "q.yaml"
    quoted.write_text(f'recipe_version: "2"\nmodel: "{folder}"\nruntime: vllm\ncommand: vllm serve "{{model}}" --max-model-len 4096\n')
    assert not [w for w in load_recipe(str(quoted), {}).warnings if "whitespace" in w]


# A recipe command with a `--` and no --host/--port is refused by sparkdoctor's launcher (bench, rerun: it cannot
# tell whether the server reads its options before or after the `--`). recipe check said nothing about it: the refusal
# came only at launch. It is a warning now, in the three recipe formats; a wrapper's `--` before vLLM's own command
# line, and a command that writes --host/--port itself, are not.
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
