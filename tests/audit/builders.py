"""Real-shaped checkpoints made cheaply: the real public config.json of a model (tests/data/models/) and
safetensors shards whose headers list the tensor names, shapes and dtypes its exporter writes, with the
data region left as a hole (the file is truncated to size: sparse, no disk used).

The writer follows the safetensors format exactly (8-byte length, JSON header padded with spaces to 8
bytes, offsets tiling the data region), so the audit reads these the way it reads a download.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

MODELS = Path(__file__).resolve().parent.parent / "data" / "models"
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F4": 4, "I16": 16, "F16": 16, "BF16": 16,
        "I32": 32, "U32": 32, "F32": 32, "I64": 64, "F64": 64, "F6_E2M3": 6, "F6_E3M2": 6, "U16": 16, "U64": 64, "C64": 64}

Entry = tuple  # (name, dtype, shape)


def header_bytes(entries: list[Entry], metadata: dict | None = None) -> tuple[bytes, int]:
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, dtype, shape in entries:
        size = math.prod(shape) * BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return raw, offset


def write_safetensors(path: Path, entries: list[Entry], metadata: dict | None = None) -> int:
    """Write a sparse safetensors file; returns its size."""
    raw, data = header_bytes(entries, metadata)
    with open(path, "wb") as handle:
        handle.write(len(raw).to_bytes(8, "little"))
        handle.write(raw)
        handle.truncate(8 + len(raw) + data)
    return 8 + len(raw) + data


def write_checkpoint(folder: Path, config: dict, entries: list[Entry], shard_bytes: int = 5 * 10**9,
                     extra: dict[str, dict] | None = None) -> Path:
    """A checkpoint folder: config.json, shards of at most ~shard_bytes, and an index when there are several."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    for name, doc in (extra or {}).items():
        (folder / name).write_text(json.dumps(doc, indent=2))
    shards: list[list[Entry]] = [[]]
    size = 0
    for entry in entries:
        nbytes = math.prod(entry[2]) * BITS[entry[1]] // 8
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(entry)
        size += nbytes
    if len(shards) == 1:
        write_safetensors(folder / "model.safetensors", shards[0])
        return folder
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(folder / name, shard)
        weight_map.update({e[0]: name for e in shard})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


def load_config(model: str, quant: str | None = None) -> dict:
    config = json.loads((MODELS / model / "config.json").read_text())
    if quant:
        config["quantization_config"] = json.loads((MODELS / model / f"quant-{quant}.json").read_text())
    return config


# ---- one linear layer in each exporter's layout -------------------------------------------------------
def linear(prefix: str, out: int, inp: int, scheme: str, bias: bool = False) -> list[Entry]:
    p = prefix
    if scheme == "bf16":
        got = [(f"{p}.weight", "BF16", [out, inp])]
    elif scheme == "fp8-channel":  # compressed-tensors float-quantized, strategy channel
        got = [(f"{p}.weight", "F8_E4M3", [out, inp]), (f"{p}.weight_scale", "BF16", [out, 1])]
    elif scheme == "fp8-block":  # quant_method fp8, weight_block_size [128, 128]
        got = [(f"{p}.weight", "F8_E4M3", [out, inp]), (f"{p}.weight_scale_inv", "F32", [-(-out // 128), -(-inp // 128)])]
    elif scheme in ("nvfp4", "nvfp4a16"):  # compressed-tensors nvfp4-pack-quantized
        got = [(f"{p}.weight_packed", "U8", [out, inp // 2]), (f"{p}.weight_scale", "F8_E4M3", [out, inp // 16]),
               (f"{p}.weight_global_scale", "F32", [1])]
        if scheme == "nvfp4":
            got.append((f"{p}.input_global_scale", "F32", [1]))
    elif scheme == "modelopt-nvfp4":
        got = [(f"{p}.weight", "U8", [out, inp // 2]), (f"{p}.weight_scale", "F8_E4M3", [out, inp // 16]),
               (f"{p}.weight_scale_2", "F32", []), (f"{p}.input_scale", "F32", [])]
    elif scheme in ("modelopt-fp8", "modelopt-fp8-fnuz"):  # ModelOpt FP8: per-tensor weight and input scales
        got = [(f"{p}.weight", "F8_E4M3FNUZ" if scheme.endswith("fnuz") else "F8_E4M3", [out, inp]),
               (f"{p}.weight_scale", "F32", []), (f"{p}.input_scale", "F32", [])]
    elif scheme == "modelopt-w4a16":  # ModelOpt W4A16_NVFP4: no input scale
        got = [(f"{p}.weight", "U8", [out, inp // 2]), (f"{p}.weight_scale", "F8_E4M3", [out, inp // 16]), (f"{p}.weight_scale_2", "F32", [])]
    elif scheme in ("ct-w4a16", "ct-w8a16"):  # compressed-tensors pack-quantized: int4/int8 packed into int32
        per_word = 8 if scheme == "ct-w4a16" else 4
        got = [(f"{p}.weight_packed", "I32", [out, inp // per_word]), (f"{p}.weight_scale", "BF16", [out, inp // 128 if per_word == 8 else 1]),
               (f"{p}.weight_shape", "I64", [2])]
    elif scheme == "awq":
        got = [(f"{p}.qweight", "I32", [inp, out // 8]), (f"{p}.qzeros", "I32", [inp // 128, out // 8]), (f"{p}.scales", "F16", [inp // 128, out])]
    elif scheme == "gptq":
        got = [(f"{p}.qweight", "I32", [inp // 8, out]), (f"{p}.qzeros", "I32", [inp // 128, out // 8]),
               (f"{p}.scales", "F16", [inp // 128, out]), (f"{p}.g_idx", "I32", [inp])]
    else:
        raise ValueError(scheme)
    if bias:
        got.append((f"{p}.bias", "BF16", [out]))
    return got


def norm(name: str, size: int) -> Entry:
    return (f"{name}.weight", "BF16", [size])


# ---- architectures -------------------------------------------------------------------------------------
def qwen3_dense(cfg: dict, scheme: str) -> list[Entry]:
    h, inter, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", "BF16", [cfg["vocab_size"], h])]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out += [norm(f"{p}.input_layernorm", h), norm(f"{p}.post_attention_layernorm", h),
                norm(f"{p}.self_attn.q_norm", hd), norm(f"{p}.self_attn.k_norm", hd)]
        for name, o, n in (("q_proj", q, h), ("k_proj", kv, h), ("v_proj", kv, h), ("o_proj", h, q)):
            out += linear(f"{p}.self_attn.{name}", o, n, scheme)
        for name, o, n in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
            out += linear(f"{p}.mlp.{name}", o, n, scheme)
    out += [norm("model.norm", h), ("lm_head.weight", "BF16", [cfg["vocab_size"], h])]
    return out


def _gated_attention(p: str, t: dict, scheme: str) -> list[Entry]:
    h, hd = t["hidden_size"], t["head_dim"]
    q, kv = t["num_attention_heads"] * hd, t["num_key_value_heads"] * hd
    out = [norm(f"{p}.self_attn.q_norm", hd), norm(f"{p}.self_attn.k_norm", hd)]
    for name, o, n in (("q_proj", 2 * q, h), ("k_proj", kv, h), ("v_proj", kv, h), ("o_proj", h, q)):  # q carries the output gate
        out += linear(f"{p}.self_attn.{name}", o, n, scheme)
    return out


def _moe(p: str, t: dict, scheme: str) -> list[Entry]:
    h, m, s = t["hidden_size"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
    out = [(f"{p}.mlp.gate.weight", "BF16", [t["num_experts"], h]), (f"{p}.mlp.shared_expert_gate.weight", "BF16", [1, h])]
    for e in range(t["num_experts"]):
        for name, o, n in (("gate_proj", m, h), ("up_proj", m, h), ("down_proj", h, m)):
            out += linear(f"{p}.mlp.experts.{e}.{name}", o, n, scheme)
    for name, o, n in (("gate_proj", s, h), ("up_proj", s, h), ("down_proj", h, s)):
        out += linear(f"{p}.mlp.shared_expert.{name}", o, n, scheme)
    return out


def _gdn(p: str, t: dict, fused: bool) -> list[Entry]:
    """Gated DeltaNet mixer, always BF16 (the exporters' ignore lists keep it so)."""
    h = t["hidden_size"]
    key, value, vh = t["linear_num_key_heads"] * t["linear_key_head_dim"], t["linear_num_value_heads"] * t["linear_value_head_dim"], t["linear_num_value_heads"]
    la = f"{p}.linear_attn"
    if fused:  # Qwen3-Next names
        out = [(f"{la}.in_proj_qkvz.weight", "BF16", [2 * key + 2 * value, h]), (f"{la}.in_proj_ba.weight", "BF16", [2 * vh, h])]
    else:  # Qwen3.5 / 3.6 names
        out = [(f"{la}.in_proj_qkv.weight", "BF16", [2 * key + value, h]), (f"{la}.in_proj_z.weight", "BF16", [value, h]),
               (f"{la}.in_proj_b.weight", "BF16", [vh, h]), (f"{la}.in_proj_a.weight", "BF16", [vh, h])]
    return out + [(f"{la}.conv1d.weight", "BF16", [2 * key + value, 1, t["linear_conv_kernel_dim"]]), (f"{la}.A_log", "F32", [vh]),
                  (f"{la}.dt_bias", "BF16", [vh]), norm(f"{la}.norm", t["linear_value_head_dim"]),
                  (f"{la}.out_proj.weight", "BF16", [h, value])]


def hybrid_moe(cfg: dict, scheme: str, prefix: str, fused_gdn: bool, vision: bool) -> list[Entry]:
    """Qwen3-Next (prefix "model.") and Qwen3.5/3.6-MoE (prefix "model.language_model.") with their MTP head."""
    t = cfg.get("text_config", cfg)
    h = t["hidden_size"]
    kinds = t.get("layer_types") or ["full_attention" if (i + 1) % t["full_attention_interval"] == 0 else "linear_attention" for i in range(t["num_hidden_layers"])]
    out = [(f"{prefix}embed_tokens.weight", "BF16", [t["vocab_size"], h])]
    for i, kind in enumerate(kinds):
        p = f"{prefix}layers.{i}"
        out += [norm(f"{p}.input_layernorm", h), norm(f"{p}.post_attention_layernorm", h)]
        out += _gated_attention(p, t, scheme) if kind == "full_attention" else _gdn(p, t, fused_gdn)
        out += _moe(p, t, scheme)
    out += [norm(f"{prefix}norm", h), ("lm_head.weight", "BF16", [t["vocab_size"], h])]
    out += [("mtp.fc.weight", "BF16", [h, 2 * h]), norm("mtp.pre_fc_norm_embedding", h), norm("mtp.pre_fc_norm_hidden", h), norm("mtp.norm", h),
            norm("mtp.layers.0.input_layernorm", h), norm("mtp.layers.0.post_attention_layernorm", h)]
    out += _gated_attention("mtp.layers.0", t, "bf16") + _moe("mtp.layers.0", t, "bf16")
    if vision:
        v = cfg["vision_config"]
        vh, vi = v["hidden_size"], v["intermediate_size"]
        out.append(("model.visual.patch_embed.proj.weight", "BF16", [vh, 3, 2, 16, 16]))
        for b in range(v["depth"]):
            p = f"model.visual.blocks.{b}"
            out += [norm(f"{p}.norm1", vh), norm(f"{p}.norm2", vh)]
            for name, o, n in (("attn.qkv", 3 * vh, vh), ("attn.proj", vh, vh), ("mlp.linear_fc1", vi, vh), ("mlp.linear_fc2", vh, vi)):
                out += linear(f"{p}.{name}", o, n, "bf16", bias=True)
        out += linear("model.visual.merger.linear_fc1", 4 * vh, 4 * vh, "bf16", bias=True) + linear("model.visual.merger.linear_fc2", v["out_hidden_size"], 4 * vh, "bf16", bias=True)
    return out


def gpt_oss(cfg: dict) -> list[Entry]:
    """gpt-oss as OpenAI ships it: MXFP4 experts (*_blocks/_scales), everything else BF16."""
    h, hd, e, inter = cfg["hidden_size"], cfg["head_dim"], cfg["num_local_experts"], cfg["intermediate_size"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", "BF16", [cfg["vocab_size"], h])]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out += [norm(f"{p}.input_layernorm", h), norm(f"{p}.post_attention_layernorm", h), (f"{p}.self_attn.sinks", "BF16", [cfg["num_attention_heads"]])]
        for name, o, n in (("q_proj", q, h), ("k_proj", kv, h), ("v_proj", kv, h), ("o_proj", h, q)):
            out += linear(f"{p}.self_attn.{name}", o, n, "bf16", bias=True)
        out += linear(f"{p}.mlp.router", e, h, "bf16", bias=True)
        x = f"{p}.mlp.experts"
        out += [(f"{x}.gate_up_proj_blocks", "U8", [e, 2 * inter, h // 32, 16]), (f"{x}.gate_up_proj_scales", "U8", [e, 2 * inter, h // 32]),
                (f"{x}.gate_up_proj_bias", "BF16", [e, 2 * inter]), (f"{x}.down_proj_blocks", "U8", [e, h, inter // 32, 16]),
                (f"{x}.down_proj_scales", "U8", [e, h, inter // 32]), (f"{x}.down_proj_bias", "BF16", [e, h])]
    return out + [norm("model.norm", h), ("lm_head.weight", "BF16", [cfg["vocab_size"], h])]


# ---- the fixtures the tests use ------------------------------------------------------------------------
def qwen3_8b(folder: Path, quant: str | None) -> Path:
    scheme = {None: "bf16", "fp8-dynamic": "fp8-channel", "nvfp4": "nvfp4", "nvfp4a16": "nvfp4a16", "awq": "awq", "gptq": "gptq",
              "fp8-block": "fp8-block"}[quant]
    cfg = load_config("qwen3-8b", quant)
    return write_checkpoint(folder, cfg, qwen3_dense(cfg, scheme))


def qwen36_35b_a3b_nvfp4(folder: Path) -> Path:
    cfg = load_config("qwen3.6-35b-a3b", "nvfp4")
    return write_checkpoint(folder, cfg, hybrid_moe(cfg, "nvfp4", "model.language_model.", fused_gdn=False, vision=True))


def qwen3_next_80b_nvfp4(folder: Path) -> Path:
    cfg = load_config("qwen3-next-80b-a3b")
    hf_quant = json.loads((MODELS / "qwen3-next-80b-a3b" / "hf_quant_config.json").read_text())
    return write_checkpoint(folder, cfg, hybrid_moe(cfg, "modelopt-nvfp4", "model.", fused_gdn=True, vision=False),
                            extra={"hf_quant_config.json": hf_quant})


def qwen3_next_80b_bf16(folder: Path) -> Path:
    cfg = load_config("qwen3-next-80b-a3b")
    return write_checkpoint(folder, cfg, hybrid_moe(cfg, "bf16", "model.", fused_gdn=True, vision=False))


def gpt_oss_20b(folder: Path) -> Path:
    cfg = load_config("gpt-oss-20b")
    return write_checkpoint(folder, cfg, gpt_oss(cfg))
