"""The closed vocabularies that cross module boundaries, as str-enums.

A member is a `str`: it compares equal to its value, hashes like it (so `{"warn": 1}["warn"]` and
`{Severity.warn: 1}["warn"]` agree), formats as it and is written to JSON as it. Documents, matrix files and
the ledger keep their words; code names the word once, and tests/contract/test_vocabularies.py checks that
every renderer knows every member.
"""

from __future__ import annotations

import enum


class Word(str, enum.Enum):
    """A closed word: a str whose value is the word (Python 3.10 has no enum.StrEnum)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    __hash__ = str.__hash__

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(str(m.value) for m in cls)


class Severity(Word):
    """How bad a matrix entry's finding is; ordered: info < warn < error (`--fail-on`)."""

    info = "info"
    warn = "warn"
    error = "error"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)


class Action(Word):
    """What a matrix entry asks of the user."""

    fix = "fix"
    configure = "configure"
    rebench = "rebench"
    monitor = "monitor"


class Evidence(Word):
    """How a matrix entry knows what it claims, strongest first: reproduced by a probe here (and proved on real
    installs), checked mechanically against released files, or reported in a cited source only."""

    reproduced = "reproduced"
    checked = "checked"
    reported = "reported"


class Verdict(Word):
    """What a check concludes (Report.verdict()): the same word in every renderer and in the JSON."""

    pass_ = "pass"
    unverified = "unverified"
    fail = "fail"
    unprobeable = "unprobeable"


class Outcome(Word):
    """What re-measuring a conclusion on the current toolchain found; ordered by how much it matters."""

    holds = "holds"
    inconclusive = "inconclusive"  # the arms ran under clearly different machine load: no verdict called
    changed = "changed"
    flipped = "flipped"
    broken = "broken"  # an arm gives wrong answers now (bench/correctness.py): fast and wrong never wins


CUTEDSL_KERNELS: dict[str, str] = {"cutedsl-nvfp4-mma": "nvfp4-mma", "cutedsl-nvfp4-mma-tile": "nvfp4-mma-tile",
                                   "cutedsl-e2m1-cvt": "e2m1-cvt"}
"""The CuTe DSL probe ids a matrix entry may name, and the kernel of probes/cutedsl/ each compiles. Here, at the
base, so that matrix validation (sparkdoctor/matrix/loader.py) knows them without importing a collector."""
