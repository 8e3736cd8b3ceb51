"""sparkdoctor.fp_reference against an independent implementation: ml_dtypes (float4_e2m1fn, float8_e4m3fn,
float8_e8m0fnu; the OCP MX / FP8 formats as JAX and XLA use them) for every code of every format and for
E2M1 rounding, and numpy for the MMAs, with the fragment layouts written out again here in another form
(register r of a lane holds row g + 8*(r & 1) and the K half r >> 1; the form a from-scratch sm_120a NVFP4
GEMM that is bit-exact on hardware uses), so a shared mistake would have to be made twice, differently."""

from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sparkdoctor.fp_reference import formats as fp_formats
from sparkdoctor.fp_reference import mma as fp_mma
from sparkdoctor.fp_reference import probes as fp_probes

E2M1, E4M3, E8M0 = ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu


def _decode_all(dtype, count: int) -> list[float]:
    return [float(v) for v in np.arange(count, dtype=np.uint8).view(dtype)]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


# ---- the number formats ---------------------------------------------------------------------------


def test_every_e2m1_code_decodes_as_ml_dtypes_does():
    assert all(_same(fp_formats.e2m1_decode(c), v) for c, v in enumerate(_decode_all(E2M1, 16)))


def test_every_e4m3_and_ue4m3_byte_decodes_as_ml_dtypes_does():
    want = _decode_all(E4M3, 256)
    assert all(_same(fp_formats.e4m3_decode(b), want[b]) for b in range(256))
    assert all(_same(fp_formats.ue4m3_decode(b), want[b]) for b in range(0x80))  # NVFP4's scale: E4M3 with the sign clear


def test_every_ue8m0_byte_decodes_as_ml_dtypes_does():
    want = _decode_all(E8M0, 256)
    assert all(_same(fp_formats.ue8m0_decode(b), want[b]) for b in range(256))


def _e2m1_by_ml_dtypes(x: float) -> int:
    return int(np.array([x], dtype=np.float32).astype(E2M1).view(np.uint8)[0]) & 0xF


TIES = [(lo + hi) / 2 for lo, hi in zip(fp_formats.E2M1_MAGNITUDES, fp_formats.E2M1_MAGNITUDES[1:], strict=False)]


@settings(max_examples=800, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 0xFFFF_FFFF))
@example(0x7F80_0000)  # +inf saturates to +6
@example(0xFF80_0000)
@example(0x0000_0001)  # the smallest subnormal rounds to +0
@example(0x8000_0001)
def test_e2m1_rounding_agrees_with_ml_dtypes_on_every_non_nan_f32(bits):
    """Round to nearest, ties to even, saturating at 6 (ml_dtypes casts float4_e2m1fn so; cvt.rn.satfinite too).
    NaN is left out on purpose: ml_dtypes turns it into 0, PTX's .satfinite into +MAX_NORM (6)."""
    x = fp_formats.f32_from_bits(bits)
    if not math.isnan(x):
        assert fp_formats.e2m1_encode(x) == _e2m1_by_ml_dtypes(x), x


def test_e2m1_rounding_agrees_with_ml_dtypes_on_a_sweep_of_every_exponent():
    """Every f32 whose low 16 bits are zero: both signs, every exponent, 128 mantissas each."""
    bits = np.arange(1 << 16, dtype=np.uint32) << 16
    xs = bits.view(np.float32)
    keep = ~np.isnan(xs)
    want = xs[keep].astype(E2M1).view(np.uint8) & 0xF
    got = np.array([fp_formats.e2m1_encode(float(x)) for x in xs[keep]], dtype=np.uint8)
    assert np.array_equal(got, want), xs[keep][got != want][:5]


@pytest.mark.parametrize("tie", TIES)
def test_e2m1_ties_and_their_f32_neighbours_agree_with_ml_dtypes(tie):
    bits = fp_formats.f32_bits(tie)
    for b in (bits - 1, bits, bits + 1, bits | 0x8000_0000):
        x = fp_formats.f32_from_bits(b)
        assert fp_formats.e2m1_encode(x) == _e2m1_by_ml_dtypes(x), x


# ---- the MMAs, recomputed with numpy from the probe's own bytes ------------------------------------


def _words(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<u4").reshape(32, -1)


def _fields(word: int, bits: int) -> list[int]:
    return [(word >> (bits * j)) & ((1 << bits) - 1) for j in range(32 // bits)]


def _k64_4bit(data: bytes, rows: int) -> np.ndarray:
    """A (rows=16) or B transposed (rows=8) of m16n8k64 from packed e2m1: 8 nibbles per register, nibble j at
    bits 4j. A: register r of lane (g, t) holds row g + 8*(r & 1), K t*8 + 32*(r >> 1) ...; B: row n = g."""
    codes = np.zeros((rows, 64), dtype=np.uint8)
    for lane, regs in enumerate(_words(data)):
        g, t = lane >> 2, lane & 3
        for r, word in enumerate(regs):
            row = g + 8 * (r & 1) if rows == 16 else g
            k0 = t * 8 + 32 * (r >> 1 if rows == 16 else r)
            codes[row, k0 : k0 + 8] = _fields(int(word), 4)
    return codes


def _k32_8bit(data: bytes, rows: int, shift: int) -> np.ndarray:
    """m16n8k32 8-bit containers: A register r holds row g + 8*(r & 1), K t*4 + 16*(r >> 1) ...; B register r
    holds K t*4 + 16*r ... of column g."""
    codes = np.zeros((rows, 32), dtype=np.uint8)
    for lane, regs in enumerate(_words(data)):
        g, t = lane >> 2, lane & 3
        for r, word in enumerate(regs):
            row = g + 8 * (r & 1) if rows == 16 else g
            k0 = t * 4 + 16 * (r >> 1 if rows == 16 else r)
            codes[row, k0 : k0 + 4] = [(f >> shift) & 0xFF for f in _fields(int(word), 8)]
    return codes


def _scales(data: bytes, rows: int, blocks: int) -> np.ndarray:
    """Thread-id 0, byte-id 0: A's row g from lane 4g, row g + 8 from lane 4g + 1; B's column g from lane 4g;
    byte j of the word scales K block j."""
    out = np.zeros((rows, blocks), dtype=np.uint8)
    for lane, (word,) in enumerate(_words(data)):
        g, t = lane >> 2, lane & 3
        if (rows == 16 and t < 2) or t == 0:
            out[g + 8 * t] = _fields(int(word), 8)[:blocks]
    return out


def _c(data: bytes) -> np.ndarray:
    c = np.zeros((16, 8))
    for lane, values in enumerate(np.frombuffer(data, dtype="<f4").reshape(32, 4)):
        g, t = lane >> 2, lane & 3
        for i, v in enumerate(values):
            c[g + 8 * (i >> 1), 2 * t + (i & 1)] = v
    return c


def _in_d_order(d: np.ndarray) -> list[float]:
    return [float(d[(lane >> 2) + 8 * (i >> 1), 2 * (lane & 3) + (i & 1)]) for lane in range(32) for i in range(4)]


def _decode(codes: np.ndarray, dtype) -> np.ndarray:
    return codes.astype(np.uint8).view(dtype).astype(np.float64)


@pytest.mark.parametrize(("name", "block", "scale_dtype"), [("nvfp4_mma", 16, E4M3), ("mxf4_mma", 32, E8M0)])
def test_block_scaled_probes_match_numpy(name, block, scale_dtype):
    """NVFP4: a UE4M3 scale per 16 elements along K; MXFP4: a UE8M0 scale per 32 (OCP MX)."""
    buffers = getattr(fp_probes, f"{name}_inputs")()
    a = _decode(_k64_4bit(buffers["a"], 16), E2M1)
    b = _decode(_k64_4bit(buffers["b"], 8), E2M1).T
    sfa = np.repeat(_decode(_scales(buffers["sfa"], 16, 64 // block), scale_dtype), block, axis=1)
    sfb = np.repeat(_decode(_scales(buffers["sfb"], 8, 64 // block), scale_dtype), block, axis=1).T
    d = (a * sfa) @ (b * sfb) + _c(buffers["c"])
    [expected] = getattr(fp_probes, f"{name}_expected")({k: v for k, v in buffers.items() if isinstance(v, bytes)})
    assert expected.values == _in_d_order(d)
    assert len(set(sfa.flatten())) > 2 and len(set(sfb.flatten())) > 2  # the scales really vary


@pytest.mark.parametrize(("name", "dtype", "shift"), [("fp4_mma", E2M1, fp_probes.E2M1_CONTAINER_SHIFT), ("fp8_mma", E4M3, 0)])
def test_unscaled_probes_match_numpy(name, dtype, shift):
    buffers = getattr(fp_probes, f"{name}_inputs")()
    a = _decode(_k32_8bit(buffers["a"], 16, shift), dtype)
    b = _decode(_k32_8bit(buffers["b"], 8, shift), dtype).T
    d = a @ b + _c(buffers["c"])
    [expected] = getattr(fp_probes, f"{name}_expected")({k: v for k, v in buffers.items() if isinstance(v, bytes)})
    assert expected.values == _in_d_order(d)


def test_the_conversion_probe_expects_what_ml_dtypes_rounds_to():
    buffers = fp_probes.e2m1_cvt_inputs()
    [expected] = fp_probes.e2m1_cvt_expected({"in": buffers["in"]})
    floats = struct.unpack(f"<{len(buffers['in']) // 4}f", buffers["in"])
    for i, want in enumerate(expected.values):
        hi, lo = floats[2 * i], floats[2 * i + 1]
        for x, nibble in ((hi, want >> 4), (lo, want & 0xF)):
            assert nibble == (fp_formats.E2M1_MAX_CODE if math.isnan(x) else _e2m1_by_ml_dtypes(x)), (i, x)


# ---- the exactness guard of mma_reference -----------------------------------------------------------


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_a_block_scaled_result_the_reference_accepts_is_exact_in_f32(data):
    """Whatever codes and scales (every UE8M0 exponent, 2^-127 .. 2^127), a result mma_reference returns is an
    f32 that needs no rounding in any order; numpy's float64 sum of the same terms is the same number."""
    k, block = 8, data.draw(st.sampled_from([2, 4, 8]))
    codes = st.integers(0, 15)
    a = [[fp_formats.e2m1_decode(data.draw(codes)) for _ in range(k)] for _ in range(2)]
    b = [[fp_formats.e2m1_decode(data.draw(codes))] for _ in range(k)]
    scale = st.one_of(st.integers(120, 134), st.integers(0, 254)).map(fp_formats.ue8m0_decode)  # mostly near 1, and the ends
    sa = [[data.draw(scale) for _ in range(k // block)] for _ in range(2)]
    sb = [[data.draw(scale)] for _ in range(k // block)]
    try:
        d = fp_mma.mma_reference(a, b, [[0.0], [0.0]], sa, sb, block)
    except ValueError:
        return
    want = (np.array(a) * np.repeat(sa, block, axis=1)) @ (np.array(b) * np.repeat(sb, block, axis=0))
    for row in range(2):
        assert d[row][0] == want[row][0]
        assert struct.unpack("<f", struct.pack("<f", d[row][0]))[0] == d[row][0]
        assert d[row][0] == 0 or abs(d[row][0]) >= 2.0**-126  # never a subnormal an FTZ tensor core would flush


@pytest.mark.parametrize(("a", "b", "why"), [
    ([[2.0**-140]], [[1.0]], "below f32's normal range"),
    ([[2.0**127]], [[2.0]], "beyond f32's range"),
])
def test_mma_reference_refuses_results_outside_f32(a, b, why):
    with pytest.raises(ValueError, match="f32"):
        fp_mma.mma_reference(a, b, [[0.0]])
