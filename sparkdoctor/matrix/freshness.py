"""How fresh the matrix's knowledge is for one box: the releases it is tracked through (matrix/tracking.toml),
the day it was tracked, and the installed packages newer than what it has tracked (their releases were never
re-checked against the entries, so a clean verdict says less about them)."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.model import Matrix


def knowledge(matrix: Matrix, facts: Facts) -> dict[str, object]:
    """{"tracked_on": date | None, "tracked": {package: version} (installed ones), "newer": [{package, installed, tracked}]}."""
    tracking = matrix.tracking
    out: dict[str, Any] = {"tracked_on": getattr(tracking, "tracked_on", None), "tracked": {}, "newer": []}
    if tracking is None:
        return out
    for package, through in sorted(tracking.tracked.items()):
        pkg = facts.package(package)
        if not pkg or not pkg.get("version"):
            continue
        out["tracked"][package] = through
        installed = str(pkg["version"])
        try:
            # a [lockstep] member is built from the same source as its head at the same version: tracking the head
            # through V tracks the member through V too (flashinfer-cubin 0.7.x is not on PyPI, flashinfer-python is)
            heads = [Version(v) for head, family in tracking.lockstep.items() if package in family
                     for v in [tracking.tracked.get(head)] if v]
            newer = Version(installed.split("+")[0]) > max([Version(through), *heads])
        except ValueError:  # InvalidVersion, or int() past the digit limit (a METADATA's 5,000-digit version)
            continue
        if newer:
            out["newer"].append({"package": package, "installed": installed, "tracked": through})
    return out


def knowledge_line(k: dict[str, Any]) -> str:
    """One line: what the matrix is tracked through (for the packages this box has) and when."""
    through = ", ".join(f"{p} {v}" for p, v in k["tracked"].items()) or "none of this box's packages"
    return f"knowledge: tracked through {through}" + (f" on {k['tracked_on']}" if k.get("tracked_on") else "")


def newer_lines(k: dict[str, Any]) -> list[str]:
    return [f"{n['package']} {n['installed']} is newer than the matrix has tracked ({n['tracked']}): its entries were not "
            "re-checked on it; `sparkdoctor matrix update` installs newer knowledge" for n in k["newer"]]
