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
expected pair per probe). A probe header names its functions in `probes`.
"""
