"""One `*_inputs()` generator and one `*_expected(buffers)` reference per kernel probe (the names a
probe header's `inputs` and `reference` fields give). Each reference reads the input bytes back
rather than trusting the generator, so a mistake in one cannot hide a mistake in the other."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from sparkdoctor.fp_reference.buffers import (
    D_BYTES,
    LANES,
    Expected,
    Lcg,
    c_buffer,
    c_matrix,
    expected_d,
    pack_fragments,
    pack_u32,
    unpack_f32,
    unpack_fragments,
    unpack_u32,
)
from sparkdoctor.fp_reference.formats import (
    E2M1_MAGNITUDES,
    e2m1_decode,
    e2m1_encode,
    e4m3_decode,
    f32_bits,
    f32_from_bits,
    ue4m3_decode,
    ue8m0_decode,
)
from sparkdoctor.fp_reference.layouts import (
    frag_a_m16n8k32_8bit,
    frag_a_m16n8k64_4bit,
    frag_b_m16n8k32_8bit,
    frag_b_m16n8k64_4bit,
    scale_a_row,
    scale_b_col,
)
from sparkdoctor.fp_reference.mma import mma_reference

# ---- fp8-mma-sm90: mma.sync m16n8k32 e4m3 x e4m3 + f32 -------------------------------------------

# E4M3 bytes of +-{0, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4}: every product and sum stays exact in f32
# (and in the f16 products Hopper's lowering uses).
_E4M3_POSITIVE = (0x00, 0x28, 0x30, 0x34, 0x38, 0x3C, 0x40, 0x44, 0x48)
_E4M3_SAFE = _E4M3_POSITIVE + tuple(b | 0x80 for b in _E4M3_POSITIVE)


def fp8_mma_inputs() -> dict[str, bytes | int]:
    rng = Lcg(0x5EED_F8)
    a = [[rng.pick(_E4M3_SAFE) for _ in range(32)] for _ in range(16)]
    b = [[rng.pick(_E4M3_SAFE) for _ in range(8)] for _ in range(32)]
    _, c_bytes = c_buffer(rng, 0.25, 16)
    return {
        "a": pack_fragments(a, 4, 4, 8, frag_a_m16n8k32_8bit),
        "b": pack_fragments(b, 2, 4, 8, frag_b_m16n8k32_8bit),
        "c": c_bytes,
        "d": D_BYTES,
    }


def fp8_mma_expected(buffers: dict[str, bytes]) -> list[Expected]:
    a = unpack_fragments(buffers["a"], 16, 32, 4, 4, 8, frag_a_m16n8k32_8bit)
    b = unpack_fragments(buffers["b"], 32, 8, 2, 4, 8, frag_b_m16n8k32_8bit)
    d = mma_reference(_decode(a, e4m3_decode), _decode(b, e4m3_decode), c_matrix(buffers["c"]))
    return [expected_d(d)]


def _decode(codes: list[list[int]], decode: Callable[[int], float]) -> list[list[float]]:
    return [[decode(v) for v in row] for row in codes]


# ---- fp4-mma: mma.sync m16n8k32 .kind::f8f6f4 e2m1 x e2m1 + f32 ------------------------------------

E2M1_CONTAINER_SHIFT = 2  # .kind::f8f6f4: the e2m1 code sits in bits [5:2] of its byte


def fp4_mma_inputs() -> dict[str, bytes | int]:
    rng = Lcg(0x5EED_F4)
    a = [[rng.below(16) for _ in range(32)] for _ in range(16)]
    b = [[rng.below(16) for _ in range(8)] for _ in range(32)]
    _, c_bytes = c_buffer(rng, 0.25, 16)
    return {
        "a": pack_fragments(a, 4, 4, 8, frag_a_m16n8k32_8bit, shift=E2M1_CONTAINER_SHIFT),
        "b": pack_fragments(b, 2, 4, 8, frag_b_m16n8k32_8bit, shift=E2M1_CONTAINER_SHIFT),
        "c": c_bytes,
        "d": D_BYTES,
    }


def fp4_mma_expected(buffers: dict[str, bytes]) -> list[Expected]:
    a = unpack_fragments(buffers["a"], 16, 32, 4, 4, 8, frag_a_m16n8k32_8bit, shift=E2M1_CONTAINER_SHIFT)
    b = unpack_fragments(buffers["b"], 32, 8, 2, 4, 8, frag_b_m16n8k32_8bit, shift=E2M1_CONTAINER_SHIFT)
    d = mma_reference(_decode(a, e2m1_decode), _decode(b, e2m1_decode), c_matrix(buffers["c"]))
    return [expected_d(d)]


# ---- block-scaled m16n8k64 e2m1 (nvfp4-mma: ue4m3 per 16, mxf4-mma: ue8m0 per 32) ----------------

# ue4m3 scales 2^-5, 0.125, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4. No subnormal scale: mixed with the
# large products it would make the exact sum need more than f32's 24 bits.
_UE4M3_SCALES = (0x10, 0x20, 0x28, 0x30, 0x34, 0x38, 0x3C, 0x40, 0x44, 0x48)
_UE4M3_DECOY = 0x50  # 8.0: what lanes that must NOT supply a scale hold, so a wrong pick shows
# ue8m0 scales: 2^-3 .. 2^3.
_UE8M0_SCALES = (124, 125, 126, 127, 128, 129, 130)
_UE8M0_DECOY = 133  # 2^6


def _scale_words(rng: Lcg, rows: int, blocks: int, choices: Sequence[int], decoy: int,
                 lane_index: Callable[[int], int | None]) -> tuple[list[list[int]], bytes]:
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
    return scales, pack_u32(words)


def _scales_from_words(data: bytes, rows: int, blocks: int, lane_index: Callable[[int], int | None]) -> list[list[int]]:
    words = unpack_u32(data)
    out: list[list[int] | None] = [None] * rows
    for lane in range(LANES):
        index = lane_index(lane)
        if index is not None:
            out[index] = [(words[lane] >> (8 * j)) & 0xFF for j in range(blocks)]
    rows_read = [r for r in out if r is not None]
    if len(rows_read) != rows:
        raise ValueError("scale lanes do not cover every row/column")
    return rows_read


def _block_scaled_inputs(seed: int, blocks: int, choices: Sequence[int], decoy: int) -> dict[str, bytes | int]:
    rng = Lcg(seed)
    a = [[rng.below(16) for _ in range(64)] for _ in range(16)]
    b = [[rng.below(16) for _ in range(8)] for _ in range(64)]
    _, c_bytes = c_buffer(rng, 0.25, 16)
    _, sfa = _scale_words(rng, 16, blocks, choices, decoy, scale_a_row)
    _, sfb = _scale_words(rng, 8, blocks, choices, decoy, scale_b_col)
    return {
        "a": pack_fragments(a, 4, 8, 4, frag_a_m16n8k64_4bit),
        "b": pack_fragments(b, 2, 8, 4, frag_b_m16n8k64_4bit),
        "c": c_bytes,
        "sfa": sfa,
        "sfb": sfb,
        "d": D_BYTES,
    }


def _block_scaled_expected(buffers: dict[str, bytes], blocks: int, decode_scale: Callable[[int], float]) -> list[Expected]:
    a = unpack_fragments(buffers["a"], 16, 64, 4, 8, 4, frag_a_m16n8k64_4bit)
    b = unpack_fragments(buffers["b"], 64, 8, 2, 8, 4, frag_b_m16n8k64_4bit)
    sfa = _decode(_scales_from_words(buffers["sfa"], 16, blocks, scale_a_row), decode_scale)
    sfb_cols = _decode(_scales_from_words(buffers["sfb"], 8, blocks, scale_b_col), decode_scale)
    sfb = [[sfb_cols[n][j] for n in range(8)] for j in range(blocks)]  # blocks x N
    d = mma_reference(_decode(a, e2m1_decode), _decode(b, e2m1_decode), c_matrix(buffers["c"]), sfa, sfb, 64 // blocks)
    return [expected_d(d)]


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
    return {"in": pack_u32([w for pair in pairs for w in pair]), "out": E2M1_CVT_PAIRS}


def e2m1_cvt_expected(buffers: dict[str, bytes]) -> list[Expected]:
    floats = unpack_f32(buffers["in"])
    values, labels = [], []
    for i in range(len(floats) // 2):
        hi, lo = floats[2 * i], floats[2 * i + 1]
        values.append(e2m1_encode(hi) << 4 | e2m1_encode(lo))
        labels.append(f"pair {i} ({hi!r}, {lo!r})")
    return [Expected("out", "B", values, labels)]
