"""dtype and cache-dtype names as vLLM's parser takes them (docs/evidence/revleft5-2026-12-01.md): exactly its choices,
case and all, in the audit, the memory verdict and the bench roofline alike; a cast tensor labelled as it is served."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sparkdoctor import recipes
from sparkdoctor.audit.checkpoint import load_checkpoint
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.fromrecipe import recipe_settings
from sparkdoctor.audit.modelconfig import read_shape
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from sparkdoctor.memory.need import launch_need
from tests.audit.test_checkpoint import tiny

EUGR = 'recipe_version: "1"\nname: r\ncontainer: vllm/vllm-openai:latest\ncommand: |\n  vllm serve {model} {flags}\n'


def _recipe(tmp_path: Path, flags: str) -> recipes.Recipe:
    folder = tiny(tmp_path / "m")
    path = tmp_path / "r.yaml"
    path.write_text(EUGR.format(model=folder, flags=flags))
    return recipes.load(path)


@pytest.mark.parametrize("name", ["FP8", "Auto", "BFLOAT16", "float32", "half"])
def test_a_kv_cache_dtype_vllm_refuses_is_refused(tmp_path, name):
    """vLLM 0.32's CacheDType (vllm/config/cache.py) is a Literal: argparse takes those names exactly, so `FP8` and
    `Auto` stop the server, and float32 and half are none of its cache dtypes."""
    with pytest.raises(AuditError, match=f"--kv-cache-dtype {name}.*vLLM refuses it"):
        run_audit(AuditOptions(str(tiny(tmp_path / "m")), gpu="gb10", kv_cache_dtype=name))
    with pytest.raises(AuditError, match=f"--kv-cache-dtype {name}.*vLLM refuses it"):
        launch_need(_recipe(tmp_path, f"--max-model-len 1024 --kv-cache-dtype {name}"), tmp_path / "m", 128 * 2**30)


def test_the_kv_cache_dtypes_vllm_takes_are_sized(tmp_path):
    folder = str(tiny(tmp_path / "m"))
    widths = {name: run_audit(AuditOptions(folder, gpu="gb10", kv_cache_dtype=name)).kv_dtype_bytes
              for name in ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")}
    assert widths == {"auto": 2, "float16": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


def test_the_memory_verdict_reads_dtype_as_the_audit_does(tmp_path):
    """One reader for --dtype (fromrecipe.recipe_settings): a value vLLM refuses stops both; a --config file's value is
    named as the file's, as the audit names it (the memory verdict re-read the flag and said the command gave it)."""
    with pytest.raises(AuditError, match="--dtype 'fp8' is not a dtype vLLM takes"):
        launch_need(_recipe(tmp_path, "--max-model-len 1024 --dtype fp8"), tmp_path / "m", 128 * 2**30)
    (tmp_path / "serve.yaml").write_text("dtype: float32\n")
    recipe = replace(_recipe(tmp_path, "--max-model-len 1024 --config serve.yaml"), container=None)  # a file read here
    need = launch_need(recipe, tmp_path / "m", 128 * 2**30)
    audit = recipe_settings(recipe, {})[1]["dtype"]
    assert need.settings["dtype"].source == audit == "recipe r (--config serve.yaml: dtype float32)"
    plain = launch_need(_recipe(tmp_path, "--max-model-len 1024"), tmp_path / "m", 128 * 2**30)
    assert need.kv_bytes_per_token == 2 * plain.kv_bytes_per_token and need.part("weights") == 2 * plain.part("weights")


def test_the_bench_roofline_sizes_at_the_recipes_dtype(tmp_path):
    """bench's ceiling was sized at --dtype auto whatever the recipe served: a float32 launch reads twice the bytes."""
    from types import SimpleNamespace

    from sparkdoctor.bench.roofline import achieved

    folder = str(tiny(tmp_path / "m"))
    sample = SimpleNamespace(prompt_tokens=100, output_tokens=20)
    m = SimpleNamespace(levels=[SimpleNamespace(concurrency=1, samples=[sample])], workload=SimpleNamespace(max_tokens=20, prompt_words=75))
    headline = {"concurrency": 1, "decode_tps_per_stream": 10.0, "source": "test"}
    plain = achieved(folder, None, m, headline, ["vllm", "serve", folder])
    wide = achieved(folder, None, m, headline, ["vllm", "serve", folder, "--dtype=float32"])
    assert plain["missing"] is None and wide["missing"] is None
    assert wide["bytes_per_token"] == pytest.approx(2 * plain["bytes_per_token"], abs=2) and wide["dtype"] == "float32"
    refused = achieved(folder, None, m, headline, ["vllm", "serve", folder, "--dtype", "fp8"])
    assert refused["ceiling_tok_s"] is None and "--dtype 'fp8' is not a dtype vLLM takes" in str(refused["missing"])


@pytest.mark.parametrize("dtype,label", [("auto", "BF16"), ("float32", "F32"), ("float", "F32"), ("half", "F16"),
                                         ("bfloat16", "BF16")])
def test_a_cast_tensor_is_labelled_as_it_is_served(tmp_path, dtype, label):
    """The byte table labelled a bf16 checkpoint served at --dtype float32 BF16 beside float32's bytes. The served label
    is `formats_served` (and `read_by_format`); `formats` stays the file's (docs/evidence/auditkv-2026-12-02.md)."""
    audit = run_audit(AuditOptions(str(tiny(tmp_path / "m")), gpu="gb10", dtype=dtype))
    assert {name for row in audit.groups for name in row.formats_served} == {label}
    assert {name for row in audit.groups for name in row.formats} == {"BF16"}
    assert set(audit.read_by_format) == {label}


@pytest.mark.parametrize("dtype", ["fp8", "FLOAT32", "int8"])
def test_a_dtype_vllm_refuses_is_refused_by_every_reader(tmp_path, dtype):
    """The audit's own entry (run_audit, ceiling_for) sized an unknown --dtype at the checkpoint's width; the recipe
    reader refused it. One rule (modelconfig.served_bytes) for all (docs/evidence/auditkv-2026-12-02.md)."""
    folder = tiny(tmp_path / "m")
    with pytest.raises(AuditError, match=f"--dtype '{dtype}' is not a dtype vLLM takes"):
        run_audit(AuditOptions(str(folder), gpu="gb10", dtype=dtype))
    with pytest.raises(AuditError, match=f"--dtype '{dtype}' is not a dtype vLLM takes"):
        read_shape(load_checkpoint(folder).config, folder / "config.json", served=True, serve_dtype=dtype)
    path = tmp_path / "r.yaml"
    path.write_text(EUGR.format(model=folder, flags=f"--max-model-len 1024 --dtype {dtype}"))
    with pytest.raises(AuditError, match=f"--dtype '{dtype}' is not a dtype vLLM takes"):
        launch_need(recipes.load(path), folder, 128 * 2**30)
