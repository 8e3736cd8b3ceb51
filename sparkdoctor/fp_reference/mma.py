"""The MMA result a GPU must reproduce: D = (A * scale_A) x (B * scale_B) + C, computed exactly in
fractions, and refused when the GPU's accumulation order could change the f32 result (so the
comparison with the GPU can be exact)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction


def mma_reference(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    c: Sequence[Sequence[float]],
    scale_a: Sequence[Sequence[float]] | None = None,
    scale_b: Sequence[Sequence[float]] | None = None,
    block: int | None = None,
) -> list[list[float]]:
    """D = (A * scale_A) x (B * scale_B) + C, computed exactly.

    scale_a is M x (K/block), scale_b is (K/block) x N: every run of `block` values along K of a
    row of A (column of B) is multiplied by one scale factor. Raises if an exact result does not
    fit an f32, because then the GPU's accumulation order would matter and the check would not be
    exact.
    """
    m, k, n = len(a), len(b), len(b[0])
    if (scale_a is None) != (scale_b is None) or (scale_a is not None and not block):
        raise ValueError("scale_a, scale_b and block go together")
    out: list[list[float]] = []
    for row in range(m):
        out_row = []
        for col in range(n):
            terms = [Fraction(c[row][col])]
            for kk in range(k):
                term = Fraction(a[row][kk]) * Fraction(b[kk][col])
                if scale_a is not None and scale_b is not None and block:
                    term *= Fraction(scale_a[row][kk // block]) * Fraction(scale_b[kk // block][col])
                terms.append(term)
            if not _order_free_in_f32(terms):
                raise ValueError(f"D[{row}][{col}]: a partial sum may round in f32, so the order of accumulation would matter, or leave the normal range of f32")
            out_row.append(float(sum(terms)))
        out.append(out_row)
    return out


def _order_free_in_f32(terms: list[Fraction]) -> bool:
    """True when every partial sum, in any order, is exact in f32: all terms are multiples of one
    power of two `unit` no smaller than f32's least normal 2^-126 (nothing subnormal, which a
    tensor core may flush), and the sum of their magnitudes stays below 2^24 units and 2^128."""
    nonzero = [t for t in terms if t]
    if not nonzero:
        return True
    for t in nonzero:
        if t.denominator & (t.denominator - 1):
            return False  # not a dyadic rational: never exact in binary floating point
    unit = min(Fraction(_low_bit(t.numerator), t.denominator) for t in nonzero)
    total = sum(abs(t) for t in nonzero)
    return unit >= Fraction(1, 2**126) and total / unit < 2**24 and total < 2**128


def _low_bit(x: int) -> int:
    x = abs(x)
    return x & -x

