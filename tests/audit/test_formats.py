"""Each storage format the audit knows, read from a checkpoint laid out the way its exporter writes it."""

from __future__ import annotations

import pytest

from sparkdoctor.audit.bytemodel import expert_fraction
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from tests.audit import builders


def audit(folder, **kw):
    kw.setdefault("gpu", "gb10")
    return run_audit(AuditOptions(str(folder), **kw))


def group(a, key):
    return next(g for g in a.groups if g.key == key)


@pytest.mark.parametrize("quant, fmt, bytes_per_weight", [
    ("awq", "INT4 AWQ g128", 0.5 + 2 / 128 + 0.5 / 128),  # 4 bits + an F16 scale and a 4-bit zero per 128
    ("gptq", "INT4 GPTQ g128", 0.5 + 2 / 128 + 0.5 / 128),  # + g_idx, 4 bytes per input row
    ("fp8-block", "FP8 block 128x128", 1 + 4 / (128 * 128)),
])
def test_integer_and_block_formats(qwen3_8b, quant, fmt, bytes_per_weight):
    a = audit(qwen3_8b[quant], context=0)
    mlp = group(a, "mlp")
    assert list(mlp.formats) == [fmt]
    assert mlp.params == 36 * 3 * 4096 * 12288
    assert mlp.bytes_stored / mlp.params == pytest.approx(bytes_per_weight, rel=0.01)
    assert a.disagreements == []  # lm_head BF16 is what vLLM expects of GPTQ/AWQ/FP8 checkpoints


def test_gpt_oss_mxfp4_experts_and_sliding_window_kv(gpt_oss):
    a = audit(gpt_oss, context=8192)
    experts = group(a, "experts")
    assert list(experts.formats) == ["MXFP4"]
    # 32 E2M1 + one E8M0 per block of 32: 17 bytes per 32 weights; biases in BF16
    blocks = 24 * 32 * (2 * 2880 + 2880) * 2880
    assert experts.params == blocks + 24 * 32 * (2 * 2880 + 2880)
    assert experts.bytes_read == pytest.approx(experts.bytes_stored * 4 / 32)
    assert sum(g.params for g in a.groups) == pytest.approx(20.9e9, rel=0.01)  # "gpt-oss-20b: 21B parameters"
    assert a.active_params == pytest.approx(3.6e9, rel=0.03)  # "3.6B active"
    per_position = 8 * 64 * 2 * 2
    assert a.kv_per_token == 12 * 8192 * per_position + 12 * 128 * per_position  # full layers + 128-token windows
    assert a.disagreements == []


def test_the_moe_fraction_is_top_k_of_e_and_grows_with_the_batch():
    from sparkdoctor.audit.modelconfig import ModelShape

    shape = ModelShape("x", 1, 1, 1, 1, 1, None, False, 2, None, experts=512, experts_per_token=10)
    assert expert_fraction(shape) == pytest.approx(10 / 512)
    assert expert_fraction(shape, 8) == pytest.approx(1 - (1 - 10 / 512) ** 8)
    assert expert_fraction(shape, 10_000) == pytest.approx(1.0)


def test_batch_ceiling_reads_more_experts_but_gains_throughput(qwen36, qwen36_audit):
    from sparkdoctor.audit.checkpoint import load_checkpoint

    b8 = run_audit(AuditOptions(str(qwen36), context=512, kv_cache_dtype="fp8", gpu="gb10", batch=8), checkpoint=load_checkpoint(qwen36))
    assert b8.step_bytes > qwen36_audit.step_bytes
    assert 8 * b8.bandwidth * 1e9 / b8.step_bytes > 3 * qwen36_audit.ceiling


def test_tied_embeddings_read_the_whole_matrix(tmp_path):
    cfg = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1,
           "intermediate_size": 128, "vocab_size": 1000, "tie_word_embeddings": True, "max_position_embeddings": 256}
    entries = [("model.embed_tokens.weight", "BF16", [1000, 64])] + builders.linear("model.layers.0.mlp.up_proj", 128, 64, "bf16")
    a = audit(builders.write_checkpoint(tmp_path / "tied", cfg, entries), context=0)
    lm = group(a, "lm_head")
    assert lm.bytes_stored == 0 and lm.bytes_read == 1000 * 64 * 2
    assert group(a, "embeddings").bytes_read == 64 * 2


def test_compressed_tensors_ignore_list_that_misses_a_bf16_layer_and_a_stale_entry(tmp_path):
    cfg = builders.load_config("qwen3-8b", "nvfp4")
    cfg.update(num_hidden_layers=2)
    cfg["quantization_config"]["ignore"] = ["lm_head", "model.layers.9.mlp.down_proj"]
    entries = [e for e in builders.qwen3_dense(cfg, "nvfp4") if not e[0].startswith("model.layers.1.mlp.down_proj")]
    entries += builders.linear("model.layers.1.mlp.down_proj", 4096, 12288, "bf16")
    a = audit(builders.write_checkpoint(tmp_path / "ct", cfg, entries), context=0)
    found = {(d.kind, d.module) for d in a.disagreements}
    assert found == {("stored-unquantized-not-excluded", "model.layers.1.mlp.down_proj"), ("stale-ignore-entry", "model.layers.9.mlp.down_proj")}


def test_an_excluded_module_with_quantized_tensors(tmp_path):
    cfg = builders.load_config("qwen3-8b", "nvfp4")
    cfg.update(num_hidden_layers=1)
    cfg["quantization_config"]["ignore"] = ["lm_head", "re:.*self_attn.*"]
    a = audit(builders.write_checkpoint(tmp_path / "ex", cfg, builders.qwen3_dense(cfg, "nvfp4")), context=0)
    assert {(d.kind, d.module, d.count) for d in a.disagreements} == {
        ("excluded-but-quantized", "model.layers.0.self_attn.k_proj", 1), ("excluded-but-quantized", "model.layers.0.self_attn.o_proj", 1),
        ("excluded-but-quantized", "model.layers.0.self_attn.q_proj", 1), ("excluded-but-quantized", "model.layers.0.self_attn.v_proj", 1)}


def test_bandwidth_gpu_and_kv_dtype_options(qwen3_8b):
    base = audit(qwen3_8b["nvfp4"], context=1000)
    h100 = audit(qwen3_8b["nvfp4"], context=1000, gpu="NVIDIA H100 80GB HBM3")
    assert h100.bandwidth == 3350 and h100.ceiling == pytest.approx(base.ceiling * 3350 / 273)
    given = audit(qwen3_8b["nvfp4"], context=1000, bandwidth=100, gpu="h200")
    assert (given.bandwidth, given.bandwidth_source) == (100, "--bandwidth")
    fp8 = audit(qwen3_8b["nvfp4"], context=1000, kv_cache_dtype="fp8")
    assert base.kv_per_token == 2 * fp8.kv_per_token == 1000 * 36 * 2 * 8 * 128 * 2


def test_fit_counts_weights_and_kv_at_max_model_len_times_seqs(qwen3_8b):
    a = audit(qwen3_8b["nvfp4"], context=0, max_model_len=32768, max_num_seqs=4)
    assert a.fit.kv_cache == 4 * 32768 * 36 * 2 * 8 * 128 * 2 and a.fit.fits
    big = audit(qwen3_8b["nvfp4"], context=0, max_model_len=40960, max_num_seqs=64)
    assert not big.fit.fits
    assert audit(qwen3_8b["nvfp4"], context=0, memory_gib=6).fit.fits is False


@pytest.mark.parametrize("kw, message", [
    ({"gpu": "tpu-v5"}, "--gpu tpu-v5: not a known GPU"),
    ({"bandwidth": 0}, "--bandwidth 0"),
    ({"kv_cache_dtype": "int3"}, "--kv-cache-dtype int3"),
    ({"batch": 0}, "--batch 0"),
    ({"context": -1}, "--context -1"),
    ({"gpu_memory_utilization": 1.5}, "--gpu-memory-utilization 1.5"),
])
def test_bad_options_are_one_line(qwen3_8b, kw, message):
    with pytest.raises(AuditError, match=message.replace("-", r"\-")):
        audit(qwen3_8b["nvfp4"], **kw)


def test_ceiling_for_and_the_bench_roofline_line(qwen3_8b):
    from sparkdoctor.audit.roofline import ceiling_for, roofline_line

    c = ceiling_for(qwen3_8b["nvfp4a16"], context=512, kv_cache_dtype="fp8", gpu="gb10")
    assert c["ceiling_tok_s"] == pytest.approx(52.6, abs=0.1) and c["bandwidth_gbs"] == 273
    assert roofline_line(c, 40.85) == "roofline: 40.9 tok/s is 78% of the 52.6 tok/s ceiling (5.19 GB per token at 273 GB/s, 512 tokens of context)"


def test_mla_latent_kv_and_nextn_layers_past_the_decoder_are_mtp(tmp_path):
    cfg = {"model_type": "deepseek_v3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100,
           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_nextn_predict_layers": 1, "n_routed_experts": 8, "num_experts_per_tok": 2}
    entries = [("model.embed_tokens.weight", "BF16", [100, 64])]
    for layer in range(3):  # layer 2 is the nextn (MTP) layer
        entries += builders.linear(f"model.layers.{layer}.self_attn.kv_a_proj_with_mqa", 576, 64, "fp8-block")
        entries += builders.linear(f"model.layers.{layer}.mlp.experts.0.up_proj", 128, 64, "fp8-block")
    a = audit(builders.write_checkpoint(tmp_path / "ds", cfg, entries), context=1000, kv_cache_dtype="fp8")
    assert a.kv_per_token == 2 * 1000 * 576 * 1
    assert group(a, "mtp").modules == 2 and group(a, "mtp").bytes_read == 0
    assert a.shape.mtp_layers == 1


def test_mamba_layers_read_their_state_not_a_kv_cache(tmp_path):
    cfg = {"model_type": "nemotron_h", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 16, "vocab_size": 100, "hybrid_override_pattern": "M-M*", "mamba_num_heads": 8, "mamba_head_dim": 16,
           "ssm_state_size": 32}
    entries = [("backbone.embeddings.weight", "BF16", [100, 64])] + builders.linear("backbone.layers.0.mixer.in_proj", 256, 64, "bf16") \
        + builders.linear("backbone.layers.3.mixer.q_proj", 64, 64, "bf16") + builders.linear("backbone.layers.1.mixer.up_proj", 128, 64, "bf16")
    a = audit(builders.write_checkpoint(tmp_path / "nh", cfg, entries), context=100)
    assert a.shape.layer_kinds == ["mamba", "mlp", "mamba", "attention"]
    assert a.state_per_token == 2 * 8 * 16 * 32 * 2
    assert a.kv_per_token == 1 * 100 * 2 * 2 * 16 * 2
    assert {g.key for g in a.groups} == {"embeddings", "mixer", "attention", "mlp"}


def test_modelopt_fp8_kv_scales_are_pointed_out_when_the_kv_dtype_is_auto(tmp_path):
    cfg = builders.load_config("qwen3-8b")
    cfg.update(num_hidden_layers=1)
    hf_quant = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    folder = builders.write_checkpoint(tmp_path / "mo", cfg, builders.qwen3_dense(cfg, "modelopt-nvfp4"), extra={"hf_quant_config.json": hf_quant})
    a = audit(folder, context=100)
    assert "hf_quant_config.json carries FP8 KV scales" in a.kv_dtype
    assert group(a, "mlp").formats.keys() == {"NVFP4"} and a.disagreements == []


def test_a_checkpoints_pattern_python_warns_about_is_read_as_vllm_reads_it_without_a_warning():
    """`re:` patterns come from someone's config.json; a FutureWarning about one must not land in the audit's output."""
    import warnings

    from sparkdoctor.audit.quantconfig import matches

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert matches("re:.*layers[[]0", "model.layers[0", "exact-or-re")
        assert not matches("re:.*layers[[]0", "model.layers.0", "exact-or-re")
