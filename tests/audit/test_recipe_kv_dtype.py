"""`audit --recipe` with every KV cache dtype vLLM takes that has a known width: a recipe's `--kv-cache-dtype fp8_inc`
(vLLM's CacheDType, 1 byte) sized the fit instead of failing as if the user had typed a wrong option; a width the
audit does not know names the recipe it came from."""

from __future__ import annotations

import pytest

from sparkdoctor.audit import AuditOptions, run_audit
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.fromrecipe import recipe_settings
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


def test_an_unsized_dtype_names_the_recipe_it_came_from(tmp_path, dense):
    with pytest.raises(AuditError, match=r"--kv-cache-dtype turboquant_k8v4 \(recipe kv \(--kv-cache-dtype turboquant_k8v4\)\): not one of"):
        _audit(_recipe(tmp_path, dense, "turboquant_k8v4"), dense)


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
