"""Package names compared the way pip compares them."""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[-_.]+")


def canonicalize_name(name: str) -> str:
    """PEP 503 normalised name: what packaging.utils.canonicalize_name returns (a test holds the two
    equal). Not imported from there because packaging.utils loads packaging.tags (sysconfig,
    platform, the manylinux rules): ~40 ms on every `check` for one regular expression."""
    return _SEPARATORS.sub("-", name).lower()


# A distribution name as PEP 508 spells it (packaging.utils uses the same expression to validate):
# letters, digits and . _ - only, starting and ending with a letter or digit. Never an option (--log=...).
_NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE)


def name_problem(name: object) -> str | None:
    """Why `name` is no PEP 508 distribution name (None when it is one)."""
    if isinstance(name, str) and _NAME.fullmatch(name):
        return None
    return f"{name!r} is not a package name (PEP 508: letters, digits, '.', '_' and '-', starting and ending with a letter or digit)"
