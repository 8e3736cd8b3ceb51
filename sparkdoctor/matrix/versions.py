"""PEP 440 versions and specifiers as the matrix reads them, safe against any string a box reports.

A version comes from a package's METADATA, a tool's output or a snapshot, so it may be anything.
packaging raises InvalidVersion for most junk but a plain ValueError from int() for a number over
Python's 4,300-digit limit; both mean the same here: the version is not comparable (unknown), and
the evidence says so in a line of bounded length.
"""

from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

SHOWN_CHARS = 40
# Clauses one specifier may have: the longest bundled one has 4 (">=0.24.0,!=0.25.*,!=0.26.*,<0.28.0"). `matrix validate`
# compares two entries' ranges at every bound of both, so two specifiers of 20,000 clauses kept it busy for minutes.
MAX_CLAUSES = 32


def spec(text: str) -> SpecifierSet:
    """A specifier; "*" means any version. Pre-releases are compared, never skipped."""
    return SpecifierSet("" if text.strip() == "*" else text, prereleases=True)


def parse_version(text: object) -> Version | None:
    """The version, or None when it is not a PEP 440 version (including over-long numbers)."""
    if not isinstance(text, str):
        return None
    try:
        return Version(text)
    except ValueError:  # InvalidVersion, or int() past the digit limit
        return None


def version_in(version: str | None, specifier: str) -> bool | None:
    """Is `version` in `specifier`? None when the version is unknown or not comparable."""
    parsed = parse_version(version)
    if parsed is None:
        return None
    try:
        return parsed in spec(specifier)
    except ValueError:
        return None


def shown(version: object) -> str:
    """A version for an evidence line: as it is when short, else its start and its length."""
    text = str(version)
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:20]}… ({len(text)} characters)"


def spec_problem(value: object) -> str | None:
    """Why `value` is not a usable specifier (None when it is): for the matrix validators."""
    if not isinstance(value, str):
        return "must be a PEP 440 specifier string such as \">=4.5.0,<4.6\" (or \"*\")"
    try:
        parsed = spec(value)
    except InvalidSpecifier:
        return f"invalid PEP 440 specifier {shown(value)!r}"
    if len(parsed) > MAX_CLAUSES:
        return f"specifier {shown(value)!r} has {len(parsed):,} clauses; at most {MAX_CLAUSES} are read"
    for one in parsed:
        if one.operator == "===":  # arbitrary equality compares strings
            continue
        if parse_version(one.version.removesuffix(".*")) is None:
            return f"invalid PEP 440 specifier {shown(value)!r}: {shown(one.version)!r} is not a comparable version"
    return None
