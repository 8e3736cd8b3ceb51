"""Every bundled matrix entry fires on a GB10 that has its problem and stays quiet on a near miss.

CASES maps each entry id to (trigger, near miss): changes to the healthy GB10 baseline
(tests/gb10.py) under which the entry must evaluate to "match", and a close variant under which it
must evaluate to "clear". A new entry without a row here fails test_every_entry_has_a_case.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from sparkdoctor import matrix, verify
from sparkdoctor.matrix import consistency
from tests.container.host_fixtures import HOST_CASES, host_health
from tests.fleet.multinode_cases import MULTINODE_CASES
from tests.gb10 import TRITON_PTXAS_BLACKWELL, gb10_facts, pin, ptxas
from tests.rerun.recipe_values import SERVING_CASES, _served

MATRIX = matrix.load()

CU13_FILE = "nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu"
CORE_FILE = "nvidia_cutlass_dsl/dsl_packages/cutlass/cute/nvgpu"
BASE_ONLY_450 = dict(
    packages={"nvidia-cutlass-dsl": "4.5.0", "nvidia-cutlass-dsl-libs-base": "4.5.0", "nvidia-cutlass-dsl-libs-cu13": None},
    cutedsl_build="libs-base",
)
COLLIDED_450 = {"nvidia-cutlass-dsl": "4.5.0", "nvidia-cutlass-dsl-libs-base": "4.5.0", "nvidia-cutlass-dsl-libs-cu13": "4.5.0"}
CORE_48 = {
    "nvidia-cutlass-dsl": "4.8.0",
    "nvidia-cutlass-dsl-libs-base": "4.8.0",
    "nvidia-cutlass-dsl-libs-cu13": "4.8.0",
    "nvidia-cutlass-dsl-libs-core": "4.8.0",
}

# vLLM 0.32's FlashInfer with torch built for CUDA 12.8 (no jit-cache wanted) and no flashinfer-cubin: missing
KERNELS_032 = {"flashinfer": "0.7.0.post1", "vllm_download_kernels": True, "torch_cuda": "12.8", "jit_cache_wanted": False,
               "cubin": None, "jit_cache": None, "providers": []}

# A box with no ConnectX-7 link up: no sign of a multi-node setup (the healthy fixture has a 100G twin up)
SINGLE_BOX = dict(host_health={**host_health("gb10-healthy"), "links": [
    link for link in host_health("gb10-healthy")["links"] if link.get("driver") != "mlx5_core"]})

CASES: dict[str, tuple[dict, dict]] = {
    # ---- nvidia-cutlass-dsl -------------------------------------------------------------------
    "cutedsl-wheel-collision": (
        dict(packages=COLLIDED_450, cutedsl_build="libs-base"),
        dict(packages=COLLIDED_450),  # both wheels installed, the cu13 build really on disk
    ),
    "cutedsl-libs-base-tile-crash": (
        dict(packages={"nvidia-cutlass-dsl-libs-cu13": None}, cutedsl_build="libs-base"),  # plain pip install nvidia-cutlass-dsl==4.5.2
        dict(packages={"nvidia-cutlass-dsl-libs-cu13": None, "nvidia-cutlass-dsl": "4.6.0"}, cutedsl_build="libs-base"),
    ),
    "cutedsl-wheel-collision-451": (
        dict(cutedsl_build="libs-base"),
        dict(),
    ),
    "cutedsl-450-libs-base-mma": (
        BASE_ONLY_450,
        dict(BASE_ONLY_450, packages={**BASE_ONLY_450["packages"], "nvidia-cutlass-dsl": "4.5.1"}),
    ),
    "cutedsl-450-nvfp4-garbage": (
        dict(packages={"nvidia-cutlass-dsl": "4.5.0"}),
        dict(packages={"nvidia-cutlass-dsl": "4.5.1"}),
    ),
    "cutedsl-sm121a-not-admissible": (
        dict(packages={"nvidia-cutlass-dsl": "4.4.2"}, capabilities={"cutedsl.sm120_blockscaled_sm121a": False}),
        # the same version with its warp/mma.py edited to admit sm_121a: cutedsl-warp-mma-patched-pre-45's business
        dict(packages={"nvidia-cutlass-dsl": "4.4.2"}, capabilities={"cutedsl.sm120_blockscaled_sm121a": True}),
    ),
    "cutedsl-pinned-pre-45": (
        dict(constraints=[pin("nvidia-cutlass-dsl==4.4.2")]),
        dict(constraints=[pin("nvidia-cutlass-dsl==4.5.2")]),
    ),
    "cutedsl-pin-vs-flashinfer": (
        dict(constraints=[pin("nvidia-cutlass-dsl==4.4.2")]),
        dict(constraints=[pin("nvidia-cutlass-dsl==4.4.2")], packages={"flashinfer-python": "0.6.9"}),
    ),
    "cutedsl-tcgen05-sm12x": (
        dict(),
        dict(arch="sm_100a"),
    ),
    "cutedsl-arch-unset": (
        dict(env={"CUTE_DSL_ARCH": None}),
        dict(),
    ),
    "cutedsl-arch-mismatch": (
        dict(env={"CUTE_DSL_ARCH": "sm_120a"}),
        dict(env={"CUTE_DSL_ARCH": "sm_120f"}),  # the family target runs on CC 12.1
    ),
    "cutedsl-warp-mma-patch-obsolete": (
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}),
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}, packages={"nvidia-cutlass-dsl": "4.4.2"}),
    ),
    "cutedsl-warp-mma-patch-obsolete-core": (
        dict(packages=CORE_48, modified={"nvidia-cutlass-dsl-libs-core": [f"{CORE_FILE}/warp/mma.py"]}),
        dict(packages=CORE_48, modified={"nvidia-cutlass-dsl-libs-core": [f"{CORE_FILE}/tcgen05/mma.py"]}),
    ),
    "cutedsl-tcgen05-patched": (
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/tcgen05/mma.py", f"{CU13_FILE}/tcgen05/copy.py"]}),
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}),
    ),
    "cutedsl-warp-mma-patched-pre-45": (
        dict(packages={"nvidia-cutlass-dsl": "4.4.2", "nvidia-cutlass-dsl-libs-base": "4.4.2", "nvidia-cutlass-dsl-libs-cu13": None},
             cutedsl_build="libs-base", modified={"nvidia-cutlass-dsl-libs-base": [f"{CU13_FILE}/warp/mma.py"]}),
        # the same edit on a release that admits sm_121a is the other entry's business
        dict(packages={"nvidia-cutlass-dsl-libs-cu13": None}, cutedsl_build="libs-base",
             modified={"nvidia-cutlass-dsl-libs-base": [f"{CU13_FILE}/warp/mma.py"]}),
    ),
    "cutedsl-base-hand-modified": (
        dict(cutedsl_build="libs-base", modified={"nvidia-cutlass-dsl-libs-base": [f"{CU13_FILE}/tcgen05/mma.py"]}),
        # libs-cu13 is the build on disk: libs-base's RECORD no longer describes these files
        dict(modified={"nvidia-cutlass-dsl-libs-base": [f"{CU13_FILE}/tcgen05/mma.py"]}),
    ),
    "cutedsl-hand-modified": (
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}),
        # libs-base active: its RECORD, not libs-cu13's, describes the files on disk
        dict(modified={"nvidia-cutlass-dsl-libs-cu13": [f"{CU13_FILE}/warp/mma.py"]}, cutedsl_build="libs-base"),
    ),
    "cutedsl-core-hand-modified": (
        dict(packages=CORE_48, modified={"nvidia-cutlass-dsl-libs-core": [f"{CORE_FILE}/warp/copy.py"]}),
        dict(packages=CORE_48),
    ),
    # ---- vllm --------------------------------------------------------------------------------
    "vllm-cmake-sm121a-pre-019": (
        dict(packages={"vllm": "0.18.1"}),
        dict(packages={"vllm": "0.19.0"}),
    ),
    "vllm-cuda13-arch-family": (
        dict(),
        dict(packages={"vllm": "0.19.1"}),  # 0.19.x still lists 12.1 for CUDA 13 (#39878 is in 0.20.0)
    ),
    "vllm-cg-estimate-negative": (
        _served([]),  # unset: vLLM 0.22.0's envs.py defaults the estimate to "1"; the KV cache is sized from it
        # 0.19.1 defaults it to "0" (read from its envs.py by the probe, not copied into the entry)
        dict(packages={"vllm": "0.19.1"}, capabilities={"env_default.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}, **_served([])),
    ),
    "vllm-uma-startup-free-memory": (
        dict(packages={"vllm": "0.11.0"}),
        dict(packages={"vllm": "0.11.1"}),
    ),
    "vllm-cg-estimate-forced-on": (
        dict(packages={"vllm": "0.19.1"}, env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1"}),
        dict(packages={"vllm": "0.19.1"}, env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"}),
    ),
    "vllm-mamba-align-mnbt": (
        dict(),
        dict(capabilities={"vllm.mamba_align_assert": False}),
    ),
    "vllm-marlin-fp8-rejected-sm121": (
        dict(env={"VLLM_MARLIN_INPUT_DTYPE": "fp8"}, packages={"vllm": "0.21.0"}, capabilities={"vllm.marlin_fp8_sm121": False}),
        dict(env={"VLLM_MARLIN_INPUT_DTYPE": "fp8"}, packages={"vllm": "0.21.0"}),
    ),
    "vllm-marlin-fp8-corrupts-sm121": (
        dict(env={"VLLM_MARLIN_INPUT_DTYPE": "fp8"}),
        dict(env={"VLLM_MARLIN_INPUT_DTYPE": "int8"}),
    ),
    "vllm-env-marlin-input-dtype-refused": (  # 0.34.0 raises at startup while it is set; 0.33.0 reads it
        dict(env={"VLLM_MARLIN_INPUT_DTYPE": "int8"}, packages={"vllm": "0.34.0"}, capabilities={"vllm.env.VLLM_MARLIN_INPUT_DTYPE": "removed"}),
        dict(env={"VLLM_MARLIN_INPUT_DTYPE": "int8"}, packages={"vllm": "0.33.0"}, capabilities={"vllm.env.VLLM_MARLIN_INPUT_DTYPE": "known"}),
    ),
    "vllm-env-nvfp4-gemm-backend-deprecated": (
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "marlin"}, capabilities={"vllm.env.VLLM_NVFP4_GEMM_BACKEND": "deprecated"}),
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "marlin"}, capabilities={"vllm.env.VLLM_NVFP4_GEMM_BACKEND": "known"}),
    ),
    "vllm-env-nvfp4-gemm-backend-removed": (
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "marlin"}, capabilities={"vllm.env.VLLM_NVFP4_GEMM_BACKEND": "unknown"}),
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "marlin"}, capabilities={"vllm.env.VLLM_NVFP4_GEMM_BACKEND": "deprecated"}),
    ),
    "vllm-env-flashinfer-moe-fp4-deprecated": (
        dict(env={"VLLM_USE_FLASHINFER_MOE_FP4": "0"}, capabilities={"vllm.env.VLLM_USE_FLASHINFER_MOE_FP4": "deprecated"}),
        dict(env={"VLLM_USE_FLASHINFER_MOE_FP4": "0"}, capabilities={"vllm.env.VLLM_USE_FLASHINFER_MOE_FP4": "known"}),
    ),
    "vllm-env-flashinfer-moe-fp4-removed": (
        dict(env={"VLLM_USE_FLASHINFER_MOE_FP4": "0"}, capabilities={"vllm.env.VLLM_USE_FLASHINFER_MOE_FP4": "unknown"}),
        dict(env={"VLLM_USE_FLASHINFER_MOE_FP4": "0"}, capabilities={"vllm.env.VLLM_USE_FLASHINFER_MOE_FP4": "known"}),
    ),
    "vllm-env-flashinfer-moe-fp4-on-removed": (
        dict(env={"VLLM_USE_FLASHINFER_MOE_FP4": "1"}, capabilities={"vllm.env.VLLM_USE_FLASHINFER_MOE_FP4": "unknown"}),
        dict(env={"VLLM_USE_FLASHINFER_MOE_FP4": "0"}, capabilities={"vllm.env.VLLM_USE_FLASHINFER_MOE_FP4": "unknown"}),
    ),
    "vllm-env-flashinfer-moe-backend-deprecated": (
        dict(env={"VLLM_FLASHINFER_MOE_BACKEND": "throughput"}, capabilities={"vllm.env.VLLM_FLASHINFER_MOE_BACKEND": "deprecated"}),
        dict(env={"VLLM_FLASHINFER_MOE_BACKEND": "throughput"}, capabilities={"vllm.env.VLLM_FLASHINFER_MOE_BACKEND": "unknown"}),
    ),
    "vllm-env-flashinfer-moe-backend-removed": (
        dict(env={"VLLM_FLASHINFER_MOE_BACKEND": "throughput"}, capabilities={"vllm.env.VLLM_FLASHINFER_MOE_BACKEND": "unknown"}),
        dict(capabilities={"vllm.env.VLLM_FLASHINFER_MOE_BACKEND": "unknown"}),  # not set
    ),
    "vllm-env-test-force-fp8-marlin-removed": (
        dict(env={"VLLM_TEST_FORCE_FP8_MARLIN": "1"}, capabilities={"vllm.env.VLLM_TEST_FORCE_FP8_MARLIN": "unknown"}),
        dict(env={"VLLM_TEST_FORCE_FP8_MARLIN": "1"}, capabilities={"vllm.env.VLLM_TEST_FORCE_FP8_MARLIN": "known"}),
    ),
    "vllm-nvfp4-emulation-forced": (
        dict(env={"VLLM_USE_NVFP4_CT_EMULATIONS": "1"}, capabilities={"vllm.env.VLLM_USE_NVFP4_CT_EMULATIONS": "deprecated"}),
        # 0.19.x wheels ship only sm_120a FP4 cubins, which CC 12.1 cannot load: emulation is a real choice there
        dict(env={"VLLM_USE_NVFP4_CT_EMULATIONS": "1"}, packages={"vllm": "0.19.1"}, capabilities={"vllm.env.VLLM_USE_NVFP4_CT_EMULATIONS": "known"}),
    ),
    "vllm-b12x-linear-opt-in": (
        dict(),
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-b12x"}),
    ),
    "vllm-b12x-moe-opt-in": (
        _served([], quant="nvfp4"),
        _served([], quant="mxfp4"),  # not an NVFP4 checkpoint: the b12x NVFP4 MoE is no choice for it
    ),
    "vllm-b12x-requested-missing": (
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-b12x"}, capabilities={"vllm.b12x_linear": False}),
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-b12x"}),
    ),
    "vllm-b12x-gate-patched": (
        dict(modified={"vllm": ["vllm/model_executor/kernels/linear/nvfp4/flashinfer.py"]}),
        dict(modified={"vllm": ["vllm/model_executor/kernels/linear/nvfp4/cutlass.py"]}),
    ),
    "vllm-nvfp4-illegal-instruction": (
        dict(packages={"vllm": "0.19.1"}),
        dict(packages={"vllm": "0.20.0"}),
    ),
    "vllm-early-nvfp4-moe": (
        dict(packages={"vllm": "0.11.0"}, env={"VLLM_USE_FLASHINFER_MOE_FP4": "1"}),
        dict(packages={"vllm": "0.11.1"}, env={"VLLM_USE_FLASHINFER_MOE_FP4": "1"}),  # has_device_capability(100) admits CC 12.1
    ),
    "vllm-mtp-nvfp4-bf16-drafter": (
        dict(packages={"vllm": "0.24.0"}, **_served(["--speculative-config", '{"method": "mtp"}'])),
        dict(packages={"vllm": "0.24.0"}, **_served([])),  # no speculative decoding
    ),
    "vllm-flashinfer-moe-latency-sm12x": (
        dict(env={"VLLM_FLASHINFER_MOE_BACKEND": "latency"}),
        dict(env={"VLLM_FLASHINFER_MOE_BACKEND": "latency"}, packages={"vllm": "0.24.0"}),  # the variable is gone
    ),
    "vllm-hand-modified": (
        dict(modified={"vllm": ["vllm/model_executor/layers/quantization/modelopt.py"]}),
        dict(modified={"vllm": []}),
    ),
    "vllm-fp8-sm120-only-trap": (
        dict(env={"TORCH_CUDA_ARCH_LIST": "12.1f"}),
        dict(env={"TORCH_CUDA_ARCH_LIST": "12.1a"}),
    ),
    "vllm-arch-12-1f-dropped": (
        dict(env={"TORCH_CUDA_ARCH_LIST": "12.0f;12.1f"}),
        dict(),
    ),
    "vllm-fp8-blockscaled-cutlass-disabled": (
        dict(env={"VLLM_DISABLED_KERNELS": "CutlassFp8BlockScaledMMKernel"}),
        dict(env={"VLLM_DISABLED_KERNELS": "MarlinFP8ScaledMMLinearKernel"}),
    ),
    "vllm-deep-gemm-gb10": (
        dict(packages={"vllm": "0.24.0"}),  # DeepGEMM on by default (envs.py default "1")
        dict(packages={"vllm": "0.24.0"}, env={"VLLM_USE_DEEP_GEMM": "0"}),
    ),
    "vllm-deep-gemm-gb10-027": (  # withdrawn: merged into vllm-deep-gemm-gb10
        dict(packages={"vllm": "0.27.1"}),
        dict(packages={"vllm": "0.28.0"}),
    ),
    "vllm-gptoss-mxfp4-no-backend": (
        dict(packages={"vllm": "0.20.1"}, **_served([], quant="mxfp4", architecture="GptOssForCausalLM")),
        # the same vLLM serving an NVFP4 checkpoint: no MXFP4 MoE runs (vLLM 0.32.0 admits SM12x in the gate)
        dict(packages={"vllm": "0.20.1"}, **_served([], quant="nvfp4")),
    ),
    "vllm-sparse-topk-smem-sm12x": (
        dict(packages={"vllm": "0.29.0"}),
        dict(packages={"vllm": "0.30.0"}),  # the released library no longer contains the refusal
    ),
    "vllm-sparse-indexer-logits-uma": (  # a GLM-5.3-Flash (glm5next) serve on GB10's unified memory, budget left at 512 MiB
        dict(packages={"vllm": "0.33.0"}, host_health=host_health("gb10-healthy"), **_served([], architecture="Glm5NextForCausalLM")),
        dict(packages={"vllm": "0.33.0"}, host_health=host_health("gb10-healthy"), env={"VLLM_SPARSE_INDEXER_MAX_LOGITS_MB": "64"},
             **_served([], architecture="Glm5NextForCausalLM")),  # the budget vllm#55569 says fixes it, set
    ),
    "vllm-ray-v2-multinode-hang": (
        dict(packages={"vllm": "0.24.0", "ray": "2.49.2"}),
        dict(packages={"vllm": "0.24.0", "ray": "2.49.2"}, **SINGLE_BOX),  # Ray but no ConnectX link up
    ),
    "vllm-ngc-26.05-no-ray": (
        dict(packages={"vllm": "0.20.1"}, **_served(["--distributed-executor-backend", "ray"])),
        dict(packages={"vllm": "0.20.1"}, **_served(["--distributed-executor-backend", "mp"])),  # the mp executor needs no Ray
    ),
    "vllm-flashinfer-prefill-hd256-fp8kv": (
        _served(["--kv-cache-dtype", "fp8"], head_dim=256),
        _served(["--kv-cache-dtype", "auto"], head_dim=256),  # `auto`: the checkpoint's dtype, no FP8 KV asked for
    ),
    "vllm-full-graph-chunked-prefill-hang-sm12x": (
        _served(["--tensor-parallel-size", "2"], architecture="DeepseekV4ForCausalLM"),
        _served(["--tensor-parallel-size", "2"], architecture="Qwen3_5MoeForConditionalGeneration"),
    ),
    "vllm-8spark-init-spin-hang": (
        _served(["--tensor-parallel-size", "8"]),
        _served(["--tensor-parallel-size", "4"]),
    ),
    "cutedsl-plain-install-cu12": (
        dict(packages={"nvidia-cutlass-dsl": "4.8.1", "nvidia-cutlass-dsl-libs-base": "4.8.1", "nvidia-cutlass-dsl-libs-cu12": "4.8.1",
                       "nvidia-cutlass-dsl-libs-cu13": None}),
        dict(packages={"nvidia-cutlass-dsl": "4.8.1", "nvidia-cutlass-dsl-libs-base": "4.8.1", "nvidia-cutlass-dsl-libs-cu12": "4.8.1",
                       "nvidia-cutlass-dsl-libs-cu13": "4.8.1"}),  # installed with [cu13]
    ),
    "cutedsl-mixed-family": (  # `pip install nvidia-cutlass-dsl==4.5.0` over a plain 4.8.1 / the same family at one version
        dict(packages={"nvidia-cutlass-dsl": "4.5.0", "nvidia-cutlass-dsl-libs-base": "4.5.0", "nvidia-cutlass-dsl-libs-core": "4.8.1",
                       "nvidia-cutlass-dsl-libs-cu12": "4.8.1", "nvidia-cutlass-dsl-libs-cu13": None}),
        dict(packages={"nvidia-cutlass-dsl": "4.8.1", "nvidia-cutlass-dsl-libs-base": "4.8.1", "nvidia-cutlass-dsl-libs-core": "4.8.1",
                       "nvidia-cutlass-dsl-libs-cu12": "4.8.1.0", "nvidia-cutlass-dsl-libs-cu13": None}),  # 4.8.1.0 is 4.8.1
    ),
    "vllm-linear-backend-b12x-fail-fast": (
        dict(packages={"vllm": "0.27.1"}, **_served(["--linear-backend", "flashinfer_b12x"])),
        dict(packages={"vllm": "0.28.0"}, **_served(["--linear-backend", "flashinfer_b12x"])),  # falls back per layer type
    ),
    "vllm-env-mxfp4-backend-unknown": (
        dict(env={"VLLM_MXFP4_BACKEND": "CUTLASS"}, capabilities={"vllm.env.VLLM_MXFP4_BACKEND": "unknown"}),
        # a patched build whose envs.py reads it
        dict(env={"VLLM_MXFP4_BACKEND": "CUTLASS"}, capabilities={"vllm.env.VLLM_MXFP4_BACKEND": "known"}),
    ),
    "sglang-unbalanced-memory-after-crash": (
        dict(packages={"sglang": "0.5.12"}),
        dict(),  # no SGLang
    ),
    "vllm-deepgemm-sm121-header-missing": (
        dict(),
        dict(packages={"vllm": None}),
    ),
    "nccl-ib-cts-unused-request-deadlock": (
        dict(),  # the fixture's ConnectX-7 twin is up: a multi-node box
        SINGLE_BOX,
    ),
    "nemoclaw-preflight-memory-na": (
        dict(),  # any GB10: nvidia-smi prints [N/A] for its memory
        dict(arch="sm_100a"),  # a GPU with a framebuffer reports numbers
    ),
    "host-earlyoom-killed": (  # a GB10 (its unified memory makes the server earlyoom's pick) whose journal has a kill
        dict(host_health={**host_health("gb10-healthy"), "oom_daemons": {"earlyoom_kills": 1, "oomd_kills": 0}}),
        dict(host_health={**host_health("gb10-healthy"), "oom_daemons": {"earlyoom_kills": 0, "oomd_kills": 1}}),
    ),
    "host-systemd-oomd-killed": (
        dict(host_health={**host_health("gb10-healthy"), "oom_daemons": {"earlyoom_kills": 0, "oomd_kills": 2}}),
        dict(host_health={**host_health("gb10-healthy"), "oom_daemons": {"earlyoom_kills": 3, "oomd_kills": 0}}),
    ),
    # ---- nccl / other engines ------------------------------------------------------------------
    "nccl-pip-2289-multinode-hang": (
        dict(packages={"nvidia-nccl-cu13": "2.28.9"}),
        dict(packages={"nvidia-nccl-cu13": "2.28.9"}, **SINGLE_BOX),  # no ConnectX link up: one box
    ),
    "nccl-2304-nvls-hang": (
        dict(packages={"nvidia-nccl-cu13": "2.30.4"}),
        dict(packages={"nvidia-nccl-cu13": "2.30.4"}, env={"NCCL_NVLS_ENABLE": "0"}),
    ),
    "sglang-multinode-nccl-init-freeze": (
        dict(packages={"sglang": "0.5.17"}),
        dict(packages={"sglang": "0.5.17"}, **SINGLE_BOX),
    ),
    "trtllm-fp8-blockscale-sm121": (
        dict(packages={"tensorrt-llm": "1.2.0"}),
        dict(),
    ),
    "sglang-glm53-flash-sm12x-trtllm-dsa": (
        dict(packages={"sglang": "0.5.23"}),
        dict(packages={"sglang": "0.5.19"}),  # before GLM-5.3-Flash joined SGLang's DSA family
    ),
    # ---- flashinfer --------------------------------------------------------------------------
    "fi-cutlass-moe-relu2-sm121": (
        dict(packages={"flashinfer-python": "0.6.7"}),
        dict(packages={"flashinfer-python": "0.6.8"}),
    ),
    "fi-cutlass-fp4-gemm-gb10-error-internal": (
        dict(packages={"flashinfer-python": "0.5.3", "vllm": "0.12.0"}, capabilities={"vllm.env.VLLM_NVFP4_GEMM_BACKEND": "known"},
             **_served([], quant="nvfp4")),
        # the same box with the GEMM chosen explicitly: vLLM does not pick FlashInfer's CUTLASS FP4 GEMM by itself
        dict(packages={"flashinfer-python": "0.5.3", "vllm": "0.12.0"}, capabilities={"vllm.env.VLLM_NVFP4_GEMM_BACKEND": "known"},
             env={"VLLM_NVFP4_GEMM_BACKEND": "marlin"}, **_served([], quant="nvfp4")),
    ),
    "fi-b12x-moe-ima-sm121": (
        dict(packages={"flashinfer-python": "0.6.18.post1"}, **_served(["--moe-backend", "flashinfer_b12x"])),
        # the same box on vLLM's automatic choice, which leaves FLASHINFER_B12X out on SM121
        dict(packages={"flashinfer-python": "0.6.18.post1"}, **_served([])),
    ),
    "triton-360-kernels-one-warp": (
        dict(packages={"vllm": "0.21.0"}),
        dict(),  # vLLM 0.22.0: its vendored triton_kernels has the 4-warp floor (whatever Triton is installed)
    ),
    "torch-2.10-multinode-hang": (
        dict(packages={"torch": "2.10.0+cu130", "ray": "2.49.2"}),
        dict(packages={"torch": "2.10.0+cu130", "ray": "2.49.2"}, **SINGLE_BOX),
    ),
    "torch-213-no-kernels-warning": (
        dict(),
        dict(packages={"torch": "2.11.0+cu130"}),
    ),
    "driver-nvml-memory-not-supported": (
        dict(packages={"nvitop": "1.5.3"}),
        dict(packages={"nvitop": "1.5.3"}, arch="sm_90a"),
    ),
    # ---- flashinfer --------------------------------------------------------------------------
    "fi-jit-120a-cuda129": (
        dict(packages={"flashinfer-python": "0.6.6"}, toolkits=[ptxas("12.9.86", "system")]),
        dict(packages={"flashinfer-python": "0.6.6"}),  # system toolkit is CUDA 13.0
    ),
    "fi-moe-utils-jit-sm12x": (
        dict(),
        dict(arch="sm_100a"),
    ),
    "fi-jit-cache-no-sm121a": (
        dict(packages={"flashinfer-jit-cache": "0.6.11+cu130"}),
        dict(packages={"flashinfer-jit-cache": "0.6.18+cu130"}),
    ),
    "fi-kernels-not-downloaded": (
        dict(packages={"vllm": "0.32.0"}, flashinfer_kernels=KERNELS_032),
        dict(packages={"vllm": "0.32.0"}, flashinfer_kernels={**KERNELS_032, "cubin": {"version": "0.7.0.post1", "matches": True}}),
    ),
    "fi-b12x-unavailable": (
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-b12x"}, packages={"flashinfer-python": "0.6.8.post1"}),
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-b12x"}, packages={"flashinfer-python": "0.6.9"}),
    ),
    "fi-b12x-needs-cuda13": (
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-b12x"}, toolkits=[ptxas("12.9.86", "system")]),
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-b12x"}, toolkits=[ptxas("12.9.86", "system")], packages={"flashinfer-python": "0.7.2.post1"}),
    ),
    "fi-trtllm-fp4-gemm-sm12x": (
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-trtllm"}),
        dict(env={"VLLM_NVFP4_GEMM_BACKEND": "flashinfer-cutlass"}),
    ),
    "fi-b12x-kernel-patched": (
        dict(modified={"flashinfer-python": ["flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120_b12x.py"]}),
        dict(modified={"flashinfer-python": ["flashinfer/fused_moe/cute_dsl/blackwell_sm12x/__init__.py"]}),
    ),
    "fi-e2m1-software-patch": (
        dict(modified={"flashinfer-python": ["flashinfer/data/cutlass/include/cutlass/float_subbyte.h"]}),
        dict(modified={"flashinfer-python": ["flashinfer/data/cutlass/include/cutlass/float_subbyte.h"]}, arch="sm_100a"),
    ),
    "fi-hand-modified": (
        dict(modified={"flashinfer-python": ["flashinfer/fused_moe/cute_dsl/blackwell_sm12x/__init__.py"]}),
        dict(modified={"vllm": ["vllm/model_executor/layers/quantization/modelopt.py"]}),
    ),
    # ---- triton ------------------------------------------------------------------------------
    "triton-ptxas-no-sm121a": (
        # Triton 3.5: only the legacy bundled ptxas, which predates sm_121a
        dict(packages={"triton": "3.5.1"}, toolkits=[ptxas("13.0.88", "system"), ptxas("12.8.93", "triton", used_by=["triton"])]),
        # TRITON_PTXAS_PATH moves Triton onto the system ptxas; the bundled one is left unused
        dict(packages={"triton": "3.5.1"}, env={"TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas"},
             toolkits=[ptxas("13.0.88", "system", used_by=["triton"]), ptxas("12.8.93", "triton")]),
    ),
    "triton-override-arch": (
        dict(env={"TRITON_OVERRIDE_ARCH": "sm120"}),
        dict(),
    ),
    "triton-ptxas-path-no-effect": (
        dict(env={"TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas"}),
        dict(env={"TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas"}, packages={"triton": "3.5.1"}),
    ),
    # ---- torch -------------------------------------------------------------------------------
    "torch-cc-121-warning": (
        dict(packages={"torch": "2.10.0+cu130"}),
        dict(packages={"torch": "2.11.0+cu130"}),  # 2.11 rewrote the check and admits CC 12.x
    ),
    "torch-cuda-below-128": (
        dict(torch_cuda="12.6"),
        dict(torch_cuda="12.8"),
    ),
    "torch-cpu-only-build": (
        dict(torch_cuda=None),
        dict(torch_cuda=None, packages={"vllm": None}),
    ),
    "torch-cu12-with-cuda13-vllm": (
        dict(torch_cuda="12.9"),
        dict(torch_cuda="12.9", packages={"vllm": "0.19.0"}),
    ),
    # ---- driver / CUDA toolkit ---------------------------------------------------------------
    "driver-cuda-below-129": (
        dict(driver={"version": "570.133.20", "cuda": "12.8"}),
        dict(driver={"version": "575.57.08", "cuda": "12.9"}),
    ),
    "driver-image-needs-newer-driver": (
        dict(env={"NVIDIA_REQUIRE_CUDA": "cuda>=13.1 brand=unknown,driver>=590"}),
        dict(env={"NVIDIA_REQUIRE_CUDA": "cuda>=13.0 brand=unknown,driver>=580"}),
    ),
    "driver-590-graph-capture": (
        dict(driver={"version": "590.48.01", "cuda": "13.1"}),
        dict(driver={"version": "580.159.03", "cuda": "13.0"}),
    ),
    "toolkit-system-ptxas-no-sm121a": (
        dict(toolkits=[ptxas("12.8.93", "system"), ptxas("12.9.86", "triton", path=TRITON_PTXAS_BLACKWELL, used_by=["triton"])]),
        dict(toolkits=[ptxas("12.9.86", "system"), ptxas("12.9.86", "triton", path=TRITON_PTXAS_BLACKWELL, used_by=["triton"])]),
    ),
}


def _explain(evaluation: matrix.Evaluation) -> str:
    return f"{evaluation.entry.id}: {evaluation.outcome}\n" + "\n".join(f"  [{c.result}] {c.key}: {c.evidence}" for c in evaluation.checks)


CASES.update(HOST_CASES)  # matrix/host.toml: tests/container/host_fixtures.py (fixture trees + NVML readings)
CASES.update(SERVING_CASES)  # matrix/vllm-settings.toml: a recipe's values (tests/rerun/recipe_values.py)
CASES.update(MULTINODE_CASES)  # matrix/multinode.toml: one node of a fleet check (tests/fleet/multinode_cases.py)

@pytest.mark.parametrize("entry_id", sorted(CASES))
def test_entry_matches_its_trigger_and_not_its_near_miss(entry_id):
    entry = MATRIX.get(entry_id)
    assert entry is not None, f"{entry_id} has a test row but no matrix entry"
    trigger, near_miss = CASES[entry_id]
    hit = matrix.evaluate(entry, gb10_facts(**trigger))
    if entry.withdrawn:  # kept so its id is never reused; it must never fire
        assert hit.outcome == matrix.evaluate(entry, gb10_facts(**near_miss)).outcome == "withdrawn"
        return
    assert hit.outcome == "match", _explain(hit)
    miss = matrix.evaluate(entry, gb10_facts(**near_miss))
    assert miss.outcome == "clear", _explain(miss)


def test_every_entry_has_a_case():
    bundled = {e.id for e in MATRIX.entries}
    assert not bundled - set(CASES), f"entries without a trigger/near-miss row: {sorted(bundled - set(CASES))}"
    assert not set(CASES) - bundled, f"rows for entries that do not exist: {sorted(set(CASES) - bundled)}"


def test_bundled_matrix_validates_and_every_entry_cites_a_url():
    assert MATRIX.entries, "no bundled entries"
    for item in [*MATRIX.entries, *MATRIX.stacks]:
        assert item.refs, f"{item.id} cites nothing"
        for ref in item.refs:
            assert re.match(r"^https://\S+$", ref), f"{item.id}: {ref!r} is not an https URL"


def test_entries_are_written_out():
    for e in MATRIX.entries:
        assert len(e.summary) >= 80, f"{e.id}: summary too thin to act on"
        assert e.remedy and e.title, e.id


def test_verify_tables_are_usable_by_matrix_verify():
    specs = verify.select(MATRIX, None)  # raises VerifyError naming the entry and field if one is malformed
    assert {s.entry.id for s in specs} == {e.id for e in MATRIX.entries if e.verify}
    for spec in specs:
        assert spec.affected, spec.entry.id


def test_healthy_gb10_matches_no_error_and_decides_every_entry():
    results = matrix.evaluate_all(MATRIX, gb10_facts())
    errors = [_explain(r) for r in results if r.outcome == "match" and r.entry.severity == "error"]
    assert not errors, "\n".join(errors)
    undecided = [_explain(r) for r in results if r.outcome == "unknown"]
    assert not undecided, "baseline facts leave entries undecided:\n" + "\n".join(undecided)


STACKS = {
    "ngc-vllm-26.05",
    "eugr-spark-vllm-docker",
    "flashinfer-b12x-0.6.11",
    "vllm-0.22.0-cutlass-dsl-4.5.2",
    "avarok-dgx-vllm-v22",
}


def test_bundled_stacks_are_the_known_ones():
    assert {s.id for s in MATRIX.stacks} == STACKS


@pytest.mark.parametrize("stack_id", sorted(STACKS))
def test_stack_loads_with_valid_specifiers(stack_id):
    stack = next(s for s in MATRIX.stacks if s.id == stack_id)
    assert stack.packages and stack.refs and stack.notes.strip()
    for name, spec in stack.packages.items():
        assert canonicalize_name(name) == name, f"{stack_id}: use the canonical name for {name}"
        SpecifierSet("" if spec == "*" else spec)
    if stack.driver is not None:
        assert Version("580.95.05") in SpecifierSet(stack.driver), f"{stack_id}: driver range excludes DGX OS 580.95.05"
    assert all(isinstance(v, str) for v in stack.env.values())


def test_healthy_baseline_is_the_vllm_022_stack():
    stack = next(s for s in MATRIX.stacks if s.id == "vllm-0.22.0-cutlass-dsl-4.5.2")
    facts = gb10_facts()
    for name, spec in stack.packages.items():
        assert Version(facts.package(name)["version"]) in SpecifierSet(spec, prereleases=True), name


def test_entries_on_an_absent_package_are_clear_not_unknown():
    """A box without vLLM/FlashInfer has no capabilities for them: those entries must say 'clear'
    (the package is absent) rather than 'could not evaluate'."""
    facts = gb10_facts(packages={"vllm": None, "flashinfer-python": None}, capabilities=None)
    unknown = [ev.entry.id for ev in matrix.evaluate_all(MATRIX, facts) if ev.outcome == "unknown"]
    assert unknown == []


@pytest.mark.parametrize("vllm, fires", [("0.23.0", False), ("0.24.0", True), ("0.25.1", False), ("0.26.0", False),
                                         ("0.27.0", True), ("0.27.1", True), ("0.28.0", False)])
def test_deep_gemm_entry_fires_on_its_two_ranges_only(vllm, fires):
    """vllm-deep-gemm-gb10 holds two ranges in one specifier (>=0.24.0,!=0.25.*,!=0.26.*,<0.28.0), as the
    released files say (matrix track 2026-11-26: same facts on 0.24.0 and 0.27.x, not on 0.25.x/0.26.0)."""
    hit = matrix.evaluate(MATRIX.get("vllm-deep-gemm-gb10"), gb10_facts(packages={"vllm": vllm}))
    assert hit.outcome == ("match" if fires else "clear"), _explain(hit)


# ---- matrix validate across entries (sparkdoctor.matrix.consistency) -------------------------------

BOUNDS_DOC = Path(__file__).resolve().parent.parent / "docs" / "evidence" / "bounds-2026-11-28b.json"


def test_bundled_matrix_has_no_problem_across_entries():
    assert consistency.problems(MATRIX, json.loads(BOUNDS_DOC.read_text())) == ([], "")


def test_a_remedy_that_selects_a_path_another_entry_says_crashes_is_refused():
    """The FlashInfer FP4 GEMM entry once advised VLLM_NVFP4_GEMM_BACKEND=cutlass on every vLLM: below 0.20 that is
    vLLM's own NVFP4 CUTLASS path, which vllm-nvfp4-illegal-instruction says crashes on SM12x."""
    old = dataclasses.replace(MATRIX.get("fi-cutlass-fp4-gemm-gb10-error-internal"), justifies=["VLLM_NVFP4_GEMM_BACKEND=cutlass"])
    found = consistency.remedy_conflicts(_with(old))
    assert len(found) == 1 and "VLLM_NVFP4_GEMM_BACKEND=cutlass" in found[0] and "vllm-nvfp4-illegal-instruction" in found[0]
    # the same remedy written for the releases that have #38423's guards does not meet it
    narrowed = dataclasses.replace(old, when={**old.when, "packages": {"flashinfer-python": "*", "vllm": ">=0.20.0"}})
    assert consistency.remedy_conflicts(_with(narrowed)) == []


def test_a_remedy_that_another_entry_says_hangs_is_refused():
    """A hang entry recommending --enforce-eager where another (warn) entry says the same setup hangs with it."""
    hang = MATRIX.get("vllm-full-graph-chunked-prefill-hang-sm12x")
    old = dataclasses.replace(hang, justifies=["--enforce-eager"])
    eager_hangs = dataclasses.replace(hang, id="t-eager-hangs", severity="warn", justifies=[],
                                      when={**hang.when, "serving": {**hang.when["serving"], "--enforce-eager": True}})
    found = consistency.remedy_conflicts(_with(old, eager_hangs))
    assert any("--enforce-eager" in p and "t-eager-hangs" in p for p in found)
    # on another GPU the two cannot hold together
    elsewhere = dataclasses.replace(eager_hangs, when={**eager_hangs.when, "gpu_arch": ["sm_100a"]})
    assert not [p for p in consistency.remedy_conflicts(_with(old, elsewhere)) if "t-eager-hangs" in p]


def test_a_checked_entry_that_brackets_nothing_is_refused():
    fp8kv = MATRIX.get("vllm-flashinfer-prefill-hd256-fp8kv")
    found = consistency.unbracketed_checked(_with(dataclasses.replace(fp8kv, evidence="checked")))
    assert len(found) == 1 and "bracket nothing" in found[0] and fp8kv.id in found[0]


def test_a_checked_entry_whose_checks_hold_outside_its_bound_in_the_verify_data_is_refused():
    entry = MATRIX.get("vllm-gptoss-mxfp4-no-backend")
    assert entry.evidence == "reported"
    checked = _with(dataclasses.replace(entry, evidence="checked"))
    label = next(c["check"] for b in json.loads(BOUNDS_DOC.read_text())["bounds"] if b["id"] == entry.id for c in b["runs"][0]["checks"])
    doc = {"kind": "bounds", "bounds": [{"id": entry.id, "package": "vllm", "spec": ">=0.19.0,<0.32.0", "runs": [
        {"version": "0.32.0", "role": "fixed", "error": None, "checks": [{"check": label, "holds": True}]}]}]}
    found = consistency.held_outside(checked, doc)
    assert len(found) == 1 and "hold on 0.32.0, outside the bound" in found[0]
    doc["bounds"][0]["runs"][0]["checks"][0]["holds"] = False  # what the released 0.32.0 really gives
    assert consistency.held_outside(checked, doc) == []


def test_validate_lists_the_problems_and_exits_1(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(Path(matrix.__file__).resolve().parents[2] / "matrix", folder)
    toml = folder / "vllm.toml"
    text = toml.read_text()
    start = text.index('id = "vllm-flashinfer-prefill-hd256-fp8kv"')
    end = text.index("[[entry]]", start)
    toml.write_text(text[:start] + text[start:end].replace('evidence = "reported"', 'evidence = "checked"') + text[end:])
    out = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "validate", str(folder), "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["valid"] is False and len(doc["problems"]) == 1
    assert "vllm-flashinfer-prefill-hd256-fp8kv" in doc["problems"][0]


def _with(*entries: matrix.Entry) -> matrix.Matrix:
    """The bundled matrix with these entries replacing (or added to) the bundled ones of the same id."""
    ids = {e.id for e in entries}
    return dataclasses.replace(MATRIX, entries=[e for e in MATRIX.entries if e.id not in ids] + list(entries))


def test_the_report_to_entry_delay_the_docs_state_is_the_matrixs():
    delay = consistency.report_delay(MATRIX)
    text = (Path(__file__).resolve().parent.parent / "docs" / "matrix-knowledge.md").read_text()
    assert f"median {delay['median_days']} days over {delay['entries']} entries" in text
    assert delay["within_7_days"] == 0 and "none within 7" in text
    for e in MATRIX.entries:
        if e.reported and e.added:
            assert e.reported <= e.added, f"{e.id}: added before it was reported"


def test_a_remedy_says_where_it_was_shown_to_work():
    out = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "show", "vllm-full-graph-chunked-prefill-hang-sm12x", "--format", "json"],
                         capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    assert "FULL_DECODE_ONLY" in doc["remedy"] and "--enforce-eager" not in doc["justifies"]
    assert "vllm#40969" in doc["remedy_shown"] and "hung with --enforce-eager" in doc["remedy_shown"]
    console = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "show", "vllm-linear-backend-b12x-fail-fast"],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"}).stdout
    assert "shown to work" in console and "reported       2026-07-15, in the matrix 2026-11-28" in console
