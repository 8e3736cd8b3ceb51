"""Sibling pins: a constraints file that pins several members of one family (nvidia-cutlass-dsl==4.4.2
and nvidia-cutlass-dsl-libs-cu13==4.4.2). A pin action that moves one member must move the others
with it, or no resolver can satisfy the file (pip: ResolutionImpossible).

A family is read from the installed metadata, never named here: the members the installed package
requires at exactly its own version (on any extra) are wheels released together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from sparkdoctor.fix.inventory import Inventory


def family_of(inv: Inventory, package: str) -> set[str]:
    """The members `package` (as installed) requires at exactly its own version, on any extra."""
    dist = inv.get(package)
    out: set[str] = set()
    if dist is None:
        return out
    for text in dist.requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and specs[0].version == dist.version:
            out.add(canonicalize_name(req.name))
    return out - {canonicalize_name(package)}


def pinned_siblings(inv: Inventory, constraints: list[dict[str, Any]], package: str, path: Path) -> tuple[list[str], str | None]:
    """(members of `package`'s family that `path` pins at the same version as `package`: they move with
    it; one line naming the file and lines of members pinned otherwise: the plan is refused), from
    check's constraint entries (file, line, name, specifier, requirement)."""
    package = canonicalize_name(package)
    family = family_of(inv, package)
    if not family:
        return [], None
    rows = [c for c in constraints if c.get("file") and Path(c["file"]) == path]
    same = {str(c.get("specifier") or "") for c in rows if canonicalize_name(c.get("name", "")) == package}
    have = inv.get(package)
    same |= {f"=={have.version}"} if have else set()
    members = [c for c in rows if canonicalize_name(c.get("name", "")) in family]
    moved = sorted({str(canonicalize_name(c["name"])) for c in members if str(c.get("specifier") or "") in same})
    odd = [c for c in members if str(c.get("specifier") or "") not in same]
    if not odd:
        return moved, None
    lines = ", ".join(f"{path}:{c.get('line')} ({c.get('requirement')})" for c in odd)
    return moved, (f"{lines} pins a member of {package}'s family to another version than {package}; "
                   "the family moves together: change or remove that pin by hand")
