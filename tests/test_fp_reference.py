"""The pure-Python references against hand-computed tables and the PTX ISA's own formulas."""

from __future__ import annotations

import math
import struct

import pytest

from sparkdoctor.fp_reference import buffers as fp_buffers
from sparkdoctor.fp_reference import formats as fp_formats
from sparkdoctor.fp_reference import layouts as fp_layouts
from sparkdoctor.fp_reference import mma as fp_mma
from sparkdoctor.fp_reference import probes as fp_probes

INF, NAN = math.inf, math.nan


def f32(bits: int) -> float:
    return fp_formats.f32_from_bits(bits)


def next_up(x: float) -> float:
    return f32(fp_formats.f32_bits(x) + 1)


def next_down(x: float) -> float:
    return f32(fp_formats.f32_bits(x) - 1)


# ---- E2M1 ---------------------------------------------------------------------------------------

DECODE = {0x0: 0.0, 0x1: 0.5, 0x2: 1.0, 0x3: 1.5, 0x4: 2.0, 0x5: 3.0, 0x6: 4.0, 0x7: 6.0}


@pytest.mark.parametrize("code", range(16))
def test_e2m1_decode_every_code(code):
    want = DECODE[code & 7]
    got = fp_formats.e2m1_decode(code)
    assert got == want * (-1 if code & 8 else 1)
    assert math.copysign(1, got) == (-1 if code & 8 else 1)  # 0x8 is -0.0


@pytest.mark.parametrize("code", range(16))
def test_e2m1_encode_is_exact_on_the_grid(code):
    assert fp_formats.e2m1_encode(fp_formats.e2m1_decode(code)) == code


# Every tie between two neighbours goes to the even code (mantissa bit 0).
TIES = [
    (0.25, 0x0),  # 0 | 0.5 -> 0
    (0.75, 0x2),  # 0.5 | 1 -> 1
    (1.25, 0x2),  # 1 | 1.5 -> 1
    (1.75, 0x4),  # 1.5 | 2 -> 2
    (2.5, 0x4),  # 2 | 3 -> 2
    (3.5, 0x6),  # 3 | 4 -> 4
    (5.0, 0x6),  # 4 | 6 -> 4
]


@pytest.mark.parametrize("x,code", TIES)
def test_e2m1_ties_round_to_even(x, code):
    assert fp_formats.e2m1_encode(x) == code
    assert fp_formats.e2m1_encode(-x) == 0x8 | code


@pytest.mark.parametrize("x,code", TIES)
def test_e2m1_values_beside_a_tie_round_to_the_nearer_side(x, code):
    below, above = fp_formats.e2m1_encode(next_down(x)), fp_formats.e2m1_encode(next_up(x))
    lower = max(c for c in range(8) if DECODE[c] < x)
    assert (below, above) == (lower, lower + 1)
    assert (fp_formats.e2m1_encode(-next_down(x)), fp_formats.e2m1_encode(-next_up(x))) == (0x8 | lower, 0x8 | (lower + 1))


@pytest.mark.parametrize(
    "x,code",
    [
        (6.0, 0x7), (6.5, 0x7), (7.0, 0x7), (8.0, 0x7), (1e30, 0x7), (3.4028234663852886e38, 0x7), (INF, 0x7),
        (-6.5, 0xF), (-1e30, 0xF), (-INF, 0xF),  # satfinite: sign-preserved MAX_NORM, never inf
        (NAN, 0x7), (-NAN, 0x7), (f32(0xFFC00000), 0x7), (f32(0x7F800001), 0x7),  # NaN -> positive MAX_NORM
        (0.0, 0x0), (-0.0, 0x8),  # signed zero
        (0.1, 0x0), (-0.1, 0x8), (f32(1), 0x0), (f32(0x80000001), 0x8),  # rounds to zero, keeps the sign
        (0.2, 0x0), (0.3, 0x1), (1.1, 0x2), (2.9, 0x5), (4.9, 0x6), (5.1, 0x7),
    ],
)
def test_e2m1_encode_table(x, code):
    assert fp_formats.e2m1_encode(x) == code


def test_e2m1_decode_rejects_wider_codes():
    with pytest.raises(ValueError):
        fp_formats.e2m1_decode(16)


# ---- FP8 / scale formats ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "byte,value",
    [
        (0x00, 0.0), (0x38, 1.0), (0x30, 0.5), (0x3C, 1.5), (0x40, 2.0), (0x44, 3.0), (0x48, 4.0),
        (0x7E, 448.0), (0xFE, -448.0), (0xB8, -1.0),
        (0x08, 2.0**-6), (0x01, 2.0**-9), (0x07, 7 * 2.0**-9),  # smallest normal, subnormals
    ],
)
def test_e4m3_decode(byte, value):
    assert fp_formats.e4m3_decode(byte) == value


def test_e4m3_nan_and_negative_zero():
    assert math.isnan(fp_formats.e4m3_decode(0x7F)) and math.isnan(fp_formats.e4m3_decode(0xFF))
    assert math.copysign(1, fp_formats.e4m3_decode(0x80)) == -1
    # no infinities: every other byte is finite
    assert all(math.isfinite(fp_formats.e4m3_decode(b)) for b in range(256) if b & 0x7F != 0x7F)


def test_ue4m3_decode():
    assert fp_formats.ue4m3_decode(0x38) == 1.0
    assert fp_formats.ue4m3_decode(0x7E) == 448.0
    assert fp_formats.ue4m3_decode(0x01) == 2.0**-9
    assert math.isnan(fp_formats.ue4m3_decode(0x7F))
    with pytest.raises(ValueError):
        fp_formats.ue4m3_decode(0xB8)  # sign bit set: not an unsigned scale


def test_ue8m0_decode():
    assert fp_formats.ue8m0_decode(127) == 1.0
    assert fp_formats.ue8m0_decode(130) == 8.0
    assert fp_formats.ue8m0_decode(0) == 2.0**-127
    assert fp_formats.ue8m0_decode(254) == 2.0**127
    assert math.isnan(fp_formats.ue8m0_decode(255))


# ---- fragment layouts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where,elements,rows,cols",
    [
        (fp_layouts.frag_c_m16n8, 4, 16, 8),
        (fp_layouts.frag_a_m16n8k32_8bit, 16, 16, 32),
        (fp_layouts.frag_b_m16n8k32_8bit, 8, 32, 8),
        (fp_layouts.frag_a_m16n8k64_4bit, 32, 16, 64),
        (fp_layouts.frag_b_m16n8k64_4bit, 16, 64, 8),
    ],
)
def test_fragments_cover_the_matrix_once(where, elements, rows, cols):
    cells = [where(lane, i) for lane in range(32) for i in range(elements)]
    assert len(set(cells)) == len(cells) == rows * cols
    assert all(0 <= r < rows and 0 <= c < cols for r, c in cells)


def test_fragment_spot_checks_from_the_isa_formulas():
    # lane 5: groupID 1, threadID_in_group 1
    assert fp_layouts.frag_a_m16n8k32_8bit(5, 0) == (1, 4)
    assert fp_layouts.frag_a_m16n8k32_8bit(5, 4) == (9, 4)
    assert fp_layouts.frag_a_m16n8k32_8bit(5, 8) == (1, 20)
    assert fp_layouts.frag_a_m16n8k32_8bit(5, 15) == (9, 23)
    assert fp_layouts.frag_b_m16n8k32_8bit(5, 5) == (21, 1)
    assert fp_layouts.frag_a_m16n8k64_4bit(5, 8) == (9, 8)
    assert fp_layouts.frag_a_m16n8k64_4bit(5, 16) == (1, 40)
    assert fp_layouts.frag_b_m16n8k64_4bit(5, 9) == (41, 1)
    assert fp_layouts.frag_c_m16n8(5, 3) == (9, 3)


def test_scale_factor_lanes():
    assert [fp_layouts.scale_a_row(lane) for lane in range(8)] == [0, 8, None, None, 1, 9, None, None]
    assert sorted(r for r in map(fp_layouts.scale_a_row, range(32)) if r is not None) == list(range(16))
    assert [fp_layouts.scale_b_col(lane) for lane in range(8)] == [0, None, None, None, 1, None, None, None]


def test_fragment_packing_round_trip_and_bit_positions():
    codes = [[(r * 7 + c) % 16 for c in range(32)] for r in range(16)]
    packed = fp_buffers.pack_fragments(codes, 4, 4, 8, fp_layouts.frag_a_m16n8k32_8bit, shift=2)
    assert fp_buffers.unpack_fragments(packed, 16, 32, 4, 4, 8, fp_layouts.frag_a_m16n8k32_8bit, shift=2) == codes
    # lane 0 register 0 holds A[0][0..3] low byte first, each code in bits [5:2]
    first = struct.unpack("<I", packed[:4])[0]
    assert [(first >> (8 * j)) & 0xFF for j in range(4)] == [codes[0][j] << 2 for j in range(4)]
    nibbles = [[(r + 3 * c) % 16 for c in range(64)] for r in range(16)]
    packed4 = fp_buffers.pack_fragments(nibbles, 4, 8, 4, fp_layouts.frag_a_m16n8k64_4bit)
    first4 = struct.unpack("<I", packed4[:4])[0]
    assert [(first4 >> (4 * j)) & 0xF for j in range(8)] == nibbles[0][:8]


# ---- MMA reference ------------------------------------------------------------------------------


def test_mma_reference_by_hand():
    a = [[1.0, 2.0], [3.0, 4.0]]
    b = [[5.0, 6.0], [7.0, 8.0]]
    c = [[0.5, 0.0], [0.0, -1.0]]
    assert fp_mma.mma_reference(a, b, c) == [[19.5, 22.0], [43.0, 49.0]]


def test_mma_reference_block_scales_by_hand():
    # K = 4 in two blocks of 2: row 0 of A scaled by 2 then 0.5, column 0 of B by 1 then 4.
    a = [[1.0, 1.0, 1.0, 1.0]]
    b = [[1.0], [2.0], [3.0], [4.0]]
    got = fp_mma.mma_reference(a, b, [[0.0]], scale_a=[[2.0, 0.5]], scale_b=[[1.0], [4.0]], block=2)
    assert got == [[(1 + 2) * 2 * 1 + (3 + 4) * 0.5 * 4]]  # 6 + 14


def test_mma_reference_refuses_order_dependent_sums():
    with pytest.raises(ValueError, match="order of accumulation"):
        fp_mma.mma_reference([[2.0**30, 1.0]], [[1.0], [1.0]], [[0.0]])
    with pytest.raises(ValueError):
        fp_mma.mma_reference([[1.0]], [[1.0]], [[0.0]], scale_a=[[1.0]])  # scales without block


# ---- probe cases --------------------------------------------------------------------------------


def _inputs(buffers):
    return {k: v for k, v in buffers.items() if isinstance(v, bytes)}


@pytest.mark.parametrize("name", ["fp8_mma", "fp4_mma", "nvfp4_mma", "mxf4_mma", "e2m1_cvt"])
def test_every_case_has_an_exact_reference(name):
    buffers = getattr(fp_probes, f"{name}_inputs")()
    assert buffers == getattr(fp_probes, f"{name}_inputs")()  # deterministic
    [expected] = getattr(fp_probes, f"{name}_expected")(_inputs(buffers))
    out_size = buffers[expected.name]
    assert isinstance(out_size, int) and out_size == struct.calcsize("<" + expected.fmt) * len(expected.values)


def test_mma_case_catches_a_wrong_layout():
    buffers = fp_probes.fp4_mma_inputs()
    [expected] = fp_probes.fp4_mma_expected(_inputs(buffers))
    right = struct.pack(f"<{len(expected.values)}f", *expected.values)
    assert expected.compare(right) == (True, "d: all 128 values match the reference")
    # a GPU that swapped the two accumulator rows each lane holds
    swapped = []
    for lane in range(32):
        v = expected.values[lane * 4 : lane * 4 + 4]
        swapped += [v[2], v[3], v[0], v[1]]
    ok, note = expected.compare(struct.pack(f"<{len(swapped)}f", *swapped))
    assert not ok and "differ" in note and "D[0][0]" in note


def test_block_scaled_cases_put_decoys_in_lanes_that_supply_no_scale():
    for inputs, decoy, blocks in ((fp_probes.nvfp4_mma_inputs(), fp_probes._UE4M3_DECOY, 4), (fp_probes.mxf4_mma_inputs(), fp_probes._UE8M0_DECOY, 2)):
        sfa = struct.unpack("<32I", inputs["sfa"])
        sfb = struct.unpack("<32I", inputs["sfb"])
        for lane in range(32):
            if fp_layouts.scale_a_row(lane) is None:
                assert sfa[lane] == int.from_bytes(bytes([decoy] * 4), "little")
            else:
                assert all((sfa[lane] >> (8 * j)) & 0xFF != decoy for j in range(blocks))
            if fp_layouts.scale_b_col(lane) is None:
                assert sfb[lane] == int.from_bytes(bytes([decoy] * 4), "little")


def test_scales_change_the_result():
    """The block-scaled references really apply the scales: decoding them as 1.0 gives other numbers."""
    buffers = _inputs(fp_probes.nvfp4_mma_inputs())
    [scaled] = fp_probes.nvfp4_mma_expected(buffers)
    [unscaled] = fp_probes._block_scaled_expected(buffers, 4, lambda byte: 1.0)
    assert scaled.values != unscaled.values


def test_conversion_case_covers_every_tie_in_both_nibbles():
    values = fp_probes.e2m1_cvt_values()
    buffers = fp_probes.e2m1_cvt_inputs()
    words = struct.unpack(f"<{fp_probes.E2M1_CVT_PAIRS * 2}I", buffers["in"])
    highs, lows = set(words[0::2]), set(words[1::2])
    for x, _ in TIES:
        for bits in (fp_formats.f32_bits(x), fp_formats.f32_bits(-x), fp_formats.f32_bits(next_up(x)), fp_formats.f32_bits(next_down(x))):
            assert bits in values and bits in highs and bits in lows
    [expected] = fp_probes.e2m1_cvt_expected(_inputs(buffers))
    pairs = list(zip(words[0::2], words[1::2], strict=False))
    i = pairs.index((fp_formats.f32_bits(0.25), next(w for h, w in pairs if h == fp_formats.f32_bits(0.25))))
    assert expected.values[i] >> 4 == 0x0  # 0.25 in the high nibble rounds to 0
    nan_pair = pairs.index(next(p for p in pairs if p[0] == 0xFFC00000))
    assert expected.values[nan_pair] >> 4 == 0x7  # negative NaN -> +6
