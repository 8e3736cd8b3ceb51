"""Tensor names -> modules -> module groups, from the names alone (the tensors are the truth).

A checkpoint stores a module's parameters as `<module>.<role>` (`...q_proj.weight`, `...q_proj.weight_scale`,
gpt-oss's `...experts.gate_up_proj_blocks`). `split_name` recovers (module, role); `group_of` puts a module
in one of the groups the roofline is reported by. Group rules are naming conventions shared by the
transformers families (Llama/Qwen/DeepSeek/gpt-oss/Nemotron-H); an unknown name lands in "other", still
counted, never dropped.
"""

from __future__ import annotations

import re

# roles a loader attaches to a module (weights, their quantization companions, biases)
ROLES = {
    "weight", "bias", "weight_scale", "weight_scale_2", "weight_scale_inv", "input_scale", "output_scale",
    "weight_packed", "weight_global_scale", "input_global_scale", "weight_zero_point", "weight_shape",
    "weight_g_idx", "qweight", "qzeros", "scales", "g_idx", "k_scale", "v_scale", "q_scale", "prob_scale",
    "pre_quant_scale", "weight_scale_inv_2",
}
_SUFFIX_ROLES = ("_blocks", "_scales", "_bias")  # gpt-oss MXFP4: gate_up_proj_blocks / _scales / _bias

# group key -> what the console shows
GROUPS = {
    "attention": "attention (q/k/v/o)",
    "mlp": "MLP (dense)",
    "experts": "MoE experts (routed)",
    "shared_experts": "shared experts",
    "router": "routers",
    "mixer": "SSM / GDN mixers",
    "embeddings": "embeddings",
    "lm_head": "lm_head",
    "norms": "norms",
    "mtp": "MTP / nextn heads",
    "vision": "vision / audio encoders",
    "other": "other",
}

_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")
_VISION = ("visual.", "vision_tower", "vision_model", "audio_tower", "multi_modal_projector", "mm_projector", "vision_encoder")
_ATTENTION_LEAVES = {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                     "kv_b_proj", "query_key_value", "dense", "c_attn", "wq", "wk", "wv", "wo", "sinks"}
_MIXER_LEAVES = {"in_proj", "out_proj", "conv1d", "A_log", "D", "dt_bias", "in_proj_qkvz", "in_proj_ba", "in_proj_qkv",
                 "in_proj_z", "in_proj_b", "in_proj_a"}


def split_name(name: str, ndim: int) -> tuple[str, str]:
    """(module, role) of a tensor name."""
    prefix, _, last = name.rpartition(".")
    if last in ROLES and prefix:
        return prefix, last
    for suffix in _SUFFIX_ROLES:
        if last.endswith(suffix) and len(last) > len(suffix):
            return f"{prefix}.{last[: -len(suffix)]}" if prefix else last[: -len(suffix)], suffix[1:]
    if ndim >= 2 or not prefix:
        return name, "weight"  # a bare parameter tensor (fused experts' gate_up_proj, embeddings)
    return prefix, last  # a 1-D parameter of its module (A_log, dt_bias, sinks)


def layer_of(module: str) -> int | None:
    found = _LAYER.search(module)
    return int(found.group(1)) if found else None


def group_of(module: str, decoder_layers: int) -> str:
    """The group a module belongs to. Layers numbered past the decoder (DeepSeek's nextn) are MTP."""
    lowered = module.lower()
    parts = module.split(".")
    leaf = parts[-1]
    if parts[0] in ("mtp", "model.mtp") or ".mtp." in f".{module}." or "nextn" in lowered:
        return "mtp"
    layer = layer_of(module)
    if layer is not None and layer >= decoder_layers and not any(v in module for v in _VISION):
        return "mtp"
    if any(v in module for v in _VISION):
        return "vision"
    if "lm_head" in lowered or leaf in ("output", "embed_out"):
        return "lm_head"
    if leaf in ("embed_tokens", "wte", "word_embeddings", "tok_embeddings", "embeddings") or "embed_tokens" in module:
        return "embeddings"
    if "shared_expert_gate" in module:
        return "router"
    if "shared_expert" in module:
        return "shared_experts"
    if ".experts." in f"{module}." or leaf == "experts":
        return "experts"
    if leaf in ("gate", "router") or module.endswith(".router.layer") or leaf == "e_score_correction_bias":
        return "router"
    if "norm" in leaf.lower() and "linear_attn" not in module and ".mixer." not in f"{module}.":
        return "norms"
    if "linear_attn" in module or "mamba" in lowered or leaf in _MIXER_LEAVES:
        return "mixer"
    if "attn" in lowered or "attention" in lowered or leaf in _ATTENTION_LEAVES:
        return "attention"
    if ".mlp." in f"{module}." or "feed_forward" in module or leaf in ("gate_proj", "up_proj", "down_proj", "gate_up_proj", "fc1", "fc2", "w1", "w2", "w3"):
        return "mlp"
    if "norm" in leaf.lower():
        return "norms"
    return "other"
