"""The healthy reference boxes: today's known-good GB10 stacks as Facts, for tests/test_healthy_stacks.py.

Each stack is what pip installs for it (the pins in its own METADATA, read from the registry; SGLang's in STACKS: vLLM 0.33.0 pins
torch==2.14.0, flashinfer-python==0.7.2.post1, nvidia-cutlass-dsl[cu13]==4.8.0; vLLM 0.32.0 pins torch==2.13.0,
flashinfer-python==0.7.0.post1, nvidia-cutlass-dsl[cu13]==4.8.0; torch 2.14.0 pins triton~=3.8.0, 2.13.0
triton==3.7.1; and the kernel wheels `vllm download-kernels` installs, since vLLM 0.32 no longer pins flashinfer-cubin:
flashinfer-cubin at FlashInfer's version, flashinfer-jit-cache "+cu130" and its providers) on the GB10
baseline of tests/gb10.py, with the capabilities the capability probe reads from those releases' own files
(tests/data/facts/healthy/capabilities-*.json, written by capture.py there).

Variants: no recipe (plain `check`); a recipe serving a model on one box (no ConnectX-7 link up); a 2-node
recipe (TP=2 across two boxes: the ConnectX-7 twin link up, as on the baseline host).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkdoctor.facts import Facts
from tests.container.host_fixtures import host_health
from tests.gb10 import gb10_facts

CAPTURED = Path(__file__).resolve().parent / "data" / "facts" / "healthy"

_CUTEDSL_48 = {"nvidia-cutlass-dsl": "4.8.0", "nvidia-cutlass-dsl-libs-base": "4.8.0", "nvidia-cutlass-dsl-libs-core": "4.8.0",
               "nvidia-cutlass-dsl-libs-cu13": "4.8.0"}

# stack -> (packages as pip shows them; None: not installed, the capability capture it uses)
STACKS: dict[str, tuple[dict[str, str | None], str]] = {
    "vllm-0.33.0": ({"torch": "2.14.0+cu130", "triton": "3.8.0", "vllm": "0.33.0", "flashinfer-python": "0.7.2.post1",
                     "flashinfer-cubin": None, **_CUTEDSL_48}, "vllm-0.33.0"),
    "vllm-0.32.0": ({"torch": "2.13.0+cu130", "triton": "3.7.1", "vllm": "0.32.0", "flashinfer-python": "0.7.0.post1",
                     "flashinfer-cubin": None, **_CUTEDSL_48}, "vllm-0.32.0"),
    # `pip install sglang==0.5.23` (the newest on PyPI, uploaded 2026-10-30): its METADATA pins torch==2.14.1,
    # flashinfer_python[cu13]==0.7.2, nvidia-cutlass-dsl[cu13]==4.8.0, sglang-kernel==0.4.10 (which pins torch==2.14.1 too);
    # torch 2.14.1 pins triton~=3.8.0 (3.8.0 the only 3.8 release). No `vllm download-kernels`: no flashinfer-cubin
    "sglang-0.5.23": ({"torch": "2.14.1+cu130", "triton": "3.8.0", "vllm": None, "sglang": "0.5.23", "sglang-kernel": "0.4.10",
                       "flashinfer-python": "0.7.2", "flashinfer-cubin": None, **_CUTEDSL_48}, "sglang-0.5.23"),
    # the newest release of each on the registry on 2026-12-01, upgraded past vLLM 0.33.0's exact pins (torch==2.14.0,
    # flashinfer-python==0.7.2.post1, nvidia-cutlass-dsl[cu13]==4.8.0; pip warns, and installs them): torch 2.15.0+cu130 with
    # its triton~=3.9.0, FlashInfer 0.7.4 (asks nvidia-cutlass-dsl>=4.8.0), cutlass-dsl 4.8.1
    "newest-2026-12-01": ({"torch": "2.15.0+cu130", "triton": "3.9.0", "vllm": "0.33.0", "flashinfer-python": "0.7.4",
                           "flashinfer-cubin": None, **{k: "4.8.1" for k in _CUTEDSL_48}}, "newest-2026-12-01"),
    # the same on 2026-12-03: vLLM 0.34.0 (it pins torch==2.14.0, flashinfer-python==0.7.3 and nvidia-cutlass-dsl[cu13]==4.8.0,
    # but the registry has no FlashInfer 0.7.3, so pip cannot install it as pinned: users put FlashInfer 0.7.4 beside it)
    "newest-2026-12-03": ({"torch": "2.15.0+cu130", "triton": "3.9.0", "vllm": "0.34.0", "flashinfer-python": "0.7.4",
                           "flashinfer-cubin": None, **{k: "4.8.1" for k in _CUTEDSL_48}}, "newest-2026-12-03"),
    # `pip install nvidia-cutlass-dsl[cu13]==4.8.1` next to torch, nothing else of the serving stack
    "cutlass-dsl-4.8.1": ({"torch": "2.14.0+cu130", "triton": "3.8.0", "vllm": None, "flashinfer-python": None, "flashinfer-cubin": None,
                           **{k: "4.8.1" for k in _CUTEDSL_48}}, "cutlass-dsl-4.8.1"),
}

# model -> its Facts.recipe["model"] facts as `recipe check` reads them from the checkpoint's config.json
MODELS: dict[str, dict[str, Any]] = {
    # nvidia/Qwen3.6-35B-A3B-NVFP4: hybrid MoE, ModelOpt NVFP4 (hf_quant_config.json quant_algo NVFP4), head_dim 256
    "qwen3.6-35b-a3b-nvfp4": {"ref": "nvidia/Qwen3.6-35B-A3B-NVFP4", "hybrid": True, "linear_layers": 30, "mamba_layers": 0,
                              "max_position_embeddings": 262144, "max_model_len": 262144, "type": "qwen3_5_moe",
                              "architecture": "Qwen3_5MoeForConditionalGeneration", "quant": "nvfp4", "head_dim": 256},
    # openai/gpt-oss-120b: MXFP4 MoE (quantization_config.quant_method "mxfp4"), head_dim 64
    "gpt-oss-120b": {"ref": "openai/gpt-oss-120b", "hybrid": False, "linear_layers": 0, "mamba_layers": 0,
                     "max_position_embeddings": 131072, "max_model_len": 131072, "type": "gpt_oss",
                     "architecture": "GptOssForCausalLM", "quant": "mxfp4", "head_dim": 64},
}

# A single box: the baseline host without its ConnectX-7 link up (no sign of a second node)
_ONE_BOX = {**host_health("gb10-healthy"),
            "links": [link for link in host_health("gb10-healthy")["links"] if link.get("driver") != "mlx5_core"]}


def capabilities(capture: str) -> dict[str, Any]:
    return json.loads((CAPTURED / f"capabilities-{capture}.json").read_text())["capabilities"]


def healthy_box(stack: str, model: str | None = None, nodes: int = 1, flags: tuple[str, ...] = ()) -> Facts:
    """The Facts of `stack` on a GB10: with `model`, as `recipe check` sees a recipe serving it (TP=nodes)."""
    packages, capture = STACKS[stack]
    fi = packages.get("flashinfer-python")
    downloaded = bool(fi and packages.get("vllm"))
    if downloaded:  # `vllm download-kernels` was run, as vLLM 0.32's docs say (sparkdoctor/flashinfer_kernels.py)
        packages = {**packages, "flashinfer-cubin": fi}
    facts = gb10_facts(packages=dict(packages), capabilities=None, host_health=_ONE_BOX if nodes == 1 else host_health("gb10-healthy"))
    facts.capabilities = capabilities(capture)
    facts.cutedsl = {**(facts.cutedsl or {}), "installed_builds": ["libs-base", "libs-core", "libs-cu13"]}
    if fi and not downloaded:  # FlashInfer as pip installs it for SGLang: no cubin or jit-cache wheels, no vLLM command
        facts.flashinfer_kernels = {"flashinfer": fi, "vllm_download_kernels": None, "torch_cuda": "13.0", "jit_cache_wanted": True,
                                    "cubin": None, "jit_cache": None, "providers": []}
    if downloaded:
        providers = [{"arch": tag, "version": f"{fi}+cu130", "matches": True} for tag in ("sm100a", "sm120f")]
        facts.flashinfer_kernels = {"flashinfer": fi, "vllm_download_kernels": True, "torch_cuda": "13.0", "jit_cache_wanted": True,
                                    "cubin": {"version": fi, "matches": True},
                                    "jit_cache": {"version": f"{fi}+cu130", "matches": True, "requires": ["sm100a", "sm120f"]},
                                    "providers": providers}
    if model is not None:
        if packages.get("sglang"):
            argv = ["python3", "-m", "sglang.launch_server", "--model-path", MODELS[model]["ref"], "--tp", str(nodes), *flags]
        else:
            argv = ["vllm", "serve", MODELS[model]["ref"], "--tensor-parallel-size", str(nodes), *flags]
        facts.recipe = {"name": f"{model}-tp{nodes}", "argv": argv, "model": dict(MODELS[model], folder=f"/models/{model}", error=None)}
    return facts
