"""Is this file a cubin for this arch? A ptxas that exits 0 proves nothing by itself (a wrapper or a
broken install can write garbage, nothing, or a cubin for another arch), so a compile counts only
when its output passes this check.

A cubin is a 64-bit little-endian ELF with e_machine EM_CUDA (190), whole (its section header table
inside the file). Its arch is in e_flags, in one of two layouts chosen by EI_ABIVERSION (measured
here from cubins of ptxas 13.0.88 and 12.8.93; the names are LLVM's EF_CUDA_*):
  ABI 8: the SM in bits 8..15, 'a' in bit 3 (0x8). 13.0 writes it for every arch: sm_121, sm_121a
         and sm_121f are all 0x06007902 (13.0 never sets the 'a' bit); 12.8 writes it for sm_100
         and newer: sm_120 0x06007802, sm_120a 0x0600780a.
  ABI 7: the SM in bits 0..7, 'a' in bit 11 (0x800), the virtual arch in bits 16..23: 12.8 for
         sm_90 and older: sm_90 0x005a055a, sm_90a 0x005a0d5a, sm_89 0x00590559.
So the SM number must match, and a plain request must not give a cubin with the 'a' bit (it would
load on that exact GPU only). An 'a' request with no 'a' bit proves nothing (13.0), nor does the bit
on an 'f' request (no ptxas here writes 'f' cubins with it); the SASS check has the last word.
"""

from __future__ import annotations

import struct
from pathlib import Path

from sparkdoctor.arch import parse_arch
from sparkdoctor.inputs import TooBig, UnreadableInput, read_bytes

EM_CUDA = 190
MAX_CUBIN_BYTES = 64 * 1024 * 1024  # a probe's cubin is a few KiB; more is not read
_ELF64_HEADER = 64


def cubin_arch(data: bytes) -> tuple[str | None, str | None]:
    """("sm_121" or, with the 'a' bit, "sm_121a"; None) for a cubin, or (None, why it is not one)."""
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
    if data[8] >= 8:
        sm, specific = (flags >> 8) & 0xFF, bool(flags & 0x8)
    else:
        sm, specific = flags & 0xFF, bool(flags & 0x800)
    if sm < 10:
        return None, f"its cubin names no arch (e_flags {flags:#010x})"
    return f"sm_{sm}{'a' if specific else ''}", None


def cubin_problem(path: Path, arch: str) -> str | None:
    """Why the file at `path` is not a cubin for `arch` (None when it is), as the end of a sentence
    that starts "ptxas exited 0 but ..."."""
    try:
        data = read_bytes(path, MAX_CUBIN_BYTES)  # a FIFO is refused, never waited on
    except FileNotFoundError:
        return "it wrote no cubin"
    except TooBig:
        return f"its output is over {MAX_CUBIN_BYTES >> 20} MiB, not a probe's cubin"
    except UnreadableInput:
        return "its output is not a regular file"
    except OSError as exc:
        return f"its output cannot be read: {exc.strerror or exc}"
    found, why = cubin_arch(data)
    if why or found is None:
        return why
    if not matches(found, arch):
        return f"its cubin is for {found}, not {arch}"
    return None


def matches(found: str, arch: str) -> bool:
    """Can a cubin whose header says `found` be the one asked for `arch` (see the module docstring)?"""
    number, suffix = parse_arch(found)
    want, want_suffix = parse_arch(arch)
    return number == want and (suffix != "a" or want_suffix in ("a", "f"))  # no f cubin measured: not judged
