"""sparkrun recipes without a `command`: the vLLM command is built as sparkrun builds it.

The expected commands are those of sparkrun's own code and tests at spark-arena/sparkrun commit
0041b8f8fc1320ffa2e85d2d0ac760ee6be19de7: src/sparkrun/runtimes/_vllm_common.py (VLLM_FLAG_MAP,
VLLM_BOOL_FLAGS), runtimes/base.py (build_flags_from_map), runtimes/vllm_distributed.py and vllm_ray.py
(_build_command), core/recipe.py (_resolve_vllm_variant), and tests/test_runtimes.py (the recipes below
marked "sparkrun's test" are the `recipe_data` dicts of the tests named, written out as YAML).
Real recipe files: tests/data/recipes/styles01-*.yaml (styles01/sparkrun-recipes at 5af316e).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdoctor import recipes
from sparkdoctor.recipes import RecipeError
from sparkdoctor.recipes.sparkrun import parse_bool

DATA = Path(__file__).resolve().parents[1] / "data" / "recipes"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return path


def test_every_mapped_default_reaches_the_command_in_sparkruns_order(tmp_path):
    r = recipes.load(write(tmp_path, """recipe_version: "4"
model: org/m
runtime: vllm
defaults:
  api_key: k
  enforce_eager: true
  max_num_seqs: 4
  max_num_batched_tokens: 8192
  enable_prefix_caching: true
  data_parallel: 2
  pipeline_parallel: 1
  tensor_parallel: 2
  port: 8000
  enable_auto_tool_choice: true
  reasoning_parser: qwen3
"""))
    assert r.argv == ["vllm", "serve", "org/m", "-tp", "2", "--port", "8000", "--max-num-batched-tokens", "8192",
                      "--max-num-seqs", "4", "--enforce-eager", "--enable-prefix-caching", "-pp", "1",
                      "--data-parallel-size", "2", "--api-key", "k"]
    # enable_auto_tool_choice is in VLLM_BOOL_FLAGS but not in VLLM_FLAG_MAP: sparkrun never emits it
    assert any("enable_auto_tool_choice" in w and "reasoning_parser" in w for w in r.warnings)
    assert r.extras["resolved_runtime"] == "vllm-distributed"


def test_sparkruns_bool_flag_test(tmp_path):
    """sparkrun's test_vllm_distributed_bool_flags: enforce_eager and trust_remote_code in, a false
    enable_prefix_caching out."""
    r = recipes.load(write(tmp_path, """name: test-recipe
model: meta-llama/Llama-2-7b-hf
runtime: vllm-distributed
defaults:
  enforce_eager: true
  enable_prefix_caching: false
  trust_remote_code: true
"""))
    assert "--enforce-eager" in r.argv and "--trust-remote-code" in r.argv
    assert "--enable-prefix-caching" not in r.argv


def test_sparkruns_structured_test(tmp_path):
    """sparkrun's test_vllm_generate_command_structured."""
    r = recipes.load(write(tmp_path, """name: test-recipe
model: meta-llama/Llama-2-7b-hf
runtime: vllm
defaults: {port: 8000, tensor_parallel: 2, gpu_memory_utilization: 0.9}
"""))
    assert r.argv == ["vllm", "serve", "meta-llama/Llama-2-7b-hf", "-tp", "2", "--port", "8000",
                      "--gpu-memory-utilization", "0.9"]


def test_the_executor_backend_follows_the_runtime_variant(tmp_path):
    mp = recipes.load(write(tmp_path, "model: org/m\nruntime: vllm\ndefaults: {distributed_executor_backend: mp}\n"))
    assert "--distributed-executor-backend" not in mp.argv  # vllm-distributed skips it
    assert any("distributed_executor_backend" in w for w in mp.warnings)
    ray = recipes.load(write(tmp_path, "model: org/m\nruntime: vllm\ndefaults: {distributed_executor_backend: ray}\n"))
    assert ray.argv[-2:] == ["--distributed-executor-backend", "ray"] and ray.extras["resolved_runtime"] == "vllm-ray"


def test_a_stale_enforce_eager_override_is_visible_and_changes_the_fingerprint(tmp_path):
    path = write(tmp_path, "model: org/m\ndefaults: {port: 8000, enforce_eager: true}\n")
    eager = recipes.load(path)
    compiled = recipes.load(path, {"enforce_eager": "false"})
    assert "--enforce-eager" in eager.argv and "--enforce-eager" not in compiled.argv
    assert eager.fingerprint() != compiled.fingerprint()


def test_values_are_split_as_the_shell_sparkrun_hands_them_to_splits_them(tmp_path):
    r = recipes.load(write(tmp_path, "model: org/m\ndefaults: {served_model_name: 'two words'}\n"))
    assert r.argv[-3:] == ["--served-model-name", "two", "words"]


def test_ext_parse_bool_semantics():
    assert [parse_bool(v) for v in (True, "true", "yes", "1", "True")] == [True] * 5
    assert parse_bool("on") is False  # no 1, t or y in it: sparkrun reads "on" as false
    assert [parse_bool(v) for v in (False, "false", "no", "0", "", None)] == [False] * 6


def test_real_recipe_with_a_command_gets_served_model_name_patches_and_variants_shown():
    r = recipes.load(DATA / "styles01-qwen-35b.yaml")
    assert r.argv[:3] == ["vllm", "serve", "nvidia/Qwen3.6-35B-A3B-NVFP4"]
    assert r.argv.count("--served-model-name") == 1  # the command passes it: nothing appended
    assert r.extras["patches"] == ["patch_mamba_drop_eagle.sh"]
    assert set(r.extras["variants"]) == {"recipe_a", "recipe_concurrent", "recipe_c_headless"}
    assert any("patch_mamba_drop_eagle.sh" in w for w in r.warnings)
    assert any("3 variants" in w for w in r.warnings)


def test_a_served_model_name_default_the_command_lacks_is_appended(tmp_path):
    """base.py _augment_served_model_name."""
    r = recipes.load(write(tmp_path, "model: org/m\ndefaults: {served_model_name: short}\ncommand: vllm serve {model}\n"))
    assert r.argv == ["vllm", "serve", "org/m", "--served-model-name", "short"]
    assert r.served_model_name == "short"


def test_real_recipe_without_command_for_another_runtime_is_one_clear_line():
    """sparkrun builds SGLang's command itself, differently in different releases; sparkdoctor does not copy it, and says
    why and what to write instead."""
    with pytest.raises(RecipeError, match=r"styles01-muse-glimmer-30b.yaml: field 'command' is missing and runtime 'sglang'") as info:
        recipes.load(DATA / "styles01-muse-glimmer-30b.yaml")
    said = str(info.value)
    assert "python3 -m sglang.launch_server --model-path MODEL" in said and "sglang serve --model-path MODEL" in said
    assert said.endswith("write the server's command in the recipe's `command:` field") and "\n" not in said
