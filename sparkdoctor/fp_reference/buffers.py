"""The bytes of a probe run: deterministic inputs (a fixed LCG, little-endian packing, lane-major
register fragments, the C accumulator) and `Expected`, what one output buffer is compared against,
element by element."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sparkdoctor.fp_reference.layouts import frag_c_m16n8


@dataclass
class Expected:
    """The expected contents of one output buffer, element by element in buffer order."""

    name: str
    fmt: str  # struct code of one element: "f" (f32) or "B" (byte)
    values: list
    labels: list[str]  # what each element is, for mismatch reports ("D[3][5]", "pair 7 hi")

    def compare(self, data: bytes, show: int = 3) -> tuple[bool, str]:
        size = struct.calcsize("<" + self.fmt)
        if len(data) != size * len(self.values):
            return False, f"{self.name}: got {len(data)} bytes, expected {size * len(self.values)}"
        got = struct.unpack(f"<{len(self.values)}{self.fmt}", data)
        bad = [i for i, (g, w) in enumerate(zip(got, self.values, strict=False)) if not _same(g, w)]
        if not bad:
            return True, f"{self.name}: all {len(self.values)} values match the reference"
        shown = "; ".join(f"{self.labels[i]} got {_show(got[i], self.fmt)} want {_show(self.values[i], self.fmt)}" for i in bad[:show])
        more = f" (+{len(bad) - show} more)" if len(bad) > show else ""
        return False, f"{self.name}: {len(bad)} of {len(self.values)} differ: {shown}{more}"


def _same(got, want) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return got == want


def _show(value, fmt: str) -> str:
    return f"{value:#04x}" if fmt == "B" else repr(value)


# ---- deterministic input data --------------------------------------------------------------------


class Lcg:
    """A fixed 64-bit LCG: the same probe inputs on every Python version and machine."""

    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def below(self, n: int) -> int:
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return (self.state >> 33) % n

    def pick(self, items: Sequence):
        return items[self.below(len(items))]


def pack_u32(words: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


def pack_f32(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def unpack_u32(data: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(data) // 4}I", data)


def unpack_f32(data: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(data) // 4}f", data)


LANES = 32


def pack_fragments(
    matrix_codes: Sequence[Sequence[int]], regs: int, per_reg: int, bits: int, where: Callable[[int, int], tuple[int, int]], shift: int = 0
) -> bytes:
    """Lane-major register words: element i of a lane sits in register i // per_reg at slot i % per_reg."""
    words = []
    for lane in range(LANES):
        lane_words = [0] * regs
        for i in range(regs * per_reg):
            r, c = where(lane, i)
            lane_words[i // per_reg] |= ((matrix_codes[r][c] << shift) & ((1 << bits) - 1)) << (bits * (i % per_reg))
        words += lane_words
    return pack_u32(words)


def unpack_fragments(
    data: bytes, rows: int, cols: int, regs: int, per_reg: int, bits: int, where: Callable[[int, int], tuple[int, int]], shift: int = 0
) -> list[list[int]]:
    words = unpack_u32(data)
    out: list[list[int | None]] = [[None] * cols for _ in range(rows)]
    for lane in range(LANES):
        for i in range(regs * per_reg):
            word = words[lane * regs + i // per_reg]
            field = (word >> (bits * (i % per_reg))) & ((1 << bits) - 1)
            r, c = where(lane, i)
            out[r][c] = field >> shift
    full = [[v for v in row if v is not None] for row in out]
    if any(len(row) != cols for row in full):
        raise ValueError("fragment layout does not cover the matrix")
    return full


def c_buffer(rng: Lcg, step: float, span: int) -> tuple[list[list[float]], bytes]:
    """C as a 16x8 matrix of small multiples of `step`, and its lane-major fragment bytes."""
    c = [[rng.below(2 * span + 1) * step - span * step for _ in range(8)] for _ in range(16)]
    values = [c[r][col] for lane in range(LANES) for r, col in (frag_c_m16n8(lane, i) for i in range(4))]
    return c, pack_f32(values)


def c_matrix(data: bytes) -> list[list[float]]:
    values = unpack_f32(data)
    c = [[0.0] * 8 for _ in range(16)]
    for lane in range(LANES):
        for i in range(4):
            r, col = frag_c_m16n8(lane, i)
            c[r][col] = values[lane * 4 + i]
    return c


def expected_d(d: list[list[float]]) -> Expected:
    values, labels = [], []
    for lane in range(LANES):
        for i in range(4):
            r, col = frag_c_m16n8(lane, i)
            values.append(d[r][col])
            labels.append(f"D[{r}][{col}]")
    return Expected("d", "f", values, labels)


D_BYTES = LANES * 4 * 4  # 16x8 f32

