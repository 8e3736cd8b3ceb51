"""Is this file a cubin for this arch? A ptxas that exits 0 proves nothing by itself (a wrapper or a
broken install can write garbage, nothing, or a cubin for another arch), so a compile counts only
when its output passes this check.

A cubin is a 64-bit little-endian ELF with e_machine EM_CUDA (190), whole (its section header table
inside the file). Its SM number is in e_flags, in one of two layouts chosen by EI_ABIVERSION:
  ABI 8 (CUDA 13 ptxas, measured here for sm_75 ... sm_121f): bits 8..15, e.g. sm_121a 0x06007902
  ABI 7 and older (CUDA 12.x): bits 0..7 (LLVM's EF_CUDA_SM; no CUDA 12 ptxas here to measure)
Only the number is compared. The a/f suffix is not in the header: CUDA 13.0's ptxas writes the same
e_flags for sm_121, sm_121a and sm_121f (and for sm_90 and sm_90a); the SASS check is what proves
the arch-specific instruction is there.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

from sparkdoctor.arch import parse_arch

EM_CUDA = 190
MAX_CUBIN_BYTES = 64 * 1024 * 1024  # a probe's cubin is a few KiB; more is not read
_ELF64_HEADER = 64


def cubin_sm(data: bytes) -> tuple[int | None, str | None]:
    """(SM number, None) for a cubin, or (None, why it is not one)."""
    if not data:
        return None, "its output is empty"
    if data[:4] != b"\x7fELF":
        return None, f"its output is not an ELF file (it starts with {data[:8]!r})"
    if len(data) < _ELF64_HEADER or data[4] != 2 or data[5] != 1:
        return None, "its output is not a whole 64-bit little-endian ELF file"
    (machine,) = struct.unpack_from("<H", data, 18)
    if machine != EM_CUDA:
        return None, f"its output is an ELF file for machine {machine}, not a cubin (EM_CUDA, {EM_CUDA})"
    (shoff,) = struct.unpack_from("<Q", data, 40)
    (flags,) = struct.unpack_from("<I", data, 48)
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    if shoff + shentsize * shnum > len(data):
        return None, f"its cubin is cut short ({len(data)} bytes; its section table ends at {shoff + shentsize * shnum})"
    sm = (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF
    return sm, None


def cubin_problem(path: Path, arch: str) -> str | None:
    """Why the file at `path` is not a cubin for `arch` (None when it is), as the end of a sentence
    that starts "ptxas exited 0 but ..."."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the read
            return "its output is not a regular file"
        with open(path, "rb") as fh:
            data = fh.read(MAX_CUBIN_BYTES + 1)
    except FileNotFoundError:
        return "it wrote no cubin"
    except OSError as exc:
        return f"its output cannot be read: {exc.strerror or exc}"
    if len(data) > MAX_CUBIN_BYTES:
        return f"its output is over {MAX_CUBIN_BYTES >> 20} MiB, not a probe's cubin"
    sm, why = cubin_sm(data)
    if why:
        return why
    want = parse_arch(arch)[0]
    if sm != want:
        return f"its cubin is for sm_{sm}, not {arch}"
    return None
