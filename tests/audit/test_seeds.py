"""The seeds' arithmetic and published figures, reproduced from real-shaped headers (tests/audit/builders.py).

Where a public figure disagrees with the headers, the test pins down which assumption differs instead of
forcing a match. The seeds write MB/GB for what are MiB/GiB: lm_head 248320 x 2048 x 2 bytes is 970 MiB,
their "970 MB".
"""

from __future__ import annotations

import pytest

from sparkdoctor.audit.roofline import AuditOptions, run_audit

GIB, MIB = 2**30, 2**20
GB10 = 273e9


def audit(folder, **kw):
    kw.setdefault("gpu", "gb10")
    return run_audit(AuditOptions(str(folder), **kw))


def group(a, key):
    return next(g for g in a.groups if g.key == key)


# ---- part 32: Qwen3-8B dense, FP8 vs NVFP4 W4A4 vs NVFP4 W4A16 (kv-cache fp8, ~400 tokens) ----------------
MEASURED_PART32 = {"fp8-dynamic": 25.65, "nvfp4": 38.59, "nvfp4a16": 40.85}
LINEAR_PARAMS = 36 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12288)  # q,o + k,v + gate,up,down
LM_HEAD_BYTES = 151936 * 4096 * 2


def test_qwen3_8b_bf16_has_the_published_parameter_count(qwen3_8b):
    a = audit(qwen3_8b[None], context=0)
    assert sum(g.params for g in a.groups) == 8_190_735_360  # Qwen/Qwen3-8B's safetensors total
    assert a.unquantized_share == 1.0


def test_qwen3_8b_fp8_reads_one_byte_per_linear_weight_plus_the_bf16_lm_head(qwen3_8b):
    a = audit(qwen3_8b["fp8-dynamic"], context=512, kv_cache_dtype="fp8")
    assert {g.key: next(iter(g.formats)) for g in a.groups if g.key in ("attention", "mlp")} == {"attention": "FP8 per-channel", "mlp": "FP8 per-channel"}
    assert a.weights_per_token == pytest.approx(LINEAR_PARAMS + LM_HEAD_BYTES, rel=1e-3)
    assert a.kv_per_token == 512 * 36 * 2 * 8 * 128 * 1


@pytest.mark.parametrize("quant", ["nvfp4", "nvfp4a16"])
def test_qwen3_8b_nvfp4_reads_4_5_bits_per_linear_weight(qwen3_8b, quant):
    a = audit(qwen3_8b[quant], context=512, kv_cache_dtype="fp8")
    assert group(a, "mlp").formats.keys() == {"NVFP4"}
    # 4 bits + one FP8 scale per 16 = 0.5625 bytes per weight, plus the per-tensor global scales
    assert a.weights_per_token == pytest.approx(LINEAR_PARAMS * 0.5625 + LM_HEAD_BYTES, rel=1e-3)
    assert group(a, "mlp").params == 36 * 3 * 4096 * 12288


def test_qwen3_8b_measured_speeds_are_one_share_of_their_ceilings(qwen3_8b):
    """Part 32's three formats all run at ~73-78% of the ceiling: the format moves the ceiling, not the
    efficiency. The ~1.5x NVFP4-over-FP8 win is the byte ratio."""
    ceilings = {q: audit(qwen3_8b[q], context=512, kv_cache_dtype="fp8").ceiling for q in MEASURED_PART32}
    shares = {q: MEASURED_PART32[q] / ceilings[q] for q in MEASURED_PART32}
    assert ceilings["fp8-dynamic"] == pytest.approx(33.0, abs=0.3)
    assert ceilings["nvfp4"] == pytest.approx(52.6, abs=0.3)
    assert all(0.70 < s < 0.80 for s in shares.values()), shares
    assert ceilings["nvfp4"] / ceilings["fp8-dynamic"] == pytest.approx(MEASURED_PART32["nvfp4a16"] / MEASURED_PART32["fp8-dynamic"], rel=0.05)


# ---- part 25 / 32 / 33: Qwen3.6-35B-A3B NVFP4, hybrid MoE with BF16 GDN layers --------------------------
def test_qwen36_bf16_layers_are_the_seeds_forward_hook_table(qwen36_audit):
    a = qwen36_audit
    assert group(a, "lm_head").bytes_read == 248320 * 2048 * 2 == 970 * MIB  # "lm_head 970 MB"
    assert group(a, "router").bytes_read == pytest.approx(40 * MIB, rel=0.01)  # "mlp.gate 40 MB" (+ shared-expert gates)
    out_proj = 30 * 2048 * 4096 * 2
    assert out_proj == 480 * MIB  # "linear_attn.out_proj 480 MB"
    in_proj_qkvz = 30 * (8192 + 4096) * 2048 * 2  # qkv + z: vLLM's fused in_proj_qkvz [12288, 2048]
    assert in_proj_qkvz / GIB == pytest.approx(1.44, rel=0.03)  # "1.44 GB": 1.41 GiB from the shapes
    assert group(a, "mixer").formats.keys() <= {"BF16", "F32"}
    # "about 2.9 GB of BF16 weights read per single-stream decode token"
    assert a.read_by_format["BF16"] / GIB == pytest.approx(2.9, rel=0.02)


def test_qwen36_the_seeds_1_7_gb_of_nvfp4_counts_the_bf16_parameters_twice(qwen36_audit):
    """Part 25's "1.7 GB of NVFP4 for the active 3B" is all ~2.95 B active parameters at 4.5 bits; 1.5 B of them
    are the BF16 layers already counted in the 2.9 GB. The headers give 0.79 GB of NVFP4 per token."""
    a = qwen36_audit
    assert a.active_params == pytest.approx(2.95e9, rel=0.01)
    assert a.active_params * 0.5625 == pytest.approx(1.7e9, rel=0.03)
    assert a.read_by_format["NVFP4"] == pytest.approx(0.79e9, rel=0.01)
    assert group(a, "experts").note.startswith("top-8 of 256: expected value for uniform routing")


def test_qwen36_measured_66_9_is_above_part25s_ceiling_but_under_the_headers(qwen36_audit):
    """Part 33 measured 66.9 tok/s, above part 25's ~60 tok/s ceiling (273 / (2.9 + 1.7) GB): that ceiling
    double-counts. From the headers (weights + fp8 KV at 512 tokens + GDN state) the ceiling is ~69 tok/s."""
    part25_ceiling = GB10 / ((2.9 + 1.7) * 1e9)
    assert part25_ceiling == pytest.approx(59.3, abs=0.1) and part25_ceiling < 66.9
    assert qwen36_audit.ceiling == pytest.approx(69.3, abs=0.5)
    assert 0.9 < 66.9 / qwen36_audit.ceiling < 1.0
    assert qwen36_audit.unquantized_share == pytest.approx(0.796, abs=0.005)
    # part 33's "22 GB of weights resident": the headers less the MTP head and the vision tower
    resident = sum(g.bytes_stored for g in qwen36_audit.groups if g.key not in ("mtp", "vision"))
    assert resident / 1e9 == pytest.approx(22, rel=0.03)


# ---- Avarok: Qwen3-Next-80B-A3B NVFP4 (ModelOpt), "~46 tok/s ceiling" -------------------------------------
def test_qwen3_next_header_set_is_the_published_model(qwen3_next_audit):
    a = qwen3_next_audit
    backbone = sum(g.params for g in a.groups if g.key != "mtp")
    assert backbone == 79_674_391_296  # published parameter total of the Qwen3-Next-80B-A3B architecture
    assert a.active_params + 311_164_928 - 2048 == 3_874_929_408  # published "active" counts the whole embedding


def test_avaroks_46_tok_s_is_3b_active_parameters_at_bf16(qwen3_next_audit):
    """~46 tok/s = 273 GB/s over 3 B parameters x 2 bytes: every active weight read as BF16. The NVFP4
    checkpoint reads 4.3 GB per token (experts and attention in 4.5 bits, GDN/lm_head/routers BF16), a
    ~63 tok/s ceiling; Avarok's own non-MTP 47.1 tok/s already exceeds their 46."""
    assert GB10 / (3e9 * 2) == pytest.approx(46, abs=0.6)
    a = qwen3_next_audit
    assert a.weights_per_token / 1e9 == pytest.approx(4.27, abs=0.02)
    assert a.ceiling == pytest.approx(63.2, abs=0.5)
    assert 47.1 < a.ceiling


def test_qwen3_next_mtp_exclusion_bug_is_reported(qwen3_next_audit):
    """ModelOpt's `mtp.layers.0*` does not match the BF16 `mtp.fc` (Avarok fix_mtp_nvfp4_exclusion.py)."""
    found = [(d.kind, d.module, d.source) for d in qwen3_next_audit.disagreements]
    assert found == [("stored-unquantized-not-excluded", "mtp.fc", "hf_quant_config.json")]
    assert group(qwen3_next_audit, "mtp").bytes_read == 0


def test_mtp_is_counted_when_asked(qwen3_next, qwen3_next_checkpoint):
    a = run_audit(AuditOptions(str(qwen3_next), context=512, include_mtp=True, gpu="gb10"), checkpoint=qwen3_next_checkpoint)
    assert group(a, "mtp").bytes_read == group(a, "mtp").bytes_stored > 3e9
