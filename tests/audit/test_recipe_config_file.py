"""A recipe whose command passes `vllm serve --config FILE.yaml`: the file's options are read as vLLM's parser reads
them (vllm/utils/argparse_utils.py, 0.32: put before the command line's flags, so the command line wins) by
`audit --recipe`, `recipe check` and the memory verdict, each value naming the file. Before, every value set only in
the file was "vLLM default (the recipe does not set it)". A file that cannot be read is one line, never a crash."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.fromrecipe import recipe_settings, tensor_parallel_note
from sparkdoctor.conclusions import recipe_check
from sparkdoctor.recipes import load as load_recipe
from sparkdoctor.recipes.vllm_config import served_argv
from tests.rerun.recipe_values import (  # noqa: F401
    FORMATS,
    dense_config,
    model_folder,
    no_hub_cache,
    recipe_file,
)


def _recipe(tmp_path, fmt, flags, config: str | bytes | None = "max-model-len: 4096\n"):
    if config is not None:
        (tmp_path / "serve.yaml").write_bytes(config.encode() if isinstance(config, str) else config)
    folder = str(model_folder(tmp_path, "model", dense_config()))
    return load_recipe(str(recipe_file(tmp_path, fmt, folder, flags)), {})


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_files_options_are_read_and_the_command_line_wins(tmp_path, fmt):
    cfg = "max-model-len: 4096\nmax_num_seqs: 8\ngpu-memory-utilization: 0.5\nkv-cache-dtype: fp8\n"
    # run on this machine: a container recipe's relative file is the container's (tests/test_attack_recipe_reads.py)
    recipe = replace(_recipe(tmp_path, fmt, ["--config", "serve.yaml", "--max-num-seqs", "2"], cfg), container=None)
    values, sources = recipe_settings(recipe, {})
    assert values == {"max_model_len": 4096, "max_num_seqs": 2, "gpu_memory_utilization": 0.5, "kv_cache_dtype": "fp8",
                      "dtype": "auto"}
    assert sources["max_model_len"] == f"recipe {recipe.name} (--config serve.yaml: max-model-len 4096)"
    assert sources["max_num_seqs"] == f"recipe {recipe.name} (--max-num-seqs 2)"
    # an option given on the command line BEFORE --config still wins: vLLM puts the file's options after the model
    values, _ = recipe_settings(replace(_recipe(tmp_path, fmt, ["--max-num-seqs", "2", "--config", "serve.yaml"], cfg), container=None), {})
    assert values["max_num_seqs"] == 2


def test_the_file_is_read_from_the_recipes_folder_and_explicit_options_win(tmp_path, monkeypatch):
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    monkeypatch.chdir(sub)  # not where the recipe is
    values, sources = recipe_settings(_recipe(tmp_path, "sparkdoctor", ["--config", "serve.yaml"]), {"max_num_seqs": 3})
    assert values["max_model_len"] == 4096 and "(--config serve.yaml: max-model-len 4096)" in sources["max_model_len"]
    assert values["max_num_seqs"] == 3 and sources["max_num_seqs"] == "--max-num-seqs (command line)"


def test_config_with_an_equals_sign_is_not_read_as_vllm_reads_none():
    """vLLM expands only the argument `--config` followed by a path; `--config=FILE` is an option's value nothing reads."""
    from sparkdoctor.recipes.model import Recipe

    recipe = Recipe("eq", "/nowhere/r.toml", "sparkdoctor", ["vllm", "serve", "m", "--config=/nowhere/x.yaml"])
    assert served_argv(recipe) == list(recipe.argv)


def test_where_vllm_puts_the_files_options(tmp_path):
    from sparkdoctor.recipes.model import Recipe

    (tmp_path / "c.yml").write_text("tensor_parallel_size: 4\nenforce-eager: true\ndisable-log-stats: false\n"
                                    "api-key: [a, b]\nspeculative-config: {method: ngram, n: 3}\nempty: []\n")
    args = ["--tensor_parallel_size", "4", "--enforce-eager", "--no-disable-log-stats", "--api-key", "a", "b",
            "--speculative-config", '{"method": "ngram", "n": 3}']
    r = str(tmp_path / "r.toml")
    cases = [
        (["vllm", "serve", "M", "--config", "c.yml", "-tp", "2"], ["vllm", "serve", "M", *args, "-tp", "2"]),
        (["/v/bin/vllm", "serve", "--config", "c.yml", "--port", "1"], ["/v/bin/vllm", "serve", *args, "--port", "1"]),
        (["python", "-m", "vllm.entrypoints.openai.api_server", "-tp", "2", "--config", "c.yml"],
         ["python", "-m", "vllm.entrypoints.openai.api_server", *args, "-tp", "2"]),
    ]
    for argv, want in cases:
        assert served_argv(Recipe("p", r, "sparkdoctor", argv)) == want
    assert "runs tensor parallel 2" in str(tensor_parallel_note(Recipe("p", r, "sparkdoctor", cases[0][0])))  # not the file's 4
    assert "runs tensor parallel 4" in str(tensor_parallel_note(Recipe("p", r, "sparkdoctor", cases[1][0])))


LAUGHS = "a0: &a0 [x, x, x, x, x, x, x, x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
                                                        for i in range(1, 12))
BAD = [
    (["--config", "gone.yaml"], None, r"--config gone.yaml: no such file \(read from the recipe's folder, .*\): vLLM would not start"),
    (["--config", "serve.json"], None, r"vLLM reads only a .yaml or .yml config file"),
    (["--config", "serve.yaml", "--config", "serve.yaml"], "a: 1\n", r"gives --config more than once"),
    (["--max-num-seqs", "2", "--config"], None, r"ends with --config and no file"),
    (["--config", "serve.yaml"], "", r"the file is empty"),
    (["--config", "serve.yaml"], "- max-model-len\n- 4096\n", r"the file is a list, not a mapping of options"),
    (["--config", "serve.yaml"], "1: 2\n", r"the key 1 is not an option's name"),
    (["--config", "serve.yaml"], "max-model-len: [4096\n", r"serve.yaml.*not valid YAML"),
    (["--config", "serve.yaml"], b"max-model-len: \xff\n", r"not UTF-8 text"),
    (["--config", "serve.yaml"], LAUGHS, r"billion laughs"),
    (["--config", "serve.yaml"], "k: " + "x" * (1024 * 1024) + "\n", r"larger than 1 MiB"),
    (["--config", "serve.yaml"], "max-model-len: 32.5K\n", r"serve.yaml: --max-model-len '32.5K' is not a whole number"),
    (["--config", "x" * 5000 + ".yaml"], None, r"--config x{200}: cannot read: File name too long"),
]


@pytest.mark.parametrize("flags,config,message", BAD, ids=["missing", "json", "twice", "no-path", "empty", "list", "int-key",
                                                             "bad-yaml", "not-utf8", "laughs", "over-1mib", "bad-value",
                                                             "name-too-long"])
def test_a_file_vllm_would_not_start_with_is_one_line(tmp_path, flags, config, message):
    recipe = _recipe(tmp_path, "sparkdoctor", flags, config)
    with pytest.raises(AuditError, match=message) as caught:
        recipe_settings(recipe, {})
    assert "\n" not in str(caught.value)


def test_a_fifo_or_a_folder_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "dir.yaml").mkdir()
    for name, why in (("fifo.yaml", "FIFO"), ("dir.yaml", "directory")):
        with pytest.raises(AuditError, match=f"--config {name}: .*{why}"):
            recipe_settings(_recipe(tmp_path, "sparkdoctor", ["--config", name], None), {})


def _check(recipe):
    from sparkdoctor.matrix import load as load_matrix
    from tests.gb10 import gb10_facts

    flags = {"vllm": {"version": "0.32.0", "root": "/v/vllm"},
             "flags": ["--config", "--max-model-len", "--max-num-seqs", "--enforce-eager", "--port"]}
    return {str(f["id"]): f for f in recipe_check.check(recipe, load_matrix(None), gb10_facts(), flags)}


def test_recipe_check_judges_the_files_values_and_names_the_file(tmp_path):
    found = _check(_recipe(tmp_path, "sparkrun-v2", ["--config", "serve.yaml"],
                           "max_num_seqs: 8k\nenforce-eager: true\nmax-model-leng: 4096\n"))
    refused = found["flag-value:--max-num-seqs"]
    assert refused["severity"] == "error" and str(refused["evidence"][0]).startswith("set in --config serve.yaml")
    assert found["flag-unknown:--max-model-leng"]["severity"] == "error"  # vLLM refuses an unknown key of the file too
    assert "flag-unknown:--enforce-eager" not in found and "flag-unknown:--config" not in found


def test_recipe_check_says_when_vllm_would_not_start_with_the_file(tmp_path):
    missing = _check(_recipe(tmp_path, "sparkdoctor", ["--config", "gone.yaml"], None))["flag-config:--config"]
    assert missing["severity"] == "error" and "no such file" in str(missing["evidence"])
    from dataclasses import replace

    in_image = replace(_recipe(tmp_path, "sparkdoctor", ["--config", "/etc/vllm/serve.yaml"], None), container="vllm:latest")
    warned = _check(in_image)["flag-config:--config"]
    assert warned["severity"] == "warn" and "inside the container vllm:latest" in str(warned["evidence"])
