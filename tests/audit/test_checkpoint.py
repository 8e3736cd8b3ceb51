"""Finding the checkpoint (folders, the Hugging Face cache) and the folder-level lies: shards, index, config."""

from __future__ import annotations

import json

import pytest

from sparkdoctor.audit.checkpoint import load_checkpoint
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.locate import resolve_model
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from tests.audit import builders

TINY = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 2, "vocab_size": 100}


def tiny(folder, shard_bytes=10**12, config=None):
    entries = [("model.embed_tokens.weight", "BF16", [100, 64])] + builders.linear("model.layers.0.self_attn.q_proj", 64, 64, "bf16") \
        + builders.linear("model.layers.0.mlp.up_proj", 128, 64, "bf16") + [("lm_head.weight", "BF16", [100, 64])]
    return builders.write_checkpoint(folder, config or TINY, entries, shard_bytes=shard_bytes)


def one_line(fn, match):
    with pytest.raises(AuditError) as info:
        fn()
    assert "\n" not in str(info.value) and match in str(info.value), str(info.value)
    return str(info.value)


def test_sharded_checkpoint_reads_every_shard_through_the_index(tmp_path):
    folder = tiny(tmp_path / "m", shard_bytes=20_000)
    ck = load_checkpoint(folder)
    assert len(ck.shards) == 4 and len(ck.tensors) == 4
    assert ck.bytes_read == sum(8 + int.from_bytes(p.read_bytes()[:8], "little") for p in ck.shards)


def test_index_naming_a_missing_shard(tmp_path):
    folder = tiny(tmp_path / "m", shard_bytes=20_000)
    (folder / "model-00002-of-00004.safetensors").unlink()
    one_line(lambda: load_checkpoint(folder), "weight_map names shard 'model-00002-of-00004.safetensors', which is not in the folder")


def test_index_disagreeing_with_the_shards(tmp_path):
    folder = tiny(tmp_path / "m", shard_bytes=20_000)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["lm_head.weight"] = "model-00001-of-00004.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    one_line(lambda: load_checkpoint(folder), "weight_map puts 'lm_head.weight' in model-00001-of-00004.safetensors but no shard holds it")


def test_index_with_a_path_outside_the_folder(tmp_path):
    folder = tiny(tmp_path / "m", shard_bytes=20_000)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../x.safetensors"}}))
    one_line(lambda: load_checkpoint(folder), "outside the folder")


def test_a_tensor_in_two_shards(tmp_path):
    folder = tiny(tmp_path / "m")
    builders.write_safetensors(folder / "extra.safetensors", [("lm_head.weight", "BF16", [100, 64])])
    one_line(lambda: load_checkpoint(folder), "tensor 'lm_head.weight' is also in")


def test_no_safetensors_and_no_config(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(json.dumps(TINY))
    one_line(lambda: load_checkpoint(tmp_path / "empty"), "no *.safetensors files")
    (tmp_path / "noconf").mkdir()
    one_line(lambda: load_checkpoint(tmp_path / "noconf"), "config.json: missing")


@pytest.mark.parametrize("drop, field", [("num_hidden_layers", "num_hidden_layers"), ("hidden_size", "hidden_size"), ("num_attention_heads", "num_attention_heads")])
def test_a_config_without_the_fields(tmp_path, drop, field):
    folder = tiny(tmp_path / "m", config={k: v for k, v in TINY.items() if k != drop})
    message = one_line(lambda: run_audit(AuditOptions(str(folder), gpu="gb10")), f"no {field}")
    assert str(folder / "config.json") in message


def test_a_config_with_experts_but_no_top_k_and_a_bad_value(tmp_path):
    folder = tiny(tmp_path / "m", config={**TINY, "num_experts": 8})
    one_line(lambda: run_audit(AuditOptions(str(folder), gpu="gb10")), "8 experts but no num_experts_per_tok")
    folder = tiny(tmp_path / "n", config={**TINY, "num_hidden_layers": "two"})
    one_line(lambda: run_audit(AuditOptions(str(folder), gpu="gb10")), "num_hidden_layers must be a non-negative integer")


def test_a_config_that_is_not_json(tmp_path):
    folder = tiny(tmp_path / "m")
    (folder / "config.json").write_text("{oops")
    one_line(lambda: load_checkpoint(folder), "config.json: not valid JSON")


def test_a_quantization_config_with_a_bad_ignore_list(tmp_path):
    folder = tiny(tmp_path / "m", config={**TINY, "quantization_config": {"quant_method": "compressed-tensors", "ignore": "lm_head"}})
    one_line(lambda: run_audit(AuditOptions(str(folder), gpu="gb10")), "quantization_config.ignore: must be a list of strings")


# ---- the Hugging Face cache ---------------------------------------------------------------------------
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    cache = tmp_path / "hf" / "hub"
    model = cache / "models--Qwen--Qwen3-8B"
    blobs = model / "blobs"
    blobs.mkdir(parents=True)
    staged = tiny(tmp_path / "staged")
    snapshot = model / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for f in staged.iterdir():  # the real layout: snapshot files are symlinks into blobs/
        blob = blobs / f"blob-{f.name}"
        f.rename(blob)
        (snapshot / f.name).symlink_to(f"../../blobs/{blob.name}")
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text(COMMIT)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    return snapshot


@pytest.mark.parametrize("ref", ["Qwen/Qwen3-8B", "Qwen/Qwen3-8B@main", f"Qwen/Qwen3-8B@{COMMIT}", COMMIT])
def test_a_model_in_the_hf_cache_by_id_revision_or_snapshot(hub, ref):
    assert resolve_model(ref) == hub
    assert run_audit(AuditOptions(ref, gpu="gb10", context=0)).weights_per_token > 0


def test_hf_hub_cache_wins_over_hf_home(hub, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    one_line(lambda: resolve_model("Qwen/Qwen3-8B"), "audit never downloads")


@pytest.mark.parametrize("ref, match", [
    ("Qwen/Qwen3-9B", "neither a folder nor a model in the Hugging Face cache"),
    ("Qwen/Qwen3-8B@v2", "no ref 'v2'"),
    ("f" * 40, "no snapshot with that id"),
    ("not a model", "no such folder"),
    ("", "MODEL is empty"),
])
def test_what_is_not_in_the_cache(hub, ref, match):
    one_line(lambda: resolve_model(ref), match)
