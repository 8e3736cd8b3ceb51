"""The number formats of the FP4/FP8 probes, decoded and encoded exactly: E2M1 (FP4), E4M3 (FP8),
the UE4M3 and UE8M0 scale factors, and f32 bit patterns. Sources: PTX ISA 9.x, "cvt" (e2m1x2 and the
.satfinite rules) and the block-scaling sections of "mma"."""

from __future__ import annotations

import math
import struct

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

