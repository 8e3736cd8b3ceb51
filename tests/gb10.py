"""Realistic Facts of a DGX Spark (GB10, sm_121a) for matrix and engine tests.

`gb10_facts()` is a plausible healthy box: DGX OS, driver 580.95.05 (CUDA 13.0), torch 2.13.0+cu130,
triton 3.6.0, vLLM 0.22.0, FlashInfer 0.6.11.post2, nvidia-cutlass-dsl[cu13] 4.5.2 with the cu13 library
build active, system ptxas 13.0.88 plus Triton's two bundled ones (ptxas 12.8.93, and ptxas-blackwell
12.9.86 which Triton runs for GB10), CUTE_DSL_ARCH=sm_121a, all probes ok.

`gb10_facts(**changes)` edits that baseline; each keyword is a Facts field:
  - None makes the field unknown (e.g. packages=None: "could not be observed");
  - a dict merges into a dict field, a key mapped to None deletes that key
    (env={"CUTE_DSL_ARCH": None} unsets it, packages={"nvidia-cutlass-dsl-libs-cu13": None} uninstalls);
  - packages accept a version string for an installed package ("vllm": "0.18.0");
  - capabilities accept a plain value, wrapped as {"value": v, "evidence": ...};
  - a list or any other value replaces the field.
Shorthands: arch="sm_100a" (as detected), torch_cuda="12.6" (None = a CPU build),
modified={"vllm": ["vllm/foo.py"]} (files that differ from their RECORD),
cutedsl_build="libs-base". Builders for list fields: pin(), ptxas().
"""

from __future__ import annotations

import copy
from typing import Any

from packaging.utils import canonicalize_name

from sparkdoctor.facts import Facts
from tests.container.host_fixtures import host_health

SITE = "/opt/venv/lib/python3.12/site-packages"
SYSTEM_PTXAS = "/usr/local/cuda/bin/ptxas"
TRITON_PTXAS = f"{SITE}/triton/backends/nvidia/bin/ptxas"
# Triton >= 3.6 runs this second bundled ptxas for sm_100 and newer, GB10 included
TRITON_PTXAS_BLACKWELL = f"{SITE}/triton/backends/nvidia/bin/ptxas-blackwell"

# name -> version of the healthy stack (names as pip shows them)
BASELINE_PACKAGES = {
    "torch": "2.13.0+cu130",
    "triton": "3.6.0",
    "vllm": "0.22.0",
    "flashinfer-python": "0.6.11.post2",
    "flashinfer-cubin": "0.6.11.post2",
    "nvidia-cutlass-dsl": "4.5.2",
    "nvidia-cutlass-dsl-libs-base": "4.5.2",
    "nvidia-cutlass-dsl-libs-cu13": "4.5.2",
    "apache-tvm-ffi": "0.1.12",
    "cuda-python": "13.0.3",
}

BASELINE_ENV = {
    "CUTE_DSL_ARCH": "sm_121a",
    "TORCH_CUDA_ARCH_LIST": "12.1a",
    "FLASHINFER_CUDA_ARCH_LIST": "12.1a",
    "CUDA_HOME": "/usr/local/cuda",
}

# What the static reader finds in vLLM 0.22.0 / FlashInfer 0.6.11.post2 wheels
# (shared/research/vllm-flashinfer-static-facts.md).
BASELINE_CAPABILITIES = {
    "flashinfer.b12x_gemm": (True, "flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120_b12x.py"),
    "flashinfer.b12x_gemm_sm121": (True, "flashinfer/gemm/gemm_base.py:5162"),
    "flashinfer.b12x_auto_sm121": (False, "flashinfer/gemm/gemm_base.py:5753"),
    "flashinfer.b12x_hardcoded_sm120": (True, "flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120_b12x.py:1875"),
    "vllm.b12x_linear": (True, "vllm/model_executor/kernels/linear/nvfp4/flashinfer.py"),
    "vllm.b12x_linear_auto": (False, "vllm/model_executor/kernels/linear/__init__.py:373"),
    "vllm.b12x_moe": (True, "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py"),
    "vllm.b12x_moe_auto": (False, "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py"),
    "vllm.marlin_fp8_sm121": (True, "vllm/model_executor/layers/quantization/utils/marlin_utils.py"),
    "vllm.cg_estimate_clamped": (False, "vllm/v1/worker/gpu_model_runner.py:6327"),
    "vllm.mamba_align_assert": (True, "vllm/config/vllm.py:2102"),
    "vllm.cubin_archs": (["sm_120", "sm_120f"], "vllm/_C.abi3.so"),
    # what vLLM 0.22.0's envs.py uses when a variable is unset (read by the probe; False = no default)
    # nvidia-cutlass-dsl-libs-cu13 4.5.2's cute/nvgpu/warp/mma.py (the file on disk)
    "cutedsl.sm120_blockscaled_sm121a": (True, "nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu/warp/mma.py:225 admissible_archs = [sm_120a, sm_120f, sm_121a, sm_121f]"),
    "env_default.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": ("1", "vllm/envs.py:1954: default '1'"),
    "env_default.VLLM_USE_DEEP_GEMM": ("1", "vllm/envs.py:1384: default '1'"),
    "env_default.VLLM_FLASHINFER_MOE_BACKEND": ("latency", "vllm/envs.py:1547: default 'latency'"),
    "env_default.VLLM_USE_FLASHINFER_MOE_FP4": ("0", "vllm/envs.py:1444: default '0'"),
    "env_default.VLLM_MARLIN_INPUT_DTYPE": (False, "vllm/envs.py:1335: no default (unset stays unset)"),
    "env_default.VLLM_NVFP4_GEMM_BACKEND": (False, "vllm/envs.py:1679: no default (unset stays unset)"),
}

KERNEL_PROBES = ("cutedsl-nvfp4-mma", "cutedsl-e2m1-cvt", "e2m1-cvt", "fp4-mma", "nvfp4-mma", "mxf4-mma")


def package(name: str, version: str, **extra: Any) -> dict[str, Any]:
    """One installed distribution as the packages collector records it, files intact."""
    pkg = {
        "name": name,
        "version": version,
        "location": SITE,
        "integrity": "ok",
        "files_modified": [],
        "files_missing": [],
    }
    pkg.update(extra)
    return pkg


def ptxas(version: str, source: str, *, path: str | None = None, used_by: list[str] | None = None, sm_121a: bool | None = None) -> dict[str, Any]:
    """A ptxas installation; sm_121a defaults to what its version can target (12.9 and later)."""
    if sm_121a is None:
        major, minor = (int(x) for x in version.split(".")[:2])
        sm_121a = (major, minor) >= (12, 9)
    default_path = {"system": SYSTEM_PTXAS, "triton": TRITON_PTXAS}.get(source, f"{SITE}/nvidia/cu13/bin/ptxas")
    return {
        "tool": "ptxas",
        "path": path or default_path,
        "version": version,
        "source": source,
        "used_by": list(used_by or []),
        "sm_121a": sm_121a,
    }


def pin(requirement: str, file: str = "/etc/pip-constraints.txt") -> dict[str, Any]:
    """One constraints/requirements line, split the way the constraints collector records it."""
    for op in ("===", "==", "~=", ">=", "<=", "!=", ">", "<"):
        if op in requirement:
            name, _, rest = requirement.partition(op)
            specifier = op + rest
            break
    else:
        name, specifier = requirement, ""
    return {"file": file, "source": "constraints", "requirement": requirement, "name": name.strip(), "specifier": specifier.strip()}


def _baseline() -> Facts:
    packages = {canonicalize_name(n): package(n, v) for n, v in BASELINE_PACKAGES.items()}
    packages["torch"]["cuda"] = "13.0"
    return Facts(
        taken_at="2026-11-22T00:00:00+00:00",
        tool={"name": "sparkdoctor", "version": "0.1.0"},
        target={"kind": "python", "python": "/opt/venv/bin/python", "version": "3.12.3", "prefix": "/opt/venv", "implementation": "cpython"},
        host={"os": "Ubuntu 24.04", "machine": "aarch64", "kernel": "6.11.0-1016-nvidia"},
        arch={"value": "sm_121a", "source": "detected"},
        gpus=[{"index": 0, "name": "NVIDIA GB10", "cc": "12.1", "arch": "sm_121a", "memory_total_mib": 122570, "unified": True}],
        driver={"version": "580.95.05", "cuda": "13.0", "source": "nvml"},
        host_health=host_health("gb10-healthy"),
        toolkits=[
            ptxas("13.0.88", "system"),
            ptxas("12.8.93", "triton"),  # Triton 3.6's legacy ptxas, used only below sm_100
            ptxas("12.9.86", "triton", path=TRITON_PTXAS_BLACKWELL, used_by=["triton"]),
        ],
        packages=packages,
        cutedsl={
            "active_build": "libs-cu13",
            "bundled_cuda": "13.1",
            "installed_builds": ["libs-base", "libs-cu13"],
            "evidence": "_cutlass_ir.cpython-312-aarch64-linux-gnu.so matches the RECORD of nvidia-cutlass-dsl-libs-cu13",
        },
        env=dict(BASELINE_ENV),
        constraints=[],
        kernels={pid: {"status": "ok", "arch": "sm_121a"} for pid in KERNEL_PROBES},
        capabilities={k: {"value": v, "evidence": e} for k, (v, e) in BASELINE_CAPABILITIES.items()},
    )


def _merge(current: dict[str, Any] | None, changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(current or {})
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _apply_packages(facts: Facts, changes: dict[str, Any]) -> None:
    pkgs = dict(facts.packages or {})
    for name, value in changes.items():
        key = canonicalize_name(name)
        if value is None:
            pkgs.pop(key, None)
        elif isinstance(value, str):
            pkgs[key] = {**pkgs[key], "version": value} if key in pkgs else package(name, value)
        else:
            pkgs[key] = value
    facts.packages = pkgs


def _apply_capabilities(facts: Facts, changes: dict[str, Any]) -> None:
    caps = dict(facts.capabilities or {})
    for cap, value in changes.items():
        if value is None:
            caps.pop(cap, None)
        elif isinstance(value, dict) and "value" in value:
            caps[cap] = value
        else:
            caps[cap] = {"value": value, "evidence": "test"}
    facts.capabilities = caps


def _apply_torch_cuda(facts: Facts, cuda: str | None) -> None:
    torch = dict(facts.package("torch") or package("torch", "2.13.0"))
    base = torch["version"].split("+")[0]
    if cuda is None:
        torch["version"], torch["cuda"] = f"{base}+cpu", None
    else:
        torch["version"], torch["cuda"] = f"{base}+cu{cuda.replace('.', '')}", cuda
    facts.packages = {**(facts.packages or {}), "torch": torch}


def _apply_modified(facts: Facts, changes: dict[str, list[str]]) -> None:
    pkgs = dict(facts.packages or {})
    for name, files in changes.items():
        key = canonicalize_name(name)
        pkgs[key] = {**pkgs[key], "files_modified": list(files), "integrity": "modified" if files else "ok"}
    facts.packages = pkgs


_DICT_FIELDS = ("tool", "target", "host", "driver", "cutedsl", "env", "kernels", "recipe")


def gb10_facts(**changes: Any) -> Facts:
    """The healthy GB10 baseline with `changes` applied (see the module docstring)."""
    facts = copy.deepcopy(_baseline())
    for name, value in changes.items():
        if name == "arch":
            facts.arch = {"value": value, "source": "detected"} if isinstance(value, str) else value
        elif name == "torch_cuda":
            _apply_torch_cuda(facts, value)
        elif name == "modified":
            _apply_modified(facts, value)
        elif name == "cutedsl_build":
            facts.cutedsl = {**(facts.cutedsl or {}), "active_build": value}
        elif value is None:
            setattr(facts, name, None)
        elif name == "packages" and isinstance(value, dict):
            _apply_packages(facts, value)
        elif name == "capabilities" and isinstance(value, dict):
            _apply_capabilities(facts, value)
        elif name in _DICT_FIELDS and isinstance(value, dict):
            setattr(facts, name, _merge(getattr(facts, name), value))
        elif hasattr(facts, name):
            setattr(facts, name, value)
        else:
            raise TypeError(f"gb10_facts: unknown change {name!r}")
    return facts
