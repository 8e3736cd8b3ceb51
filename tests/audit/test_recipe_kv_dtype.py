"""`audit --recipe` with every KV cache dtype vLLM takes: a recipe's `--kv-cache-dtype fp8_inc` (vLLM's CacheDType,
1 byte) sized the fit instead of failing as if the user had typed a wrong option; TurboQuant and DeepSeek's MLA
records are sized as vLLM lays them out; a layout that does not fit the model names the recipe it came from and why."""

from __future__ import annotations

import pytest

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.fromrecipe import recipe_settings
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from sparkdoctor.recipes import load as load_recipe
from tests.audit import builders


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    return builders.qwen3_8b(tmp_path_factory.mktemp("m") / "qwen3-8b", None)


def _recipe(tmp_path, model, dtype):
    path = tmp_path / "r.toml"
    path.write_text(f'schema = 1\nname = "kv"\nmodel = "{model}"\n'
                    f'command = ["vllm", "serve", "{{model}}", "--kv_cache_dtype={dtype}", "--max-model-len", "4096"]\n')
    return load_recipe(str(path), {})


def _audit(recipe, model):
    values, sources = recipe_settings(recipe, {})
    return run_audit(AuditOptions(str(model), sources=sources, gpu="gb10", **values))


def test_fp8_inc_from_a_recipe_is_one_byte_as_fp8(tmp_path, dense):
    inc = _audit(_recipe(tmp_path, dense, "fp8_inc"), dense)
    fp8 = _audit(_recipe(tmp_path, dense, "fp8"), dense)
    assert inc.kv_dtype_bytes == 1.0 and inc.fit.kv_cache == fp8.fit.kv_cache and inc.kv_per_token == fp8.kv_per_token


def test_a_layout_that_does_not_fit_the_model_names_the_recipe_and_says_why(tmp_path, dense):
    """nvfp4_ds_mla is DeepSeek V3.2's MLA record: a model caching keys and values per head has no such layout."""
    with pytest.raises(AuditError, match=r"--kv-cache-dtype nvfp4_ds_mla \(recipe kv \(--kv-cache-dtype nvfp4_ds_mla\)\): "
                                         r"vLLM's nvfp4_ds_mla record \(352 bytes\) is laid out for DeepSeek V3.2's 576 latent "
                                         r"values a token; this model caches keys and values per head"):
        _audit(_recipe(tmp_path, dense, "nvfp4_ds_mla"), dense)


def test_turboquant_is_sized_as_vllm_packs_it(tmp_path, dense):
    """turboquant_* stopped `audit --recipe` with one line. Qwen3-8B: 36 layers, 8 KV heads of 128. k3v4_nc packs a
    head's key in ceil(128 x 3 / 8) + 2 = 50 bytes and its value in 64 + 4 = 68: 118 a head a token; vLLM keeps the
    first and last 2 layers at bf16 (8 x 2 x 128 x 2 = 4,096 bytes a token)."""
    tq = _audit(_recipe(tmp_path, dense, "turboquant_k3v4_nc"), dense)
    assert tq.kv_per_token == pytest.approx(4096 * (4 * 4096 + 32 * 8 * 118))
    assert tq.kv_dtype.startswith("turboquant_k3v4_nc (118 bytes a head a token; 4 boundary layers")


@pytest.mark.parametrize("name,slot", [("turboquant_k8v4", 128 + 64 + 4), ("turboquant_4bit_nc", 66 + 68),
                                       ("turboquant_k3v4_nc", 50 + 68), ("turboquant_3bit_nc", 50 + 52),
                                       ])
def test_turboquant_slots_follow_vllms_presets(name, slot):
    from sparkdoctor.audit.bytemodel import turboquant_slot

    assert turboquant_slot(name, 128) == slot
    assert turboquant_slot("turboquant_k3v4_nc", 256) == 98 + 132 and turboquant_slot("turboquant_k8v4", 66) == 104  # 103 rounded up to even


def test_deepseek_mla_records_are_their_bytes_a_token():
    """fp8_ds_mla was counted 1 byte a latent value (576 a token); vLLM's record is 656 (scales and a bf16 RoPE part)."""
    from sparkdoctor.audit.bytemodel import kv_bytes_per_token, kv_width
    from sparkdoctor.audit.modelconfig import ModelShape

    shape = ModelShape("deepseek_v32", 2, 7168, 128, 128, 192, None, False, 2, 163840, layer_kinds=["attention"] * 2,
                       kv_latent=576)
    for name, record in (("fp8_ds_mla", 656), ("nvfp4_ds_mla", 352)):
        width, how = kv_width(name, shape, 2.0)
        assert kv_bytes_per_token(shape, 1000, width) == pytest.approx(2 * 1000 * record) and f"{record} bytes" in how
    with pytest.raises(ValueError, match="packs each key/value head into one slot; this model caches an MLA latent"):
        kv_width("turboquant_k8v4", shape, 2.0)


@pytest.mark.parametrize("flags,size", [(["-tp", "2"], 2), (["--tensor_parallel_size=4"], 4), (["-tp", "1"], None), ([], None)])
def test_a_tensor_parallel_recipe_says_the_fit_is_one_gpu_holding_all(tmp_path, flags, size):
    """A sparkrun recipe for two Sparks (-tp 2): `audit --recipe` judged one GPU holding every weight, without a word."""
    from sparkdoctor.audit.fromrecipe import tensor_parallel_note

    path = tmp_path / "tp.toml"
    path.write_text('schema = 1\nname = "tp"\nmodel = "/m"\ncommand = ' + repr(["vllm", "serve", "{model}", *flags]).replace("'", '"') + "\n")
    note = tensor_parallel_note(load_recipe(str(path), {}))
    if size is None:
        assert note is None
    else:
        assert note is not None and f"runs tensor parallel {size}" in note and f"1/{size} of the weights" in note
