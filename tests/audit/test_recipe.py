"""`sparkdoctor audit --recipe`: the fit sized as a real recipe launches (a shipped TOML recipe, the eugr YAML
fixtures), explicit options winning, every value naming its source, MODEL taken from the recipe's local folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.audit.test_command import run  # noqa: F401  (the subprocess fixture)

DATA = Path(__file__).resolve().parent.parent / "data" / "recipes"


def test_a_shipped_recipe_sizes_the_fit_and_names_its_model(run, qwen36):  # noqa: F811
    p = run("--recipe", "qwen36-fp8", "--set", f"model={qwen36}", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["model"] == str(qwen36)  # MODEL omitted: the recipe's local folder
    fit = doc["fit"]
    assert (fit["max_model_len"], fit["max_num_seqs"], fit["gpu_memory_utilization"]) == (262144, 4, 0.5)
    assert doc["per_token"]["kv_cache_dtype"] == "fp8"
    # 10 full-attention layers x 2 KV heads x 256 x (K+V) x 1 byte, 4 x 262144 tokens, + 4 sequences of GDN state
    assert fit["kv_cache_bytes"] == pytest.approx(4 * (262144 * 10 * 2 * 256 * 2 + doc["per_token"]["recurrent_state_bytes"]), rel=1e-6)
    src = doc["settings_sources"]
    assert src["max_num_seqs"] == "recipe qwen36-fp8 (--max-num-seqs 4)"
    assert src["kv_cache_dtype"] == "recipe qwen36-fp8 (--kv-cache-dtype fp8)"


def test_explicit_options_win_and_say_so(run, qwen36):  # noqa: F811
    p = run("--recipe", "qwen36-fp8", "--set", f"model={qwen36}", "--max-num-seqs", "64", "--kv-cache-dtype", "bfloat16")
    assert p.returncode == 1, p.stdout  # 64 x 262144 tokens of BF16 KV do not fit in half of 119.7 GiB
    assert "does not fit" in p.stdout and "(64 x 262144 tokens)" in p.stdout
    assert "max_num_seqs = 64  <- --max-num-seqs (command line)" in p.stdout
    assert "gpu_memory_utilization = 0.5  <- recipe qwen36-fp8 (--gpu-memory-utilization 0.5)" in p.stdout


def test_an_eugr_recipe_with_a_hub_model_needs_model_and_uses_its_flags(run, qwen3_8b):  # noqa: F811
    recipe = DATA / "nemotron-3-nano-nvfp4.yaml"
    p = run("--recipe", recipe)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "its model nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 is not on this machine" in p.stderr
    p = run(qwen3_8b["nvfp4"], "--recipe", recipe, "--format", "json")
    doc = json.loads(p.stdout)
    # the recipe sets no --max-num-seqs: vLLM's own default on the GPU (GB10: 119.7 GiB, not an A100 -> 1024), not 1
    assert (doc["fit"]["max_model_len"], doc["fit"]["gpu_memory_utilization"], doc["fit"]["max_num_seqs"]) == (262144, 0.7, 1024)
    assert doc["settings_sources"]["max_num_seqs"].startswith("vLLM's default on NVIDIA GB10 (DGX Spark): 1024")
    assert doc["settings_sources"]["max_model_len"] == "recipe Nemotron-3-Nano-NVFP4 (--max-model-len 262144)"
    assert doc["fit"]["judged_seqs"] == 1  # vLLM starts when one full-length sequence fits
    assert doc["fit"]["kv_cache_bytes"] * doc["fit"]["full_length_seqs"] <= doc["fit"]["budget_bytes"]
    # Qwen3-8B's config accepts 40960 tokens: vLLM refuses the recipe's 262144, and the audit says so
    assert any("--max-model-len 262144" in n and "refuses to start" in n for n in doc["settings_notes"]), doc["settings_notes"]


def test_an_eugr_recipe_templated_with_set(run, qwen3_8b):  # noqa: F811
    p = run("--recipe", DATA / "tiny-eugr.yaml", "--set", f"model_path={qwen3_8b['nvfp4']}", "--set", "max_model_len=2048", "--format", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["model"] == str(qwen3_8b["nvfp4"]) and doc["fit"]["max_model_len"] == 2048
    assert doc["settings_sources"]["max_model_len"] == "recipe tiny-eugr (--max-model-len 2048)"


@pytest.mark.parametrize("args, message", [
    (("--set", "x=1"), "--set needs --recipe"),
    ((), "give MODEL"),
    (("--recipe", "no-such-recipe"), "no-such-recipe"),
])
def test_recipe_usage_errors_are_one_line(run, args, message):  # noqa: F811
    p = run(*args)
    assert p.returncode == 2 and message in p.stderr and p.stderr.count("\n") == 1, p.stderr
