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

Modules, each importing only those before it: formats (the number formats), layouts (which lane
holds what), mma (the exact MMA), buffers (input bytes and `Expected`), probes (one inputs /
expected pair per probe). A probe header names its functions in this package's namespace.
"""

from sparkdoctor.fp_reference.buffers import D_BYTES, LANES, Expected
from sparkdoctor.fp_reference.formats import (
    E2M1_MAGNITUDES,
    E2M1_MAX_CODE,
    e2m1_decode,
    e2m1_encode,
    e4m3_decode,
    f32_bits,
    f32_from_bits,
    is_exact_f32,
    ue4m3_decode,
    ue8m0_decode,
)
from sparkdoctor.fp_reference.layouts import (
    frag_a_m16n8k32_8bit,
    frag_a_m16n8k64_4bit,
    frag_b_m16n8k32_8bit,
    frag_b_m16n8k64_4bit,
    frag_c_m16n8,
    scale_a_row,
    scale_b_col,
)
from sparkdoctor.fp_reference.mma import mma_reference
from sparkdoctor.fp_reference.probes import (
    E2M1_CONTAINER_SHIFT,
    E2M1_CVT_PAIRS,
    e2m1_cvt_expected,
    e2m1_cvt_inputs,
    e2m1_cvt_values,
    fp4_mma_expected,
    fp4_mma_inputs,
    fp8_mma_expected,
    fp8_mma_inputs,
    mxf4_mma_expected,
    mxf4_mma_inputs,
    nvfp4_mma_expected,
    nvfp4_mma_inputs,
)

__all__ = [
    "D_BYTES", "E2M1_CONTAINER_SHIFT", "E2M1_CVT_PAIRS", "LANES", "E2M1_MAGNITUDES", "E2M1_MAX_CODE", "Expected", "e2m1_cvt_expected", "e2m1_cvt_inputs", "e2m1_cvt_values",
    "e2m1_decode", "e2m1_encode", "e4m3_decode", "f32_bits", "f32_from_bits", "fp4_mma_expected", "fp4_mma_inputs",
    "fp8_mma_expected", "fp8_mma_inputs", "frag_a_m16n8k32_8bit", "frag_a_m16n8k64_4bit", "frag_b_m16n8k32_8bit",
    "frag_b_m16n8k64_4bit", "frag_c_m16n8", "is_exact_f32", "mma_reference", "mxf4_mma_expected", "mxf4_mma_inputs",
    "nvfp4_mma_expected", "nvfp4_mma_inputs", "scale_a_row", "scale_b_col", "ue4m3_decode", "ue8m0_decode",
]
