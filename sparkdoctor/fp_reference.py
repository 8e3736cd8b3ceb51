"""Pure-Python references for the kernel probes: the number formats, the fragment layouts and the
MMA results a GPU must reproduce exactly.

Sources (PTX ISA 9.x): "Data Movement and Conversion Instructions: cvt" (e2m1x2 packing and the
.satfinite rules), "Matrix Fragments for mma.m16n8k32" / "mma.m16n8k64" (which lane holds which
element), "Block Scaling for mma.sync" (which lane and byte supply each scale factor) and
"Multiply-and-Accumulate Instruction: mma" (e2m1 sits in bits [5:2] of an 8-bit container for
.kind::f8f6f4; packed two per byte for .kind::mxf4 / .kind::mxf4nvf4).

Every probe has an `*_inputs()` generator (the exact bytes each kernel parameter receives) and an
`*_expected(buffers)` reference that reads those same bytes back, so a mistake in the generator
cannot hide a mistake in the reference. Inputs are chosen so every result is exactly representable
in f32 whatever the accumulation order: the comparison with the GPU is exact.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

# ---- number formats ------------------------------------------------------------------------------

E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # codes 0..7; bit 3 is the sign
E2M1_MAX_CODE = 0x7


def e2m1_decode(code: int) -> float:
    if not 0 <= code <= 0xF:
        raise ValueError(f"e2m1 code {code!r} is not 4 bits")
    magnitude = E2M1_MAGNITUDES[code & 0x7]
    return -magnitude if code & 0x8 else magnitude


def e2m1_encode(x: float) -> int:
    """f32 -> e2m1 code as `cvt.rn.satfinite.e2m1x2.f32` does it.

    Round to nearest, ties to the even code; |x| beyond 6 (infinities too) saturates to the
    sign-preserved maximum 6; NaN becomes +6 (e2m1 has no NaN; the ISA says NaN results are
    converted to positive MAX_NORM); the sign of zero and of values that round to zero is kept.
    """
    if math.isnan(x):
        return E2M1_MAX_CODE
    sign = 0x8 if math.copysign(1.0, x) < 0 else 0x0
    a = abs(x)
    if a >= E2M1_MAGNITUDES[-1]:
        return sign | E2M1_MAX_CODE
    # The grid values and any f32 are exact in a double, so these differences are exact.
    best = 0
    for code in range(1, 8):
        d_best = abs(a - E2M1_MAGNITUDES[best])
        d_code = abs(a - E2M1_MAGNITUDES[code])
        if d_code < d_best or (d_code == d_best and code % 2 == 0):
            best = code
    return sign | best


def _e4m3_magnitude(bits7: int) -> float:
    exponent, mantissa = bits7 >> 3, bits7 & 0x7
    if exponent == 0:
        return mantissa * 2.0**-9  # subnormal: m/8 * 2^(1-7)
    return (1 + mantissa / 8) * 2.0 ** (exponent - 7)


def e4m3_decode(byte: int) -> float:
    """OCP FP8 E4M3 (the 'fn' variant): bias 7, no infinities, S.1111.111 is NaN, max 448."""
    if not 0 <= byte <= 0xFF:
        raise ValueError(f"e4m3 byte {byte!r} is not 8 bits")
    if byte & 0x7F == 0x7F:
        return math.nan
    magnitude = _e4m3_magnitude(byte & 0x7F)
    return -magnitude if byte & 0x80 else magnitude


def ue4m3_decode(byte: int) -> float:
    """The unsigned E4M3 of NVFP4 scale factors: the E4M3 encoding with the sign bit clear."""
    if not 0 <= byte <= 0x7F:
        raise ValueError(f"ue4m3 byte {byte:#x} has the sign bit set (or is not 8 bits)")
    if byte == 0x7F:
        return math.nan
    return _e4m3_magnitude(byte)


def ue8m0_decode(byte: int) -> float:
    """The MX scale format: a bare power of two, 2^(byte-127); 0xFF is NaN."""
    if not 0 <= byte <= 0xFF:
        raise ValueError(f"ue8m0 byte {byte!r} is not 8 bits")
    if byte == 0xFF:
        return math.nan
    return 2.0 ** (byte - 127)


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f32_from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def is_exact_f32(x: float) -> bool:
    return math.isnan(x) or struct.unpack("<f", struct.pack("<f", x))[0] == x


# ---- fragment layouts (groupID = lane >> 2, threadID_in_group = lane % 4) -------------------------


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


# ---- MMA reference -------------------------------------------------------------------------------


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
                raise ValueError(f"D[{row}][{col}]: a partial sum may round in f32, so the order of accumulation would matter")
            out_row.append(float(sum(terms)))
        out.append(out_row)
    return out


def _order_free_in_f32(terms: list[Fraction]) -> bool:
    """True when every partial sum, in any order, is exact in f32: all terms are multiples of one
    power of two `unit` and the sum of their magnitudes stays below 2^24 units."""
    nonzero = [t for t in terms if t]
    if not nonzero:
        return True
    for t in nonzero:
        if t.denominator & (t.denominator - 1):
            return False  # not a dyadic rational: never exact in binary floating point
    unit = min(Fraction(_low_bit(t.numerator), t.denominator) for t in nonzero)
    return sum(abs(t) for t in nonzero) / unit < 2**24


def _low_bit(x: int) -> int:
    x = abs(x)
    return x & -x


# ---- what a probe run is compared against --------------------------------------------------------


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
        bad = [i for i, (g, w) in enumerate(zip(got, self.values)) if not _same(g, w)]
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


class _Lcg:
    """A fixed 64-bit LCG: the same probe inputs on every Python version and machine."""

    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def below(self, n: int) -> int:
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        return (self.state >> 33) % n

    def pick(self, items: Sequence):
        return items[self.below(len(items))]


def _pack_u32(words: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


def _pack_f32(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _unpack_u32(data: bytes) -> tuple[int, ...]:
    return struct.unpack(f"<{len(data) // 4}I", data)


def _unpack_f32(data: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(data) // 4}f", data)


LANES = 32


def _pack_fragments(
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
    return _pack_u32(words)


def _unpack_fragments(
    data: bytes, rows: int, cols: int, regs: int, per_reg: int, bits: int, where: Callable[[int, int], tuple[int, int]], shift: int = 0
) -> list[list[int]]:
    words = _unpack_u32(data)
    out: list[list[int | None]] = [[None] * cols for _ in range(rows)]
    for lane in range(LANES):
        for i in range(regs * per_reg):
            word = words[lane * regs + i // per_reg]
            field = (word >> (bits * (i % per_reg))) & ((1 << bits) - 1)
            r, c = where(lane, i)
            out[r][c] = field >> shift
    if any(v is None for row in out for v in row):
        raise ValueError("fragment layout does not cover the matrix")
    return out  # type: ignore[return-value]


def _c_buffer(rng: _Lcg, step: float, span: int) -> tuple[list[list[float]], bytes]:
    """C as a 16x8 matrix of small multiples of `step`, and its lane-major fragment bytes."""
    c = [[rng.below(2 * span + 1) * step - span * step for _ in range(8)] for _ in range(16)]
    values = [c[r][col] for lane in range(LANES) for r, col in (frag_c_m16n8(lane, i) for i in range(4))]
    return c, _pack_f32(values)


def _c_matrix(data: bytes) -> list[list[float]]:
    values = _unpack_f32(data)
    c = [[0.0] * 8 for _ in range(16)]
    for lane in range(LANES):
        for i in range(4):
            r, col = frag_c_m16n8(lane, i)
            c[r][col] = values[lane * 4 + i]
    return c


def _expected_d(d: list[list[float]]) -> Expected:
    values, labels = [], []
    for lane in range(LANES):
        for i in range(4):
            r, col = frag_c_m16n8(lane, i)
            values.append(d[r][col])
            labels.append(f"D[{r}][{col}]")
    return Expected("d", "f", values, labels)


D_BYTES = LANES * 4 * 4  # 16x8 f32


# ---- fp8-mma-sm90: mma.sync m16n8k32 e4m3 x e4m3 + f32 -------------------------------------------

# E4M3 bytes of +-{0, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4}: every product and sum stays exact in f32
# (and in the f16 products Hopper's lowering uses).
_E4M3_SAFE = (0x00, 0x28, 0x30, 0x34, 0x38, 0x3C, 0x40, 0x44, 0x48)
_E4M3_SAFE = _E4M3_SAFE + tuple(b | 0x80 for b in _E4M3_SAFE)


def fp8_mma_inputs() -> dict[str, bytes | int]:
    rng = _Lcg(0x5EED_F8)
    a = [[rng.pick(_E4M3_SAFE) for _ in range(32)] for _ in range(16)]
    b = [[rng.pick(_E4M3_SAFE) for _ in range(8)] for _ in range(32)]
    _, c_bytes = _c_buffer(rng, 0.25, 16)
    return {
        "a": _pack_fragments(a, 4, 4, 8, frag_a_m16n8k32_8bit),
        "b": _pack_fragments(b, 2, 4, 8, frag_b_m16n8k32_8bit),
        "c": c_bytes,
        "d": D_BYTES,
    }


def fp8_mma_expected(buffers: dict[str, bytes]) -> list[Expected]:
    a = _unpack_fragments(buffers["a"], 16, 32, 4, 4, 8, frag_a_m16n8k32_8bit)
    b = _unpack_fragments(buffers["b"], 32, 8, 2, 4, 8, frag_b_m16n8k32_8bit)
    d = mma_reference(_decode(a, e4m3_decode), _decode(b, e4m3_decode), _c_matrix(buffers["c"]))
    return [_expected_d(d)]


def _decode(codes: list[list[int]], decode: Callable[[int], float]) -> list[list[float]]:
    return [[decode(v) for v in row] for row in codes]


# ---- fp4-mma: mma.sync m16n8k32 .kind::f8f6f4 e2m1 x e2m1 + f32 ------------------------------------

E2M1_CONTAINER_SHIFT = 2  # .kind::f8f6f4: the e2m1 code sits in bits [5:2] of its byte


def fp4_mma_inputs() -> dict[str, bytes | int]:
    rng = _Lcg(0x5EED_F4)
    a = [[rng.below(16) for _ in range(32)] for _ in range(16)]
    b = [[rng.below(16) for _ in range(8)] for _ in range(32)]
    _, c_bytes = _c_buffer(rng, 0.25, 16)
    return {
        "a": _pack_fragments(a, 4, 4, 8, frag_a_m16n8k32_8bit, shift=E2M1_CONTAINER_SHIFT),
        "b": _pack_fragments(b, 2, 4, 8, frag_b_m16n8k32_8bit, shift=E2M1_CONTAINER_SHIFT),
        "c": c_bytes,
        "d": D_BYTES,
    }


def fp4_mma_expected(buffers: dict[str, bytes]) -> list[Expected]:
    a = _unpack_fragments(buffers["a"], 16, 32, 4, 4, 8, frag_a_m16n8k32_8bit, shift=E2M1_CONTAINER_SHIFT)
    b = _unpack_fragments(buffers["b"], 32, 8, 2, 4, 8, frag_b_m16n8k32_8bit, shift=E2M1_CONTAINER_SHIFT)
    d = mma_reference(_decode(a, e2m1_decode), _decode(b, e2m1_decode), _c_matrix(buffers["c"]))
    return [_expected_d(d)]


# ---- block-scaled m16n8k64 e2m1 (nvfp4-mma: ue4m3 per 16, mxf4-mma: ue8m0 per 32) ----------------

# ue4m3 scales 2^-5, 0.125, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4. No subnormal scale: mixed with the
# large products it would make the exact sum need more than f32's 24 bits.
_UE4M3_SCALES = (0x10, 0x20, 0x28, 0x30, 0x34, 0x38, 0x3C, 0x40, 0x44, 0x48)
_UE4M3_DECOY = 0x50  # 8.0: what lanes that must NOT supply a scale hold, so a wrong pick shows
# ue8m0 scales: 2^-3 .. 2^3.
_UE8M0_SCALES = (124, 125, 126, 127, 128, 129, 130)
_UE8M0_DECOY = 133  # 2^6


def _scale_words(rng: _Lcg, rows: int, blocks: int, choices: Sequence[int], decoy: int, lane_index: Callable[[int], int | None]):
    """A rows x blocks scale matrix and the per-lane b32 words that carry it (byte j = K block j)."""
    scales = [[rng.pick(choices) for _ in range(blocks)] for _ in range(rows)]
    words = []
    for lane in range(LANES):
        index = lane_index(lane)
        row = scales[index] if index is not None else [decoy] * blocks
        word = 0
        for j, byte in enumerate(row):
            word |= byte << (8 * j)
        for j in range(blocks, 4):  # bytes no selector reads: decoys too
            word |= decoy << (8 * j)
        words.append(word)
    return scales, _pack_u32(words)


def _scales_from_words(data: bytes, rows: int, blocks: int, lane_index: Callable[[int], int | None]) -> list[list[int]]:
    words = _unpack_u32(data)
    out: list[list[int] | None] = [None] * rows
    for lane in range(LANES):
        index = lane_index(lane)
        if index is not None:
            out[index] = [(words[lane] >> (8 * j)) & 0xFF for j in range(blocks)]
    if any(r is None for r in out):
        raise ValueError("scale lanes do not cover every row/column")
    return out  # type: ignore[return-value]


def _block_scaled_inputs(seed: int, blocks: int, choices: Sequence[int], decoy: int) -> dict[str, bytes | int]:
    rng = _Lcg(seed)
    a = [[rng.below(16) for _ in range(64)] for _ in range(16)]
    b = [[rng.below(16) for _ in range(8)] for _ in range(64)]
    _, c_bytes = _c_buffer(rng, 0.25, 16)
    _, sfa = _scale_words(rng, 16, blocks, choices, decoy, scale_a_row)
    _, sfb = _scale_words(rng, 8, blocks, choices, decoy, scale_b_col)
    return {
        "a": _pack_fragments(a, 4, 8, 4, frag_a_m16n8k64_4bit),
        "b": _pack_fragments(b, 2, 8, 4, frag_b_m16n8k64_4bit),
        "c": c_bytes,
        "sfa": sfa,
        "sfb": sfb,
        "d": D_BYTES,
    }


def _block_scaled_expected(buffers: dict[str, bytes], blocks: int, decode_scale: Callable[[int], float]) -> list[Expected]:
    a = _unpack_fragments(buffers["a"], 16, 64, 4, 8, 4, frag_a_m16n8k64_4bit)
    b = _unpack_fragments(buffers["b"], 64, 8, 2, 8, 4, frag_b_m16n8k64_4bit)
    sfa = _decode(_scales_from_words(buffers["sfa"], 16, blocks, scale_a_row), decode_scale)
    sfb_cols = _decode(_scales_from_words(buffers["sfb"], 8, blocks, scale_b_col), decode_scale)
    sfb = [[sfb_cols[n][j] for n in range(8)] for j in range(blocks)]  # blocks x N
    d = mma_reference(_decode(a, e2m1_decode), _decode(b, e2m1_decode), _c_matrix(buffers["c"]), sfa, sfb, 64 // blocks)
    return [_expected_d(d)]


def nvfp4_mma_inputs() -> dict[str, bytes | int]:
    return _block_scaled_inputs(0x5EED_4F, 4, _UE4M3_SCALES, _UE4M3_DECOY)


def nvfp4_mma_expected(buffers: dict[str, bytes]) -> list[Expected]:
    return _block_scaled_expected(buffers, 4, ue4m3_decode)


def mxf4_mma_inputs() -> dict[str, bytes | int]:
    return _block_scaled_inputs(0x5EED_3F, 2, _UE8M0_SCALES, _UE8M0_DECOY)


def mxf4_mma_expected(buffers: dict[str, bytes]) -> list[Expected]:
    return _block_scaled_expected(buffers, 2, ue8m0_decode)


# ---- e2m1-cvt: cvt.rn.satfinite.e2m1x2.f32, one pair per thread ----------------------------------

E2M1_CVT_PAIRS = 128  # threads of the probe launch


def _f32_neighbours(x: float) -> list[float]:
    bits = f32_bits(x)
    return [f32_from_bits(bits - 1), f32_from_bits(bits + 1)]


def e2m1_cvt_values() -> list[int]:
    """The f32 bit patterns the conversion probe feeds: every grid value, every tie and both of its
    f32 neighbours, saturation, infinities, NaNs (with payloads), signed zeros, subnormals."""
    magnitudes: list[float] = list(E2M1_MAGNITUDES[1:])
    ties = [(lo + hi) / 2 for lo, hi in itertools.pairwise(E2M1_MAGNITUDES)]  # 0.25 ... 5.0
    for tie in ties:
        magnitudes += [tie, *_f32_neighbours(tie)]
    magnitudes += [6.5, 7.0, 8.0, 100.0, 3.4028234663852886e38, 0.1, 1e-30]
    bits = [f32_bits(m) for m in magnitudes]
    bits += [b | 0x8000_0000 for b in bits]
    bits += [
        0x0000_0000, 0x8000_0000,  # +-0
        0x0000_0001, 0x8000_0001,  # +-smallest subnormal
        0x7F80_0000, 0xFF80_0000,  # +-inf
        0x7FC0_0000, 0xFFC0_0000,  # quiet NaN, negative quiet NaN
        0x7F80_0001, 0x7FC1_2345,  # signalling NaN, NaN with a payload
    ]
    return bits


def e2m1_cvt_inputs() -> dict[str, bytes | int]:
    values = e2m1_cvt_values()
    if len(values) > E2M1_CVT_PAIRS:
        raise ValueError("more conversion test values than probe threads")
    # Thread i converts (values[i], values[-1-i]): every value is tried as operand a (high nibble)
    # and as operand b (low nibble). Unused threads convert (0, 0).
    n = len(values)
    pairs = [(values[i], values[n - 1 - i]) for i in range(n)] + [(0, 0)] * (E2M1_CVT_PAIRS - n)
    return {"in": _pack_u32([w for pair in pairs for w in pair]), "out": E2M1_CVT_PAIRS}


def e2m1_cvt_expected(buffers: dict[str, bytes]) -> list[Expected]:
    floats = _unpack_f32(buffers["in"])
    values, labels = [], []
    for i in range(len(floats) // 2):
        hi, lo = floats[2 * i], floats[2 * i + 1]
        values.append(e2m1_encode(hi) << 4 | e2m1_encode(lo))
        labels.append(f"pair {i} ({hi!r}, {lo!r})")
    return [Expected("out", "B", values, labels)]
