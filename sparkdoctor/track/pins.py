"""Pins between tracked packages, extras included: what each newest release requires of the others (its wheel's
METADATA Requires-Dist, read remotely), and the pairs pip cannot install together.

An extra is part of a stack: flashinfer-python 0.7.2.post1's `[b12x]` extra pins nvidia-cutlass-dsl==4.7.1 while
vLLM 0.33.0, which pins that FlashInfer, pins nvidia-cutlass-dsl[cu13]==4.8.0, so
`pip install vllm==0.33.0 flashinfer-python[b12x]` cannot resolve. A conflict is a release R that requires
another tracked release S (R's pin admits S), where S (with one of its extras, or none) and R pin a third package
with specifiers no version satisfies both.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from sparkdoctor.matrix.consistency import ranges_overlap
from sparkdoctor.released import Reader, RemoteError

# The target the markers are judged for: a DGX Spark (linux aarch64, CPython 3.12)
ENVIRONMENT = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64", "os_name": "posix",
               "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
               "platform_python_implementation": "CPython"}


@dataclass(frozen=True)
class Pin:
    package: str  # the release that requires
    version: str
    extra: str | None  # the extra of that release the requirement belongs to (None: always)
    requires: str  # canonical name of what it requires
    spec: str


def _extra_of(marker: Marker | None) -> str | None:
    text = str(marker) if marker else ""
    for quote in ('"', "'"):
        key = f"extra == {quote}"
        if key in text:
            return text.split(key, 1)[1].split(quote, 1)[0]
    return None


def pins_of(package: str, version: str, metadata: str, tracked: set[str]) -> list[Pin]:
    """The release's requirements on tracked packages (extras named), for a linux aarch64 CPython 3.12 box."""
    out = []
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            req = Requirement(line.split(":", 1)[1].strip())
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if name not in tracked or name == package:
            continue
        extra = _extra_of(req.marker)
        if req.marker is not None and not req.marker.evaluate({**ENVIRONMENT, "extra": extra or ""}):
            continue
        out.append(Pin(package, version, extra, name, str(req.specifier) or "*"))
    return out


def read_pins(reader: Reader, releases: dict[str, str], tracked: set[str]) -> tuple[list[Pin], list[str]]:
    """Pins of each (package -> version) release, and one line per release whose METADATA could not be read."""

    pins, errors = [], []
    for package, version in releases.items():
        try:
            wheel = reader.release(package, version)
            member = next(n for n in wheel.names if n.endswith(".dist-info/METADATA"))
            pins += pins_of(package, version, wheel.text(member), tracked)
        except (RemoteError, StopIteration) as exc:
            errors.append(f"{package} {version}: METADATA not read ({exc or 'no .dist-info/METADATA'})")
    return pins, errors


def pinned_release(pin: Pin) -> str | None:
    """The one version an exact pin (==V or ===V, no wildcard) names; None for anything else, and for a `===` string
    that is no version (`===1.0-evil`: PEP 440's arbitrary equality, which a release's METADATA may carry)."""
    try:
        specs = list(SpecifierSet(pin.spec))
    except InvalidSpecifier:
        return None
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or specs[0].version.endswith(".*"):
        return None
    try:
        return str(Version(specs[0].version))
    except InvalidVersion:
        return None


def conflicts(pins: list[Pin], releases: dict[str, str]) -> list[dict[str, str]]:
    """Each R -> S (R requires S: the release it pins exactly, else the newest) where S[extra] and R pin a third
    package apart. `pins` holds the pins of every release read (read_pins on each pinned release too)."""
    out = []
    for r in pins:
        if r.extra is not None:
            continue
        s_version = pinned_release(r) or releases.get(r.requires)
        if s_version is None or not ranges_overlap(r.spec, f"=={s_version}"):
            continue
        mine = {p.requires: p.spec for p in pins if p.package == r.package and p.extra is None}
        for s in pins:
            if s.package != r.requires or s.version != s_version or s.requires not in mine or s.requires == r.package:
                continue
            if not ranges_overlap(mine[s.requires], s.spec):
                extra = f"[{s.extra}]" if s.extra else ""
                out.append({"release": f"{r.package} {r.version}", "with": f"{s.package}{extra} {s.version}", "package": s.requires,
                            "specs": f"{mine[s.requires]} against {s.spec}",
                            "why": f"{r.package} {r.version} pins {s.requires}{mine[s.requires]} and {s.package} {s.version}, but "
                                   f"{s.package}{extra} {s.version} pins {s.requires}{s.spec}: pip cannot install "
                                   f"{r.package}=={r.version} with {s.package}{extra}"})
    return out
