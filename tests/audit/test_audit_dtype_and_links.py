"""audit as a new user and an attacker meet it (docs/evidence/revrecipe3-2026-12-01.md):

- `audit --recipe` sized the weights and an `auto` KV cache at the checkpoint's dtype whatever the recipe's `--dtype`
  (the memory verdict read it);
- a shard or config.json linked into /proc was read (8 bytes of /proc/self/environ; /proc/kmsg's read waits for the
  kernel). Links inside the Hugging Face cache (snapshots -> ../../blobs/) are still followed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkdoctor import recipes
from sparkdoctor.audit.checkpoint import load_checkpoint
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.fromrecipe import recipe_settings
from sparkdoctor.audit.roofline import AuditOptions, run_audit
from sparkdoctor.bench.model_identity import identity
from tests.audit.test_checkpoint import tiny
from tests.hostile import hang_guard

EUGR = 'recipe_version: "1"\nname: r\ncontainer: vllm/vllm-openai:latest\ncommand: |\n  {command}\n'


# ---- 6. audit --recipe reads the recipe's --dtype -----------------------------------------------------------------
def _dtype_recipe(tmp_path: Path, flags: str) -> recipes.Recipe:
    folder = tiny(tmp_path / "m")
    path = tmp_path / "r.yaml"
    path.write_text(EUGR.format(command=f"vllm serve {folder} {flags}"))
    return recipes.load(path)


def _audit(tmp_path: Path, recipe: recipes.Recipe):
    values, sources = recipe_settings(recipe, {})
    return run_audit(AuditOptions(str(tmp_path / "m"), gpu="gb10", sources=sources, **values))


def test_audit_recipe_sizes_the_weights_and_kv_cache_at_the_recipes_dtype(tmp_path):
    plain = _audit(tmp_path, _dtype_recipe(tmp_path, ""))
    wide = _audit(tmp_path, _dtype_recipe(tmp_path, "--dtype float32"))
    assert wide.weights_per_token == 2 * plain.weights_per_token  # a bf16 checkpoint served in float32
    assert wide.kv_dtype_bytes == 4 and plain.kv_dtype_bytes == 2
    assert wide.fit.weights == 2 * plain.fit.weights
    assert wide.options.sources["dtype"] == "recipe r (--dtype float32)"
    half = _audit(tmp_path, _dtype_recipe(tmp_path, "--dtype=half"))
    assert half.weights_per_token == plain.weights_per_token


def test_a_dtype_vllm_refuses_is_one_line(tmp_path):
    with pytest.raises(AuditError, match=r"--dtype 'fp8' is not a dtype vLLM takes"):
        recipe_settings(_dtype_recipe(tmp_path, "--dtype fp8"), {})


# ---- 7. links into /proc are never read ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_checkpoint_file_linked_into_proc_is_refused_without_reading_it(tmp_path, name, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    folder = tiny(tmp_path / "m")
    (folder / name).unlink()
    (folder / name).symlink_to("/proc/self/environ")
    with hang_guard(30):
        with pytest.raises(AuditError) as info:
            load_checkpoint(folder)
    assert "is a kernel file" in str(info.value) and "hunter2" not in str(info.value), str(info.value)
    assert identity(folder) is None  # bench's model identity does not read it either


def test_a_shard_linked_into_the_hub_caches_blobs_is_still_read(tmp_path):
    """Links are followed: the Hugging Face cache links every snapshot file to ../../blobs/."""
    folder = tiny(tmp_path / "snapshots" / "abc")
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (folder / "model.safetensors").rename(blobs / "f00d")
    (folder / "model.safetensors").symlink_to(Path("..") / ".." / "blobs" / "f00d")
    assert load_checkpoint(folder).tensors
