"""The KV cache dtypes sized from vLLM's own layouts: nvfp4, nvfp4_4over6, *_per_token_head (docs/evidence/auditkv-2026-12-02.md;
int4_per_token_head: docs/evidence/leftmisc-2026-12-02.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdoctor import recipes
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from sparkdoctor.memory.need import launch_need
from tests.audit.test_checkpoint import TINY, tiny

EUGR = 'recipe_version: "1"\nname: r\ncontainer: vllm/vllm-openai:latest\ncommand: |\n  vllm serve {model} {flags}\n'


def _audit(folder: Path, kv: str, **options: object):
    return run_audit(AuditOptions(str(folder), gpu="gb10", kv_cache_dtype=kv, context=1024, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize("head_dim", [32, 72, 128])
@pytest.mark.parametrize("name", ["nvfp4", "nvfp4_4over6"])
def test_nvfp4_caches_count_packed_fp4_values_and_their_fp8_block_scales(tmp_path, name, head_dim):
    """vLLM packs each key/value head as head_size // 2 bytes of e2m1 values + head_size // 16 fp8 scales
    (utils/torch_utils.py nvfp4_kv_cache_full_dim); nvfp4_4over6 is the same layout with other scale choices."""
    folder = tiny(tmp_path / "m", config={**TINY, "head_dim": head_dim})
    audit = _audit(folder, name)
    per_head = head_dim // 2 + head_dim // 16
    assert audit.kv_dtype_bytes == pytest.approx(per_head / head_dim)
    assert audit.kv_per_token == pytest.approx(1024 * 2 * 2 * per_head)  # context x (K, V) x 2 KV heads x packed head
    assert name in audit.kv_dtype and f"{per_head} bytes" in audit.kv_dtype


@pytest.mark.parametrize("name", ["int8_per_token_head", "fp8_per_token_head"])
def test_per_token_head_caches_count_one_float32_scale_per_head_per_token(tmp_path, name):
    """One byte a value (int8 / uint8) and, per token per KV head, a float32 scale for K and one for V, carved from the
    same allocation (v1/kv_cache_interface.py AttentionSpec.page_size_bytes)."""
    audit = _audit(tiny(tmp_path / "m"), name)  # head_dim 64 / 2 = 32
    assert audit.kv_dtype_bytes == pytest.approx((32 + 4) / 32)
    assert audit.kv_per_token == pytest.approx(1024 * 2 * 2 * (32 + 4))


@pytest.mark.parametrize("head_dim", [32, 64, 128])
def test_int4_per_token_head_counts_two_values_a_byte_and_one_float32_scale_per_head_per_token(tmp_path, head_dim):
    """vLLM's Triton backend (the one that takes it) lays each key and each value head out as head_size // 2 bytes of
    packed int4 values + one float32 scale (v1/attention/backends/triton_attn.py TritonAttentionBackend.customize_spec:
    content = (head_size // 2 + head_size_v // 2) x 1 byte + 2 x 4). Before, the audit refused it."""
    folder = tiny(tmp_path / "m", config={**TINY, "head_dim": head_dim})
    audit = _audit(folder, "int4_per_token_head")
    per_head = head_dim // 2 + 4
    assert audit.kv_dtype_bytes == pytest.approx(per_head / head_dim)
    assert audit.kv_per_token == pytest.approx(1024 * 2 * 2 * per_head)
    assert f"{per_head} bytes a key or value head a token" in audit.kv_dtype


def test_every_kv_cache_dtype_vllm_takes_is_sized():
    from sparkdoctor.audit.bytemodel import KV_DTYPES, VLLM_KV_DTYPES

    assert set(VLLM_KV_DTYPES) == set(KV_DTYPES)


@pytest.mark.parametrize("name", ["nvfp4", "int8_per_token_head", "int4_per_token_head"])
def test_a_per_head_layout_on_an_mla_latent_is_refused(tmp_path, name):
    folder = tiny(tmp_path / "m", config={**TINY, "kv_lora_rank": 16, "qk_rope_head_dim": 8})
    with pytest.raises(AuditError, match=f"--kv-cache-dtype {name}: .*MLA latent"):
        _audit(folder, name)


def test_the_memory_verdict_sizes_the_new_layouts_as_the_audit_does(tmp_path):
    folder = tiny(tmp_path / "m")
    for name, per_head in (("nvfp4", 16 + 2), ("fp8_per_token_head", 32 + 4)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(EUGR.format(model=folder, flags=f"--max-model-len 1024 --kv-cache-dtype {name}"))
        need = launch_need(recipes.load(path), folder, 128 * 2**30)
        assert need.kv_bytes_per_token == pytest.approx(2 * 2 * per_head)
        assert need.kv_bytes_per_token * 1024 == pytest.approx(_audit(folder, name).kv_per_token)
