"""The printable strings of a compiled library, like `strings`: what a message check reads from a `.so`."""

from __future__ import annotations

import re

MIN_LENGTH = 4
_RUN = re.compile(rb"[\x20-\x7e\t]{%d,}" % MIN_LENGTH)
ELF_MAGIC = b"\x7fELF"


def printable_runs(data: bytes) -> list[str]:
    """Every run of at least four printable ASCII characters (tab included), in file order."""
    return [m.group().decode("ascii") for m in _RUN.finditer(data)]


def is_elf(data: bytes) -> bool:
    return data[:4] == ELF_MAGIC


class MemberText:
    """`text()` and `strings()` of a released file's members, for any reader with `read(name) -> bytes`
    (a wheel read by range requests, an sdist)."""

    def read(self, name: str) -> bytes:
        raise NotImplementedError

    def text(self, name: str) -> str:
        """A member as text: a compiled library (ELF) as its printable strings, one per line."""
        data = self.read(name)
        if is_elf(data):
            return "\n".join(printable_runs(data))
        return data.decode("utf-8", errors="replace")

    def strings(self, name: str) -> list[str]:
        return printable_runs(self.read(name))
