"""The values the fuzz suite plants in inputs: the ones that broke tools like this one before.

Wrong types, empty and huge strings, 5000-digit versions, rich markup, control characters, lone
surrogates, NaN/inf, deep nesting, bad specifiers and regexes (backtracking ones first). Deep nesting
and 5000-digit numbers cannot travel through json.dumps or a recursive TOML writer, so they are
drawn as markers (Deep, BigNumber) and written out last (tests/fuzz/files.py). Long values print as
a length and a head, so a failure report stays readable.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st


@dataclass(frozen=True)
class Deep:
    """A value nested `depth` levels deep (lists or objects), written out last."""

    depth: int
    kind: str = "list"


@dataclass(frozen=True)
class BigNumber:
    """A number literal with `digits` digits: only a file can carry it (json/int refuse > 4300)."""

    digits: int


# ---- values ------------------------------------------------------------------------------------

class Huge(str):
    """A long string that reports itself in a few words: failure reports stay readable."""

    def __repr__(self) -> str:
        return f"<{len(self):,} chars: {str.__repr__(self[:24])}...>"

    def _repr_pretty_(self, p, cycle) -> None:  # hypothesis prints examples through this
        p.text(repr(self))


class Blob(bytes):
    """File contents that report themselves briefly once they are long."""

    def __repr__(self) -> str:
        return bytes.__repr__(self) if len(self) <= 2000 else f"<{len(self):,} bytes: {bytes.__repr__(self[:300])}...>"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


MARKUP = ["[bold]", "[/]", "[/bold]", "[red]x", "[link=http://x]y[/link]", "[bold red]x[/bold red]", "[", "]", "\\[x]",
          ":warning:", "\x1b[31mred\x1b[0m", "\x1b]8;;http://evil\x07x\x1b]8;;\x07"]
CONTROL = ["", " ", "a\nb", "a\r\nb", "line\n", "\nlead", "\x00", "\x07\x08\x7f", "\t", "\u2028", "\u0085", "\ufeff",
           "\ud800", "x\udcffy", "\U0001f600", "e\u0301", "<b>x</b>", "]]>", "*x*", "|", "`", "``x``", "--", "&amp;"]
VERSIONS = [Huge("1" * 5000), Huge("1." + "0" * 5000), Huge("9" * 4301 + ".1"), "0", "0.0.0", "13.0", "580.95.05", "4.5.0", "2.13.0+cu130",
            "1.0.dev0", "1!2.0", "v1", "latest", "None", "12.1a", "1.2.3.4.5.6.7.8.9.10", "1.0+" + "a" * 300]
WORDS = ["sm_121a", "sm_999", "sm_121", "none", "unknown", "detected", "given", "assumed", "libs-base", "libs-cu13",
         "ok", "fail", "crash", "refused", "error", "timeout", "skipped", "modified", "unchecked", "no-record", "ptxas",
         "system", "pip", "triton", "torch", "vllm", "nvidia-cutlass-dsl", "error", "warn", "info", "fix", "*", "/"]


def _huge(n: int) -> str:
    return Huge(("word [bold] " * (n // 12 + 1))[:n])


# The strings that broke renderers and parsers, nastiest first (hypothesis favours the front).
SPECIAL = ["[/]", _huge(300_000), "a\nb", "\ud800", "[bold]x", "\x00", "x\r", *MARKUP, *CONTROL, *VERSIONS[:3], _huge(10_000)]


@functools.cache  # one strategy object: hypothesis validates and caches it once, not per example
def scalars(huge: bool = True) -> st.SearchStrategy[Any]:
    strings = st.one_of(
        st.sampled_from(MARKUP + CONTROL + VERSIONS + WORDS),
        st.text(max_size=40),  # every code point, surrogates and controls included
        st.text(alphabet="0123456789.+-", max_size=12),
    )
    parts = [
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64),
        st.floats(allow_nan=True, allow_infinity=True),
        strings,
        strings,
    ]
    if huge:
        parts.append(st.sampled_from([10_000, 300_000, 3_000_000]).map(_huge))
    return st.one_of(*parts)


@functools.cache  # one strategy object: hypothesis validates and caches it once, not per example
def json_values(huge: bool = True) -> st.SearchStrategy[Any]:
    leaf = st.one_of(st.none(), scalars(huge))
    return st.one_of(
        leaf,
        leaf,
        st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=8),
        st.builds(Deep, st.sampled_from([50, 400, 3000, 100_000]), st.sampled_from(["list", "dict"])),
    )


@functools.cache  # one strategy object: hypothesis validates and caches it once, not per example
def toml_values() -> st.SearchStrategy[Any]:
    leaf = st.one_of(scalars(), st.datetimes(), st.dates(), st.times())
    return st.one_of(
        leaf,
        leaf,
        st.sampled_from(SPECIFIERS + REGEXES + IDS),
        st.recursive(leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=8),
        st.builds(Deep, st.sampled_from([50, 400, 3000, 100_000]), st.sampled_from(["list", "dict"])),
        st.builds(BigNumber, st.sampled_from([20, 400, 5000])),
    )


SPECIFIERS = ["", "*", " * ", ">=", "==1.*.2", "~=1", "<<1", "1.0", "==4.5.0", ">=4.5,<4.6", "!=", "===x", ">=1,", ",",
              "==" + "1" * 5000, ">=" + "9" * 4301, "<12.9", "== 1.0 ; python_version<'3'", "@ http://x", ">=1\n<2"]
REGEXES = ["(a+)+$", "(", "(a|aa)+$", "[", "*", "(?P<", "a{99999999999}", "(.*a){20}$", "(\\w+)+b", "^(1+)+$",
           "(?i)SM_121A", "\\", ".*", "[[:alpha:]]", "(?<=a+)b"]
IDS = ["A", "-x", "x-", "id\n", "id\t", "é", "a" * 1000, "a..b", "1", "x", "dup", "driver-cuda-below-129", ""]
