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
