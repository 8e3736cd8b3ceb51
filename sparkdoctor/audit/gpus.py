"""Memory bandwidth and capacity of the GPUs people serve on, by name (vendor datasheets).

Peak DRAM bandwidth is the roofline's denominator: single-stream decode cannot read weights faster. Values
are the datasheet peaks (achieved is lower: that is what bench's "% of ceiling" shows):
- GB10 / DGX Spark: 273 GB/s LPDDR5X, 128 GB unified (NVIDIA DGX Spark datasheet); the GPU sees
  122570 MiB of it (NVML memory.total on a DGX Spark).
- H100 SXM5 80 GB: 3.35 TB/s; H100 PCIe 80 GB: 2.0 TB/s; H100 NVL 94 GB: 3.9 TB/s (NVIDIA H100 datasheet).
- H200 141 GB (SXM and NVL): 4.8 TB/s (NVIDIA H200 datasheet). B200 180 GB: 8 TB/s (DGX B200 datasheet).
- A100 80 GB SXM: 2,039 GB/s; A100 80 GB PCIe: 1,935 GB/s; A100 40 GB: 1,555 GB/s (A100 datasheet).
- L40S 48 GB: 864 GB/s; RTX PRO 6000 Blackwell 96 GB: 1,792 GB/s; RTX 5090 32 GB: 1,792 GB/s; RTX 4090 24 GB:
  1,008 GB/s (product pages).
Order matters: the first pattern that matches an NVML name wins (so "H100 NVL" before "H100").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparkdoctor.collect.gpu import Failed, Missing, smi_query


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    bandwidth_gbs: float
    memory_gib: float
    pattern: str


GPUS = [
    Gpu("gb10", "NVIDIA GB10 (DGX Spark)", 273, 122570 / 1024, r"\bGB10\b"),
    Gpu("h100-nvl", "NVIDIA H100 NVL", 3900, 94, r"H100 NVL"),
    Gpu("h100-pcie", "NVIDIA H100 PCIe", 2000, 80, r"H100 PCIe"),
    Gpu("h100-sxm", "NVIDIA H100 SXM5 80GB", 3350, 80, r"H100"),
    Gpu("h200", "NVIDIA H200", 4800, 141, r"H200"),
    Gpu("b200", "NVIDIA B200", 8000, 180, r"B200"),
    Gpu("a100-80gb-pcie", "NVIDIA A100 80GB PCIe", 1935, 80, r"A100 80GB PCIe"),
    Gpu("a100-80gb-sxm", "NVIDIA A100 SXM4 80GB", 2039, 80, r"A100.*80GB"),
    Gpu("a100-40gb", "NVIDIA A100 40GB", 1555, 40, r"A100"),
    Gpu("l40s", "NVIDIA L40S", 864, 48, r"L40S"),
    Gpu("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell", 1792, 96, r"RTX PRO 6000"),
    Gpu("rtx-5090", "NVIDIA GeForce RTX 5090", 1792, 32, r"RTX 5090"),
    Gpu("rtx-4090", "NVIDIA GeForce RTX 4090", 1008, 24, r"RTX 4090"),
]
DEFAULT = GPUS[0]


def by_name(text: str) -> Gpu | None:
    """The table row for a key (`h100-sxm`) or a GPU name as NVML/nvidia-smi spells it."""
    lowered = text.strip().lower()
    for gpu in GPUS:
        if gpu.key == lowered:
            return gpu
    for gpu in GPUS:
        if re.search(gpu.pattern, text, re.IGNORECASE):
            return gpu
    return None


def detect() -> tuple[str | None, str | None]:
    """(the first GPU's name, why not) via nvidia-smi, through sparkdoctor.proc with a short timeout."""
    try:
        seen = smi_query()
    except (Missing, Failed) as exc:
        return None, str(exc)
    if not seen.gpus:
        return None, "nvidia-smi lists no GPU"
    return str(seen.gpus[0].get("name")), None
