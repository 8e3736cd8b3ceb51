"""Builders for the recipe-value tests: real recipe files in the three formats sparkdoctor reads, and real
local model folders whose config.json is shaped like the hybrid and dense families served on GB10."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

FORMATS = ("sparkdoctor", "eugr-v1", "sparkrun-v2")


@pytest.fixture(autouse=True)
def no_hub_cache(tmp_path, monkeypatch):
    """Imported by a test module: there, a hub id resolves to no local files unless the test builds the cache."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


def hybrid_config(max_position: int = 262144, layers: int = 8) -> dict:
    """Shaped like Qwen3.5/3.6 (Gated DeltaNet `linear_attention` layers, one full-attention layer in four)."""
    kinds = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)]
    return {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
            "num_hidden_layers": layers, "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2,
            "head_dim": 256, "vocab_size": 248320, "torch_dtype": "bfloat16", "max_position_embeddings": max_position,
            "layer_types": kinds, "linear_num_value_heads": 32, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4}


def dense_config(max_position: int = 32768, rope: dict | None = None) -> dict:
    """Shaped like a Llama/Qwen3 dense model."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256,
           "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "torch_dtype": "bfloat16",
           "max_position_embeddings": max_position}
    if rope:
        cfg["rope_scaling"] = rope
    return cfg


def model_folder(root: Path, name: str, config: dict, tokenizer: dict | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if tokenizer is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return folder


def recipe_file(root: Path, fmt: str, model: str, flags: list[str], env: dict[str, str] | None = None) -> Path:
    """A recipe in format `fmt` whose command is `vllm serve MODEL FLAGS...` with env `env`."""
    env = env or {}
    if fmt == "sparkdoctor":
        path = root / "r.toml"
        lines = ["schema = 1", 'name = "values"', f"model = {json.dumps(model)}",
                 "command = " + json.dumps(["vllm", "serve", "{model}", *flags])]
        if env:
            lines += ["[env]"] + [f"{k} = {json.dumps(v)}" for k, v in env.items()]
        path.write_text("\n".join(lines) + "\n")
        return path
    command = "vllm serve {model} " + " ".join(shlex.quote(f) for f in flags)
    env_block = "env:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in env.items()) if env else ""
    if fmt == "eugr-v1":
        path = root / "r-eugr.yaml"
        path.write_text(f'recipe_version: "1"\nname: values\nmodel: {json.dumps(model)}\ncontainer: vllm-node\n'
                        f"defaults:\n  model: {json.dumps(model)}\n{env_block}command: |\n  {command}\n")
        return path
    path = root / "r-sparkrun.yaml"
    path.write_text(f'recipe_version: "2"\nmodel: {json.dumps(model)}\nruntime: vllm\n{env_block}command: |\n  {command}\n')
    return path


def _served(flags: list[str], **model) -> dict:
    """A gb10_facts() change: the Facts.recipe `recipe check` builds, for a hybrid model of 262144 positions."""
    facts = {"ref": "/models/m", "hybrid": True, "linear_layers": 6, "mamba_layers": 0, "max_model_len": 262144, **model}
    return {"recipe": {"name": "r", "argv": ["vllm", "serve", "/models/m", *flags], "model": facts}}


# entry id -> (trigger, near miss) for tests/test_matrix_entries.py (matrix/vllm-settings.toml); the
# healthy fixture's MemTotal is 125511680 KiB (128.5e9 bytes): 120G (binary) is above it, 128g (decimal) below
SERVING_CASES: dict[str, tuple[dict, dict]] = {
    "vllm-hybrid-mnbt-below-mamba-block": (_served(["--max-num-batched-tokens", "2048"]), _served(["--max-num-batched-tokens", "2096"])),
    "vllm-gpu-mem-util-above-uma-headroom": (_served(["--gpu-memory-utilization", "0.9"]), _served(["--gpu-memory-utilization", "0.85"])),
    "vllm-kv-cache-bytes-above-host-memory": (_served(["--kv-cache-memory-bytes", "120G"]), _served(["--kv-cache-memory-bytes", "128g"])),
    "vllm-max-model-len-above-model": (_served(["--max-model-len", "262145"]), _served(["--max-model-len", "262144"])),
}
