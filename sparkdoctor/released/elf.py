"""What the file checks read of a compiled library (an ELF shared object), without any CUDA tool and
without holding the library whole.

A released `.so` is a deflated zip member, so it can only be read from its start. Two readers walk it
as a stream of chunks and stop as soon as they know their answer:

  * `host_part`: the bytes before the library's device code (the first fatbin container of its
    `.nv_fatbin` section): the ELF header, `.dynsym`/`.dynstr`, code and `.rodata`, where the linker puts
    a library's messages, exported names and needed libraries. A message check reads the printable
    strings of this part (the device code and the non-loaded `.strtab` after it are not read); a
    library without device code is read whole.
  * `FatbinScanner`: the cubins of `.nv_fatbin`, from each fatbin entry's header (arch number and its
    arch-specific / family flags), the payloads skipped; like `cuobjdump --list-elf` it names a family
    cubin (sm_120f) by its plain arch (sm_120) and an arch-specific one with its suffix (sm_120a).

A library stored uncompressed in a wheel can be entered at any offset: `sections` reads its section
headers over range requests, and then only the part before `.nv_fatbin` (strings) or `.nv_fatbin`
itself (cubins) is fetched (sparkdoctor.released.wheel); the answers are the same as the stream's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = 0xBA55ED50
# a fatbin container header: magic, version 1, header size 16 (then the size of its entries)
_CONTAINER = struct.pack("<IHH", FATBIN_MAGIC, 1, 16)
_ARCH_SPECIFIC = 0x100000  # entry flags: sm_XXXa
_FAMILY = 0x200000  # entry flags: sm_XXXf
_KIND_CUBIN = 2
MAX_SECTION_NAMES = 1 << 20  # .shstrtab is a few hundred bytes
MAX_ENTRY_HEADER = 4096  # an entry header is 64-112 bytes; anything larger is not a fatbin


class ElfError(ValueError):
    """Bytes that are not what an ELF or fatbin reader expects; one line."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int


def sections(read_at: Callable[[int, int], bytes]) -> list[Section]:
    """The section headers of a 64-bit little-endian ELF file, read through `read_at(offset, size)`."""
    head = read_at(0, 64)
    if head[:4] != ELF_MAGIC or len(head) < 64:
        raise ElfError("not an ELF file")
    if head[4] != 2 or head[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if shentsize != 64 or shnum == 0 or shstrndx >= shnum:
        raise ElfError(f"unexpected section header table (entry size {shentsize}, {shnum} sections)")
    table = read_at(shoff, shnum * 64)
    if len(table) < shnum * 64:
        raise ElfError(f"the section header table at {shoff} is cut short")
    raw = [struct.unpack_from("<IIQQQQIIQQ", table, i * 64) for i in range(shnum)]
    names_at, names_size = raw[shstrndx][4], raw[shstrndx][5]
    if names_size > MAX_SECTION_NAMES:
        raise ElfError(f"a section name table of {names_size:,} bytes")
    names = read_at(names_at, names_size)
    out = []
    for name_off, kind, _flags, _addr, offset, size, *_ in raw:
        end = names.find(b"\0", name_off)
        out.append(Section(names[name_off : end if end >= 0 else None].decode("ascii", "replace"), kind, offset, size))
    return out


def _container_at(buf: bytes | bytearray, base: int, start: int = 0) -> int:
    """Index in `buf` (whose first byte is at file offset `base`) of the first fatbin container header
    at an 8-aligned file offset, or -1."""
    i = buf.find(_CONTAINER, start)
    while i >= 0 and (base + i) % 8:
        i = buf.find(_CONTAINER, i + 1)
    return i


def host_part(chunks: Iterable[bytes], limit: int) -> bytes:
    """The bytes of a library before its first fatbin container (all of it when it has none), at most
    `limit` bytes (ElfError past that)."""
    buf = bytearray()
    for chunk in chunks:
        searched = max(0, len(buf) - len(_CONTAINER))
        buf += chunk
        i = _container_at(buf, 0, searched)
        if 0 <= i <= limit:
            return bytes(buf[:i])
        if len(buf) > limit:
            raise ElfError(f"more than {limit:,} bytes before its device code")
    return bytes(buf)


class FatbinScanner:
    """The cubin archs of a library fed to it chunk by chunk from its first byte. `done` turns true at the
    end of its `.nv_fatbin` (or when `decided(archs)` says the caller knows enough)."""

    def __init__(self, decided: Callable[[set[str]], bool] | None = None):
        self.archs: set[str] = set()
        self.done = False
        self.complete = False  # the whole fatbin was read (not cut short by `decided`)
        self.read = 0  # bytes fed
        self._decided = decided
        self._buf = bytearray()
        self._base = 0  # file offset of _buf[0]
        self._state = "seek"  # seek | container | entry | between
        self._in_container = 0  # bytes of the current container's entries not yet walked
        self._skip = 0  # payload bytes still to pass over

    def feed(self, chunk: bytes) -> None:
        if self.done:
            return
        self.read += len(chunk)
        if self._skip >= len(chunk):  # inside a payload: nothing to keep
            self._skip -= len(chunk)
            self._base += len(chunk)
            return
        if self._skip:
            chunk = chunk[self._skip :]
            self._base += self._skip
            self._skip = 0
        self._buf += chunk
        self._run()

    def finish(self) -> None:
        """The library ended: whatever was read is the whole of it."""
        if not self.done:
            self.done = self.complete = True

    def _consume(self, n: int) -> None:
        """Pass over n bytes, those not held yet included."""
        take = min(n, len(self._buf))
        del self._buf[:take]
        self._base += take
        self._skip = n - take

    def _run(self) -> None:
        while not self.done and not self._skip:
            if self._state == "seek":
                i = _container_at(self._buf, self._base, 0)
                if i < 0:
                    self._consume(max(0, len(self._buf) - len(_CONTAINER) + 1))
                    return
                self._consume(i)
                self._state = "container"
            elif self._state == "container":
                if len(self._buf) < 16:
                    return
                _magic, _ver, header, size = struct.unpack_from("<IHHQ", self._buf, 0)
                self._consume(header)
                self._in_container, self._state = size, "entry"
            elif self._state == "entry":
                if self._in_container <= 0:
                    self._state = "between"
                    continue
                if len(self._buf) < 48:
                    return
                kind, _ver, header, payload = struct.unpack_from("<HHIQ", self._buf, 0)
                if not 48 <= header <= MAX_ENTRY_HEADER:
                    raise ElfError(f"a fatbin entry header of {header} bytes at offset {self._base}: not a fatbin")
                arch, = struct.unpack_from("<I", self._buf, 28)
                flags, = struct.unpack_from("<I", self._buf, 40)
                if kind == _KIND_CUBIN:
                    self.archs.add(f"sm_{arch}" + ("a" if flags & _ARCH_SPECIFIC and not flags & _FAMILY else ""))
                    if self._decided is not None and self._decided(self.archs):
                        self.done = True
                        return
                self._in_container -= header + payload
                self._consume(header + payload)
            else:  # between containers: zero padding, then another container or the end of .nv_fatbin
                zeros = len(self._buf) - len(self._buf.lstrip(b"\0"))
                self._consume(zeros)
                if len(self._buf) < len(_CONTAINER):
                    return
                if self._base % 8 == 0 and self._buf.startswith(_CONTAINER):
                    self._state = "container"
                else:
                    self.done = self.complete = True


def sort_archs(archs: Iterable[str]) -> tuple[str, ...]:
    """sm_90 < sm_90a < sm_120 (by number, then suffix)."""
    return tuple(sorted(set(archs), key=lambda a: (int("".join(c for c in a if c.isdigit()) or 0), a)))
