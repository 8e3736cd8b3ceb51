"""Package names compared the way pip compares them."""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[-_.]+")


def canonicalize_name(name: str) -> str:
    """PEP 503 normalised name: what packaging.utils.canonicalize_name returns (a test holds the two
    equal). Not imported from there because packaging.utils loads packaging.tags (sysconfig,
    platform, the manylinux rules): ~40 ms on every `check` for one regular expression."""
    return _SEPARATORS.sub("-", name).lower()
