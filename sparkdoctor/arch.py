"""CUDA arch names and the one policy for a box whose GPU arch is not known.

Written once here (the arch regex and the `sm_121a` default were repeated in four modules).

The policy: sparkdoctor is a GB10 tool. On a builder or image build with no GPU, or where the GPU
could not be read, and no `--arch`, it evaluates the target as the GB10 it is being built for
(`sm_121a`) and says "assumed" wherever that arch is used. An unknown arch never makes an entry
read as clear, and a CI builder that forgot `--arch` still gets the GB10 verdict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

DEFAULT_ARCH = "sm_121a"

ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)\Z")  # \Z: "sm_121a\n" is not an arch

# Every arch number a CUDA toolkit has targeted since Maxwell (sm_101 became sm_110 in CUDA 13).
KNOWN_NUMBERS = frozenset({50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121})
# The first CUDA release whose ptxas knows each arch (suffix "" / "a" / "f"): for explanations.
FIRST_CUDA = {89: (11, 8), 90: (12, 0), 100: (12, 8), 120: (12, 8), 121: (12, 9)}
# The first PTX ISA version with each arch as a .target (family "f" targets arrived with 8.8).
FIRST_PTX = {89: (7, 8), 90: (8, 0), 100: (8, 6), 120: (8, 7), 121: (8, 8)}

# Facts.arch["source"]: how the arch in use was decided.
DETECTED, GIVEN, ASSUMED = "detected", "given", "assumed"


def parse_arch(arch: str) -> tuple[int, str]:
    """'sm_121a' -> (121, 'a'); ValueError for anything else."""
    match = ARCH_RE.match(arch or "") if isinstance(arch, str) else None
    if not match:
        raise ValueError(f"not a CUDA arch: {arch!r} (expected e.g. sm_121a)")
    return int(match.group(1)), match.group(2)


def is_arch(arch: object) -> bool:
    """Shaped like an arch (sm_NN[N][a|f]); says nothing about whether it exists."""
    return isinstance(arch, str) and ARCH_RE.match(arch) is not None


def real_arch_problem(arch: str) -> str | None:
    """Why `arch` is not a real CUDA target (None when it is): for --arch and matrix/verify input."""
    if not is_arch(arch):
        return "expected an arch like sm_121a, sm_121, sm_90a"
    number, suffix = parse_arch(arch)
    if number not in KNOWN_NUMBERS:
        return f"no CUDA GPU has arch sm_{number} (known: {', '.join(f'sm_{n}' for n in sorted(KNOWN_NUMBERS))})"
    if suffix == "a" and number < 90:
        return "arch-specific ('a') targets exist from sm_90 on"
    if suffix == "f" and number < 100:
        return "family ('f') targets exist from sm_100 on"
    return None


def arch_base(arch: str) -> str:
    return f"sm_{parse_arch(arch)[0]}"


def arch_cc(arch: str) -> tuple[int, int]:
    number = parse_arch(arch)[0]
    return number // 10, number % 10


def first_cuda_for(arch: str) -> tuple[int, int] | None:
    number, suffix = parse_arch(arch)
    first = FIRST_CUDA.get(number)
    if first and suffix == "f":
        first = max(first, (12, 9))  # family targets arrived with CUDA 12.9
    return first


def assumed(why: str, detected: str | None = None) -> dict[str, object]:
    """Facts.arch when nothing better is known: the GB10 arch, marked as an assumption and why."""
    arch: dict[str, object] = {"value": DEFAULT_ARCH, "source": ASSUMED, "why": why}
    if detected:
        arch["detected"] = detected
    return arch


def settle(arch: Mapping[str, object] | None) -> dict[str, Any]:
    """Apply the policy to an arch record (from a live run or an older snapshot) with no value."""
    arch = dict(arch or {})
    if arch.get("value"):
        return arch
    source = arch.get("source")
    why = {"none": "no GPU detected", "unknown": "the GPU arch could not be read"}.get(
        source if isinstance(source, str) else "", "the GPU arch is not known")
    return assumed(why)


def describe_source(arch: Mapping[str, object]) -> str:
    """'given', 'detected', or 'assumed: no GPU detected': for evidence lines and headers."""
    source = arch.get("source") or "unknown"
    if source == ASSUMED:
        return f"assumed: {arch.get('why') or 'not detected'}; --arch to choose"
    return str(source)
