"""How fresh the matrix's knowledge is for one box: the releases it is tracked through (matrix/tracking.toml),
the day it was tracked, and the installed packages newer than what it has tracked (their releases were never
re-checked against the entries, so a clean verdict says less about them); and how far the box is from each of its
known-good stacks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.model import Matrix, Stack
from sparkdoctor.matrix.versions import version_in


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


@dataclass
class StackDistance:
    """How far the box is from a known-good stack, in words, about what the box has.

    differences: installed packages at other versions, env settings that differ. missing: the
    stack's packages this box does not have, kept apart ("the stack also includes ..."): a venv
    built for one library is not told to install a whole serving stack. present: how many of the
    stack's packages are installed; a stack with none is not near at all.
    """

    id: str
    title: str
    differences: list[str]
    refs: list[str]
    missing: list[str] = field(default_factory=list)
    present: int = 0
    image_only: str | None = None  # the stack exists only as this image: never a pip target (matrix verify --stacks)

    @property
    def matches(self) -> bool:
        return not self.differences and not self.missing


def stack_distance(stack: Stack, facts: Facts) -> StackDistance:
    installed = {name: (spec, facts.package(name)) for name, spec in stack.packages.items()}
    missing = [f"{name} {spec}" for name, (spec, pkg) in installed.items() if pkg is None]
    diffs = [f"{name} {pkg.get('version')} installed, {spec} wanted" for name, (spec, pkg) in installed.items()
             if pkg is not None and version_in(pkg.get("version"), spec) is False]
    # a version that cannot be compared is no match ("what this box has of it matches" was said of one)
    diffs += [f"{name} {pkg.get('version')} installed (not a valid version, so not comparable), {spec} wanted"
              for name, (spec, pkg) in installed.items() if pkg is not None and version_in(pkg.get("version"), spec) is None]
    env = facts.env or {}
    diffs += [f"{name}={value} wanted, {'is ' + env[name] if name in env else 'not set'}"
              for name, value in stack.env.items() if env.get(name) != value]
    present = len(installed) - len(missing)
    return StackDistance(stack.id, stack.title, diffs, stack.refs, missing, present, stack.image_only)
