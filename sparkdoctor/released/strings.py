"""The printable strings of a compiled library, like `strings`: what a message check reads from a `.so`.

Of a library only its host part is read (sparkdoctor.released.elf.host_part: everything before its
device code, where `.dynstr` and `.rodata` are), so a message check costs the first megabytes of a
library, not the whole of a 300 MB one; a library without device code is read whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import chain

from sparkdoctor.released.cubins import Decided, Listing, list_archs
from sparkdoctor.released.elf import ELF_MAGIC, ElfError, host_part
from sparkdoctor.released.http import RemoteError

MIN_LENGTH = 4
_RUN = re.compile(rb"[\x20-\x7e\t]{%d,}" % MIN_LENGTH)
HOST_LIMIT = 512 * 1024 * 1024  # the most read of a library before its device code


def printable_runs(data: bytes) -> list[str]:
    """Every run of at least four printable ASCII characters (tab included), in file order."""
    return [m.group().decode("ascii") for m in _RUN.finditer(data)]


def is_elf(data: bytes) -> bool:
    return data[:4] == ELF_MAGIC


def library_text(chunks: Iterator[bytes]) -> str | None:
    """The strings of a library's host part, one per line; None when the bytes are not ELF."""
    first = next(chunks, b"")
    if not is_elf(first):
        return None
    return "\n".join(printable_runs(host_part(chain([first], chunks), HOST_LIMIT)))


class MemberText:
    """`text()` of a released file's members, for any reader with `read(name) -> bytes`
    (a wheel read by range requests, an sdist); `chunks` streams a member (by default: read whole)."""

    def read(self, name: str) -> bytes:
        raise NotImplementedError

    def chunks(self, name: str) -> Iterator[bytes]:
        yield self.read(name)

    def cubins(self, name: str, decided: Decided | None = None) -> Listing:
        """The cubin archs of a library member (sparkdoctor.released.cubins)."""
        return list_archs(self.chunks(name), decided, name)

    def text(self, name: str) -> str:
        """A member as text: a compiled library (ELF) as the printable strings of its host part, one per line."""
        try:
            if is_library(name):
                found = library_text(iter(self.chunks(name)))
                if found is not None:
                    return found
            data = self.read(name)
            if is_elf(data):
                return "\n".join(printable_runs(host_part([data], HOST_LIMIT)))
        except ElfError as exc:
            raise RemoteError(f"{name}: {exc}") from None
        return data.decode("utf-8", errors="replace")


def is_library(name: str) -> bool:
    """A member named like a shared object (foo.so, foo.so.2): streamed rather than read whole."""
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base
