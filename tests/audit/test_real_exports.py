"""Checkpoints as the exporters users download from write them, beyond the seeds' set: ModelOpt's config.json
quantization_config beside its hf_quant_config.json (nvidia/* repos ship both), ModelOpt MIXED_PRECISION
(nvidia/Qwen3.6-27B-NVFP4 and -35B-A3B-NVFP4: FP8 attention, W4A16 NVFP4 MLP and lm_head, the rest left in
BF16 by naming it in no `quantized_layers` entry), compressed-tensors pack-quantized W8A16, and FP8 "fnuz"
weights (torch.float8_e4m3fnuz, which safetensors writes as F8_E4M3FNUZ). Byte counts are checked by hand."""

from __future__ import annotations

from sparkdoctor.audit.roofline import AuditOptions, run_audit
from tests.audit import builders

PRODUCER = {"name": "modelopt", "version": "0.45.0"}
NVFP4 = {"num_bits": 4, "type": "float", "group_size": 16, "dynamic": False}
FP8 = {"num_bits": 8, "type": "float", "dynamic": False}
FP8_KV = {"dynamic": False, "num_bits": 8, "type": "float"}


def qwen3(layers: int = 2) -> dict:
    cfg = builders.load_config("qwen3-8b")
    cfg.update(num_hidden_layers=layers)
    return cfg


def dense(cfg: dict, scheme_of) -> list[builders.Entry]:
    """Qwen3-8B's tensors, each linear in the layout `scheme_of(module name)` gives."""
    h, inter, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", "BF16", [cfg["vocab_size"], h])]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        out += [builders.norm(f"{p}.input_layernorm", h), builders.norm(f"{p}.post_attention_layernorm", h)]
        for name, o, n in (("self_attn.q_proj", q, h), ("self_attn.k_proj", kv, h), ("self_attn.v_proj", kv, h), ("self_attn.o_proj", h, q),
                           ("mlp.gate_proj", inter, h), ("mlp.up_proj", inter, h), ("mlp.down_proj", h, inter)):
            out += builders.linear(f"{p}.{name}", o, n, scheme_of(f"{p}.{name}"))
    out += [builders.norm("model.norm", h)] + builders.linear("lm_head", cfg["vocab_size"], h, scheme_of("lm_head"))
    return out


def audit(folder, **kw):
    return run_audit(AuditOptions(str(folder), gpu="gb10", **kw))


def test_modelopt_mixed_precision_leaves_a_layer_in_no_quantized_layers_entry_unquantized(tmp_path):
    """vLLM's ModelOptMixedPrecisionConfig builds an unquantized layer for a linear no `quantized_layers` entry
    names; the audit said that BF16 layer was one the config quantizes (exit 1) for a checkpoint that loads."""
    cfg = qwen3()
    layers = {}
    for i in range(2):
        for name in ("q_proj", "k_proj", "v_proj") + (("o_proj",) if i == 0 else ()):  # layer 1's o_proj: BF16 by omission
            layers[f"model.layers.{i}.self_attn.{name}"] = {"quant_algo": "FP8"}
        for name in ("gate_proj", "up_proj", "down_proj"):
            layers[f"model.layers.{i}.mlp.{name}"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    layers["lm_head"] = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    fp8 = sorted(k for k, v in layers.items() if v["quant_algo"] == "FP8")
    cfg["quantization_config"] = {
        "config_groups": {"group_0": {"input_activations": FP8, "weights": FP8, "targets": fp8},
                          "group_1": {"weights": NVFP4, "targets": sorted(set(layers) - set(fp8))}},
        "ignore": ["mtp*"], "kv_cache_scheme": FP8_KV, "producer": PRODUCER, "quant_algo": "MIXED_PRECISION",
        "quant_method": "modelopt", "quantized_layers": layers}
    hf_quant = {"producer": PRODUCER, "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8",
                                                       "exclude_modules": ["mtp*"], "quantized_layers": layers}}

    def scheme(module: str) -> str:
        algo = layers.get(module, {}).get("quant_algo")
        return {"FP8": "modelopt-fp8", "W4A16_NVFP4": "modelopt-w4a16"}.get(algo, "bf16")

    folder = builders.write_checkpoint(tmp_path / "mixed", cfg, dense(cfg, scheme), extra={"hf_quant_config.json": hf_quant})
    a = audit(folder, context=1024)
    assert [d.kind for d in a.disagreements] == ["stale-ignore-entry"], a.disagreements  # mtp*: this export has no MTP head
    # read per token, by hand: layer 0's q/k/v/o and layer 1's q/k/v in FP8 (4096 x 4096 + 2 x 1024 x 4096 + 4096 x 4096 per
    # layer, one byte each, 2 F32 scales each), layer 1's o_proj BF16
    fp8_bytes = 2 * (4096 * 4096 + 2 * 1024 * 4096) + 4096 * 4096 + 7 * 2 * 4
    assert a.read_by_format["FP8 per-tensor"] == fp8_bytes
    assert a.read_by_format["BF16"] == 4096 * 4096 * 2 + 4096 * 2 + (2 * 2 + 1) * 4096 * 2  # o_proj, one embedding row, norms
    nvfp4 = (2 * 3 * 12288 * 4096 + 151936 * 4096) * 9 // 16 + 7 * 4  # 4.5 bits a weight, one F32 global scale each
    assert a.read_by_format["NVFP4"] == nvfp4
    assert "quantized_layers" in a.quant[0].scheme and len(a.quant) == 1


def test_config_json_quantization_config_is_the_one_vllm_reads(tmp_path):
    """nvidia/* repos ship config.json's quantization_config and hf_quant_config.json; vLLM reads the first when it is
    there. The audit judged both, so each problem was printed twice, and missed config.json's FP8 KV scheme."""
    cfg = qwen3(1)
    cfg["quantization_config"] = {"config_groups": {"group_0": {"input_activations": NVFP4, "weights": NVFP4, "targets": ["Linear"]}},
                                  "ignore": ["lm_head", "model.layers.9*"], "kv_cache_scheme": FP8_KV, "producer": PRODUCER,
                                  "quant_algo": "NVFP4", "quant_method": "modelopt"}
    hf_quant = {"producer": PRODUCER, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "exclude_modules": ["lm_head", "model.layers.9*"]}}
    folder = builders.write_checkpoint(tmp_path / "mo", cfg, builders.qwen3_dense(cfg, "modelopt-nvfp4"), extra={"hf_quant_config.json": hf_quant})
    a = audit(folder, context=100)
    assert [(q.source, q.kv_cache_dtype) for q in a.quant] == [("config.json quantization_config", "fp8")]
    assert [(d.kind, d.module) for d in a.disagreements] == [("stale-ignore-entry", "model.layers.9*")]
    assert "config.json quantization_config carries FP8 KV scales" in a.kv_dtype


def test_compressed_tensors_w8a16_packs_four_weights_a_word(tmp_path):
    """pack-quantized int8 (RedHatAI *-quantized.w8a16): 4 weights in each int32. Read as 4-bit, the audit called it
    INT4 and counted twice the parameters."""
    cfg = qwen3(1)
    w8 = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel", "group_size": None, "dynamic": False}
    cfg["quantization_config"] = {"config_groups": {"group_0": {"input_activations": None, "targets": ["Linear"], "weights": w8}},
                                  "format": "pack-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors"}
    folder = builders.write_checkpoint(tmp_path / "w8", cfg, builders.qwen3_dense(cfg, "ct-w8a16"))
    a = audit(folder, context=100)
    attention = next(g for g in a.groups if g.key == "attention")
    assert set(attention.formats) == {"INT8"}
    assert attention.params == 2 * 4096 * 4096 + 2 * 1024 * 4096  # q, o 4096x4096; k, v 1024x4096
    assert attention.bytes_stored == attention.params + (4096 + 1024 + 1024 + 4096) * 2 + 4 * 16  # int8 + BF16 channel scales + shapes


def test_fp8_fnuz_weights_are_fp8(tmp_path):
    """safetensors defines F8_E4M3FNUZ and F8_E5M2FNUZ (torch's ROCm FP8 types); the audit refused the file as 'unknown dtype'."""
    cfg = qwen3(1)
    cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"]}
    folder = builders.write_checkpoint(tmp_path / "fnuz", cfg, builders.qwen3_dense(cfg, "modelopt-fp8-fnuz"))
    a = audit(folder, context=100)
    assert set(next(g for g in a.groups if g.key == "mlp").formats) == {"FP8 per-tensor"} and a.disagreements == []


def test_mixed_precision_routed_experts_are_looked_up_as_vllm_looks_them_up():
    """ModelOptMixedPrecisionConfig._resolve_quant_algo: a linear by its exact name; routed experts (one FusedMoE per
    layer) by their `.experts` module, an entry under it, or any entry under its parent."""
    from sparkdoctor.audit.quantconfig import read_quant_configs

    p = "model.language_model.layers"
    qc = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
        f"{p}.0.mlp.experts": {"quant_algo": "W4A16_NVFP4"}, f"{p}.1.mlp.shared_expert.gate_proj": {"quant_algo": "FP8"},
        f"{p}.2.mlp.experts.7.up_proj": {"quant_algo": "NVFP4"}}}
    (quant,) = read_quant_configs({"quantization_config": qc}, None)
    covered = {m: quant.targets_module(m) for m in (
        f"{p}.0.mlp.experts.5.gate_proj", f"{p}.0.mlp.experts.gate_up_proj", f"{p}.1.mlp.experts.3.down_proj",
        f"{p}.1.mlp.shared_expert.gate_proj", f"{p}.1.mlp.shared_expert.up_proj", f"{p}.2.mlp.experts.0.gate_proj",
        f"{p}.3.mlp.experts.0.gate_proj", f"{p}.0.mlp.gate")}
    assert covered == {f"{p}.0.mlp.experts.5.gate_proj": True, f"{p}.0.mlp.experts.gate_up_proj": True,
                       f"{p}.1.mlp.experts.3.down_proj": True, f"{p}.1.mlp.shared_expert.gate_proj": True,
                       f"{p}.1.mlp.shared_expert.up_proj": False, f"{p}.2.mlp.experts.0.gate_proj": True,
                       f"{p}.3.mlp.experts.0.gate_proj": False, f"{p}.0.mlp.gate": False}
    assert quant.scheme == "MIXED_PRECISION (ModelOpt: 3 quantized_layers, FP8, NVFP4, W4A16_NVFP4)"


def test_a_linear_no_compressed_tensors_target_or_ignore_entry_matches_is_named(tmp_path):
    """vLLM's compressed-tensors loader needs every linear matched by a group's target or an ignore entry, else it stops:
    "Unable to find matching target for model.layers.0.self_attn.q_proj in the compressed-tensors config". A recipe
    that quantizes only the MLP (`targets: re:.*mlp\\.(gate|up|down)_proj$`) and forgets to ignore attention wrote
    such a checkpoint; the audit said nothing (exit 0)."""
    cfg = qwen3(2)
    mlp = r"re:.*mlp\.(gate|up|down)_proj$"
    cfg["quantization_config"] = {"config_groups": {"group_0": {"input_activations": NVFP4, "weights": NVFP4, "targets": [mlp]}},
                                  "format": "nvfp4-pack-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors"}
    entries = dense(cfg, lambda m: "nvfp4" if ".mlp." in m else "bf16")
    a = audit(builders.write_checkpoint(tmp_path / "mlp-only", cfg, entries), context=100)
    assert {(d.kind, d.module, d.count) for d in a.disagreements} == {
        ("matched-by-no-target", f"model.layers.N.self_attn.{p}", 2) for p in ("q_proj", "k_proj", "v_proj", "o_proj")}
    assert "Unable to find matching target" in a.disagreements[0].detail
    cfg["quantization_config"]["ignore"].append(r"re:.*self_attn\..*")  # the fix: attention named in ignore
    assert audit(builders.write_checkpoint(tmp_path / "fixed", cfg, entries), context=100).disagreements == []


def test_a_float32_checkpoint_is_sized_as_vllm_serves_it_in_bfloat16(tmp_path):
    """A fine-tune saved in float32 (`torch_dtype: float32`, F32 tensors): vLLM's `--dtype auto` serves it in bfloat16
    (config/model.py _resolve_auto_dtype), as `memory` already counts it. The audit read 4 bytes a weight and 4 bytes
    a KV value: half the ceiling, twice the memory, and "does not fit" for a model that loads."""
    cfg = qwen3(2)
    entries = builders.qwen3_dense(cfg, "bf16")
    bf16 = audit(builders.write_checkpoint(tmp_path / "bf16", cfg, entries), context=1024)
    cfg32 = {**cfg, "torch_dtype": "float32"}
    f32 = audit(builders.write_checkpoint(tmp_path / "f32", cfg32, [(n, "F32", s) for n, _, s in entries]), context=1024)
    assert (f32.weights_per_token, f32.kv_per_token, f32.fit.weights) == (bf16.weights_per_token, bf16.kv_per_token, bf16.fit.weights)
    assert any("bfloat16" in note and "float32" in note for note in f32.options.notes), f32.options.notes
    assert f32.bytes_on_disk > 1.9 * bf16.bytes_on_disk  # the files are what they are
