"""What a ptxas path is, read without running it: bounded version numbers, and the binary a wrapper
script runs. Shared by the toolkits collector (one entry per binary) and the kernel probes (one tool
per binary, cached on it and its wrappers' bytes); standard library only, cheap to import.

The wrapper rule: a `#!` script of at most 64 KiB whose words name, by literal absolute path, exactly
one existing executable called ptxas or ptxas-<x> (other than itself) runs that file; followed
through links and up to 4 nested wrappers. A script naming none, several, or one only through a
variable, a glob or `$(...)` is not resolved: it is then a tool of its own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

MAX_VERSION_DIGITS = 9  # a longer number is not a version (and int() refuses over 4,300 digits)
WRAPPER_MAX_BYTES = 64 * 1024  # a bigger `#!` file is a program, not a wrapper
WRAPPER_MAX_DEPTH = 4
_SHELL_SEPARATORS = re.compile(r"[\s\"'`;|&<>=]+")  # words of a wrapper's text, linear time
_PTXAS_NAME = re.compile(r"ptxas(?:-[\w.]+)?")


def version_tuple(version: str | None, parts: int = 3) -> tuple[int, ...]:
    """"13.0.88" -> (13, 0, 88): the first `parts` numbers in the text; () when there are none or one
    is too long to be a version (the one bounded version parser of ptxas and kernel code)."""
    numbers = re.findall(r"\d+", version or "")[:parts]
    if any(len(n) > MAX_VERSION_DIGITS for n in numbers):
        return ()
    return tuple(int(n) for n in numbers)


@dataclass(frozen=True)
class Resolved:
    """What running a ptxas path really runs: `binary` (a realpath), through `scripts` (the wrapper
    scripts' realpaths, outermost first; empty for a binary). An unresolvable wrapper is its own
    binary: it is then counted, and its results cached, on its own bytes."""

    binary: str
    scripts: tuple[str, ...] = ()


def is_script(path: str) -> bool:
    if not os.path.isfile(path):  # a FIFO would block the read
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"#!"
    except OSError:
        return False


def named_ptxas(text: str) -> set[str]:
    """Absolute paths of files called ptxas or ptxas-<x> that a script's text names literally (a word
    with a variable, a glob or a `$(...)` in it names nothing)."""
    return {
        word for word in _SHELL_SEPARATORS.split(text)
        if word.startswith("/") and len(word) <= 4096 and not any(c in word for c in "$*?[(){}")
        and _PTXAS_NAME.fullmatch(os.path.basename(word))
    }


def resolve_ptxas(path: str) -> Resolved:
    """Follow wrapper scripts to the ptxas binary they run. The rule: a `#!` script (at most 64 KiB)
    whose text names, by absolute path, exactly one executable file called ptxas or ptxas-<x>
    (other than itself, after following links and further wrappers) resolves to that file. A script
    naming none, or several different ones, or one only through variables, is not resolved."""
    scripts: list[str] = []
    real = os.path.realpath(path)
    while is_script(real) and len(scripts) < WRAPPER_MAX_DEPTH:
        try:
            with open(real, "rb") as fh:
                text = fh.read(WRAPPER_MAX_BYTES + 1)
        except OSError:
            break
        if len(text) > WRAPPER_MAX_BYTES:
            break
        named = {os.path.realpath(m) for m in named_ptxas(text.decode("utf-8", "replace"))}
        named = {n for n in named if n != real and n not in scripts and os.path.isfile(n) and os.access(n, os.X_OK)}
        if len(named) != 1:
            break
        scripts.append(real)
        real = named.pop()
    return Resolved(real, tuple(scripts))  # `real` may be a wrapper it could not follow: then that is the tool
