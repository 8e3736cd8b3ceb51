"""Which lane holds which matrix element (and which scale factor) in the mma.sync fragments the
probes use; from PTX ISA 9.x "Matrix Fragments for mma.m16n8k32" / "mma.m16n8k64" and "Block
Scaling for mma.sync". groupID = lane >> 2, threadID_in_group = lane % 4."""

from __future__ import annotations


def frag_c_m16n8(lane: int, i: int) -> tuple[int, int]:
    """Accumulator C/D element i (0..3) of `lane`: (row, col); same for m16n8k32 and m16n8k64."""
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8, t * 2 + (i & 1))


def frag_a_m16n8k32_8bit(lane: int, i: int) -> tuple[int, int]:
    """A element i (0..15) of `lane` for 8-bit containers (e4m3, and e2m1 under .kind::f8f6f4)."""
    g, t = lane >> 2, lane % 4
    row = g if (i < 4 or 8 <= i < 12) else g + 8
    col = t * 4 + (i & 0x3) + (16 if i >= 8 else 0)
    return row, col


def frag_b_m16n8k32_8bit(lane: int, i: int) -> tuple[int, int]:
    """B element i (0..7) of `lane`: (k, n)."""
    g, t = lane >> 2, lane % 4
    return t * 4 + (i & 0x3) + (16 if i >= 4 else 0), g


def frag_a_m16n8k64_4bit(lane: int, i: int) -> tuple[int, int]:
    """A element i (0..31) of `lane` for packed e2m1 (.kind::mxf4 / .kind::mxf4nvf4)."""
    g, t = lane >> 2, lane % 4
    row = g if (i < 8 or 16 <= i < 24) else g + 8
    col = t * 8 + (i & 0x7) + (32 if i >= 16 else 0)
    return row, col


def frag_b_m16n8k64_4bit(lane: int, i: int) -> tuple[int, int]:
    """B element i (0..15) of `lane`: (k, n)."""
    g, t = lane >> 2, lane % 4
    return t * 8 + (i & 0x7) + (32 if i >= 8 else 0), g


def scale_a_row(lane: int) -> int | None:
    """Row of scale_A that `lane` supplies with thread-id-a = 0: lanes 4g and 4g+1 give rows g, g+8."""
    g, t = lane >> 2, lane % 4
    return {0: g, 1: g + 8}.get(t)


def scale_b_col(lane: int) -> int | None:
    """Column of scale_B that `lane` supplies with thread-id-b = 0: lane 4g gives column g."""
    g, t = lane >> 2, lane % 4
    return g if t == 0 else None

