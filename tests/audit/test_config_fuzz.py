"""Any config.json a user can have — wrong types, zeros, missing or odd fields, a broken quantization_config —
is audited or refused in one line naming the file; never a traceback."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkdoctor.audit.checkpoint import load_checkpoint
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from tests.audit import builders

KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
        "tie_word_embeddings", "torch_dtype", "max_position_embeddings", "num_experts", "num_experts_per_tok", "n_shared_experts",
        "num_nextn_predict_layers", "layer_types", "hybrid_override_pattern", "full_attention_interval", "linear_num_value_heads",
        "linear_key_head_dim", "linear_value_head_dim", "sliding_window", "kv_lora_rank", "qk_rope_head_dim", "mamba_ssm_dtype",
        "text_config", "quantization_config", "mamba_num_heads", "ssm_state_size"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 70), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS + ["quant_method", "ignore", "config_groups", "targets", "weights"]), inner, max_size=4)), max_leaves=12)
quant = st.fixed_dictionaries({"quant_method": st.sampled_from(["compressed-tensors", "modelopt", "gptq", "awq", "mxfp4", "fp8", "x"])},
                              optional={"ignore": values, "config_groups": values, "modules_to_not_convert": values, "bits": values,
                                        "kv_cache_scheme": values, "weight_block_size": values})
BASE = {"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2}  # valid, so the overrides reach every reader
configs = st.dictionaries(st.sampled_from(KEYS), values, max_size=6).flatmap(
    lambda d: st.builds(lambda q, keep: {**(BASE if keep else {}), **d, **({"quantization_config": q} if q else {})},
                        st.one_of(st.none(), quant), st.booleans()))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(configs)
def test_fuzz_configs_are_audited_or_refused_in_one_line(tmp_path, config):
    folder = tmp_path / "m"
    if not (folder / "model.safetensors").exists():
        entries = [("model.embed_tokens.weight", "BF16", [10, 8])] + builders.linear("model.layers.0.mlp.experts.0.up_proj", 16, 16, "nvfp4") \
            + builders.linear("model.layers.1.linear_attn.in_proj_qkvz", 16, 8, "bf16") + [("lm_head.weight", "BF16", [10, 8])]
        builders.write_checkpoint(folder, {}, entries)
    (folder / "config.json").write_text(json.dumps(config))
    try:
        audit = run_audit(AuditOptions(str(folder), gpu="gb10", context=64), checkpoint=None)
    except AuditError as exc:
        assert "\n" not in str(exc)
    else:
        assert audit.ceiling > 0 and audit.bytes_per_token > 0
    assert load_checkpoint(folder).tensors  # the checkpoint itself is untouched by a bad config
