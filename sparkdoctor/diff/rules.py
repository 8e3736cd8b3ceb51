"""Which differences between two snapshots put a multi-node run (or an upgrade) at risk.

Two nodes of one tensor-parallel run must agree on what decides numerics and communication:
vLLM, torch and its CUDA build, NCCL (pip wheel and any nccl package), Triton, FlashInfer, the
cutlass-dsl build, the driver and its CUDA, the GPU arch, the container image content, the
ptxas that compiles their kernels, and the NCCL/Gloo/CUTE/arch environment. Differing driver
versions between nodes have broken Ray/vLLM clusters (vllm-project/vllm#4114); the same NCCL
version string can be two binaries (field-2026.md B18); eugr's launcher refuses two nodes whose
image fingerprints differ. Everything else (another numpy, a different venv path, a host's live
memory reading, the time of the snapshot) is benign.

Data, not branches: a new risky package or variable is one entry in a tuple below.
"""

from __future__ import annotations

from sparkdoctor.facts import FINGERPRINT_ENV, decides_speed, is_tracked

RISKY, BENIGN = "risky", "benign"

# Besides the tracked serving stack (facts.TRACKED_PREFIXES): package-name prefixes whose version
# must agree across nodes.
RISKY_PACKAGE_PREFIXES = ("nvidia-nccl", "nvidia-cuda-runtime", "nvidia-cublas", "nvidia-cudnn", "nvidia-nvshmem",
                          "nvidia-cuda-nvrtc", "ray", "deep-gemm", "deep-ep", "xformers", "sglang", "pytorch-triton")
# Environment variables that must be the same on every node (communication, arch, kernel choice).
RISKY_ENV_PREFIXES = ("NCCL_", "GLOO_", "TP_SOCKET", "UCX_", "OMPI_MCA_", "CUTE_DSL_", "TRITON_", "VLLM_", "TORCH_")
RISKY_ENV_NAMES = frozenset({*FINGERPRINT_ENV, "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES",
                             "RAY_memory_monitor_refresh_ms"})
# Variables that differ between nodes by design (each node's own address or rank).
PER_NODE_ENV = frozenset({"VLLM_HOST_IP", "NODE_RANK", "RANK", "LOCAL_RANK", "VLLM_PORT"})


def package_verdict(name: str) -> tuple[str, str]:
    if is_tracked(name) or "nccl" in name or name.startswith(RISKY_PACKAGE_PREFIXES):
        return RISKY, "part of the serving stack: every node must run the same build"
    if decides_speed(name):  # in bench's toolchain fingerprint: `rerun` calls a conclusion measured on the other stale
        return BENIGN, "not a multi-node hazard, but it decides speed: a benchmark taken with one is stale with the other"
    return BENIGN, "not part of the serving stack"


def env_verdict(name: str) -> tuple[str, str]:
    if name in PER_NODE_ENV:
        return BENIGN, "differs per node by design"
    if name in RISKY_ENV_NAMES or name.startswith(RISKY_ENV_PREFIXES):
        return RISKY, "decides communication, arch or kernel choice: must match on every node"
    return BENIGN, "not a setting the serving stack reads for kernels or communication"


def target_key_verdict(key: str) -> tuple[str, str]:
    """A key of the target record (python, kind, a container's image, ...)."""
    lowered = key.lower()
    if "fingerprint" in lowered:
        return RISKY, "a different image content: eugr's launcher refuses to start two nodes like this"
    if lowered in ("kind", "implementation"):
        return RISKY, "a different kind of target"
    if "image" in lowered:
        return BENIGN, "image ids differ between stores and after save/load; the content fingerprint decides"
    return BENIGN, "where the environment lives, not what it holds"
