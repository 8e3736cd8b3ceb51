"""`matrix track --probe`, one release: compile (or read) a release's compiler or kernel source for an arch, the
way `whatif --probe` does (one implementation: sparkdoctor.whatif.ptx and sparkdoctor.whatif.probe).

  ptx       triton, nvidia-cuda-nvcc-*: each ptxas the release's wheel ships (read over range requests, the
            member alone, this machine's wheel: it must run here) assembles every PTX probe (probes/kernels/);
            for Triton also "the ptxas Triton runs" for the arch (collect/toolkits.mark_triton's rule)
  cutedsl   nvidia-cutlass-dsl: the CuTe DSL probes (probes/cutedsl/) compiled in a throwaway venv holding the
            release as `pip install nvidia-cutlass-dsl==V` lays it out, and as `...[cu13]==V` does (the sets
            read from the release's METADATA), each build by itself; a build whose wheels weigh more than
            INSTALL_BYTES_LIMIT on the index is not installed
  archlist  flashinfer-python: every JIT module's arch list (sparkdoctor.track.archlists), read from its sources

Each outcome is refused (ptxas or the DSL rejected the arch; the arch list leaves the major out), accepted
(compiled; the list has it) or no answer (could not run; not read). Outcomes are cached under the user cache dir
(track-probe/) by package, version, kind, arch, platform and a fingerprint of the probes' files and this code: a
release's files never change, so it is compiled once; a probe that could not start is not cached.
"""

from __future__ import annotations

import hashlib
import json
import platform as host
import sys
import tempfile
from dataclasses import asdict, dataclass, field, fields
from email.parser import HeaderParser
from pathlib import Path
from types import SimpleNamespace

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from sparkdoctor.arch import arch_cc
from sparkdoctor.collect.toolkits import TRITON_BLACKWELL_NAME
from sparkdoctor.files import write_cache_entry
from sparkdoctor.locations import cache_dir, data_dir
from sparkdoctor.released import Reader, RemoteError, pick_wheel
from sparkdoctor.track.archlists import read_arch_lists
from sparkdoctor.whatif.probe import probe_cutedsl
from sparkdoctor.whatif.ptx import host_platform, release_ptxas, ships_ptxas

CUTEDSL = "nvidia-cutlass-dsl"
FLASHINFER = "flashinfer-python"
COMPONENT = {"ptx": "cuda-toolkit", "cutedsl": "cutlass-dsl", "archlist": "flashinfer"}
ACCEPTED = {"compiled": False, "admits": False, "refused": True, "refuses": True}  # verdict -> refuses the arch
CACHE_VERSION = 1
INSTALL_BYTES_LIMIT = 1024 * 2**20  # the cutlass-dsl wheels of one build (146 MiB for 4.5.2 [cu13] on x86_64)
TRITON_RUNS = "the ptxas Triton runs"  # ptxas-blackwell for sm_100 and newer where the release ships it, else ptxas


def probe_kind(package: str) -> str | None:
    if package == CUTEDSL:
        return "cutedsl"
    if package == FLASHINFER:
        return "archlist"
    return "ptx" if ships_ptxas(package) else None


@dataclass(frozen=True)
class Outcome:
    group: str  # what compiled or read it: a ptxas member's name, a cutlass-dsl build, a JIT file:function
    probe: str  # the PTX probe, the CuTe DSL kernel, or "arch list"
    verdict: str  # compiled | refused | could not run (a compile); admits | refuses | not read (an arch list)
    detail: str

    @property
    def refuses(self) -> bool | None:
        return ACCEPTED.get(self.verdict)


FIELDS = {f.name for f in fields(Outcome)}  # what a kept file must hold for each outcome


@dataclass
class ReleaseProbe:
    package: str
    version: str
    kind: str
    outcomes: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # nothing could be probed, and why (not cached)
    cached: bool = False

    def to_json(self) -> dict[str, object]:
        return {"package": self.package, "version": self.version, "kind": self.kind, "cached": self.cached,
                "outcomes": [asdict(o) for o in self.outcomes], "notes": self.notes, "error": self.error}


# ---- one release --------------------------------------------------------------------------------------------
def _fingerprint() -> str:
    """The probes' own files and this code: a changed probe is a new answer, never a cached old one."""

    digest = hashlib.sha256(str(CACHE_VERSION).encode())
    here = Path(__file__).parent
    for code in (Path(__file__), here / "archlists.py", here.parent / "whatif" / "ptx.py", here.parent / "whatif" / "probe.py"):
        digest.update(code.read_bytes())
    for sub in ("kernels", "cutedsl"):
        for path in sorted((data_dir("probes") / sub).glob("*")):
            if path.is_file():
                digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _cache_file(package: str, version: str, kind: str, arch: str, where: str) -> Path:
    return cache_dir() / "track-probe" / f"{package}-{version}-{kind}-{arch}-{where}-{_fingerprint()}.json"


def cutedsl_builds(reader: Reader, version: str) -> dict[str, dict[str, str]]:
    """The distributions `pip install nvidia-cutlass-dsl==V` (libs-base) and `nvidia-cutlass-dsl[cu13]==V`
    (libs-cu13) install, read from the METADATA of the release and of each family wheel it brings (Requires-Dist,
    markers evaluated per extra): from 4.6.0 the DSL itself is in libs-core, which only libs-base names."""
    builds: dict[str, dict[str, str]] = {}
    for extra, build in (("", "libs-base"), ("cu13", "libs-cu13")):
        dists = {CUTEDSL: version}
        todo = [CUTEDSL]
        while todo:
            name = todo.pop()
            for req, pinned in _family_requires(reader, name, dists[name], extra if name == CUTEDSL else "").items():
                if req not in dists:
                    dists[req] = pinned
                    todo.append(req)
        if f"{CUTEDSL}-{build}" in dists:
            builds[build] = dists
    return builds


def _family_requires(reader: Reader, name: str, version: str, extra: str) -> dict[str, str]:
    """The cutlass-dsl family wheels one wheel requires with `extra`, each at its pinned version (else `version`)."""
    wheel = reader.release(name, version)
    meta = next(n for n in wheel.names if n.endswith(".dist-info/METADATA"))
    out: dict[str, str] = {}
    for line in HeaderParser().parsestr(wheel.text(meta)).get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name).startswith(CUTEDSL) and not (req.marker and not req.marker.evaluate({"extra": extra})):
            pinned = [s.version for s in req.specifier if s.operator in ("==", "===")]
            out[canonicalize_name(req.name)] = pinned[0] if pinned else version
    return out


def _probe_ptx(package: str, version: str, arch: str, python: str) -> ReleaseProbe:
    out = ReleaseProbe(package, version, "ptx")
    reader = Reader(host_platform(), python)
    try:
        with tempfile.TemporaryDirectory(prefix="sparkdoctor-track-ptx-") as tmp:
            rows = release_ptxas(reader, package, version, arch, Path(tmp))
    finally:
        reader.close()
    for row in rows:
        if row.error:
            out.notes.append(row.error)
        if row.note:
            out.notes.append(row.note)
        name = Path(row.member).name if row.member else "ptxas"
        for k in row.kernels or []:
            out.outcomes.append(Outcome(name, k.probe, k.verdict, f"{name} {row.ptxas_version}: {k.detail}"))
    if "triton" in package:  # the one Triton runs for the arch (collect/toolkits.mark_triton's rule): what users get
        names = {o.group for o in out.outcomes}
        used = TRITON_BLACKWELL_NAME if TRITON_BLACKWELL_NAME in names and arch_cc(arch)[0] >= 10 else "ptxas"
        out.outcomes += [Outcome(TRITON_RUNS, o.probe, o.verdict, o.detail) for o in list(out.outcomes) if o.group == used]
    if not out.outcomes and any(r.error for r in rows):
        out.error = "; ".join(r.error for r in rows if r.error)
    return out


def _family_bytes(reader: Reader, dists: dict[str, str]) -> int | None:
    """What the cutlass-dsl wheels this machine would install weigh, from the index (None: one is missing): the
    venv's download is bounded before it starts (the DSL's third-party dependencies come from uv's cache)."""

    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"  # the throwaway venv is this interpreter's
    total = 0
    for name, version in dists.items():
        try:
            pick = pick_wheel(reader.index.wheels(name, version), host_platform(), pyver)
        except RemoteError:
            return None
        if pick is None:
            return None
        total += pick.file.size or 0
    return total


def _probe_cutedsl(reader: Reader, version: str, arch: str, python: str) -> ReleaseProbe:
    out = ReleaseProbe(CUTEDSL, version, "cutedsl")
    try:
        builds = cutedsl_builds(reader, version)
    except (RemoteError, StopIteration) as exc:
        out.error = f"could not read {CUTEDSL} {version}'s METADATA: {exc or 'no METADATA member'}"
        return out
    if not builds:
        out.notes.append(f"{CUTEDSL} {version}'s METADATA names no libs-base or libs-cu13 wheel: nothing to compile")
    errors = []
    for build, dists in builds.items():
        size = _family_bytes(reader, dists)
        if size is None or size > INSTALL_BYTES_LIMIT:
            errors.append(f"{build}: not installed: " + ("its wheels for this machine are not all on the index" if size is None else
                                                         f"its wheels are {size // 2**20} MiB, over the {INSTALL_BYTES_LIMIT // 2**20} MiB limit"))
            continue
        facts = SimpleNamespace(packages={n: {"version": v} for n, v in dists.items()}, cutedsl={"active_build": build})
        run = probe_cutedsl(facts, arch, python)
        if run.error:
            errors.append(f"{build}: {run.error}")
        out.outcomes += [Outcome(build, k.kernel, k.verdict, f"{k.status}: {k.detail}") for k in run.kernels]
        out.notes.append(f"{build}: " + ", ".join(f"{n}=={v}" for n, v in sorted(dists.items())))
    if errors:
        out.notes += errors
        if not out.outcomes:
            out.error = "; ".join(errors)
    return out


def _probe_archlist(reader: Reader, version: str, arch: str) -> ReleaseProbe:
    out = ReleaseProbe(FLASHINFER, version, "archlist")
    major = arch_cc(arch)[0]
    try:
        lists, note = read_arch_lists(reader.release(FLASHINFER, version))
    except RemoteError as exc:
        out.error = f"could not read {FLASHINFER} {version}: {exc}"
        return out
    if note:
        out.notes.append(note)
    for a in lists:
        admits = a.admits(major)
        verdict = "not read" if admits is None else "admits" if admits else "refuses"
        out.outcomes.append(Outcome(a.key, "arch list", verdict, a.shown()))
    return out


def probe_release(reader: Reader, package: str, version: str, arch: str, python: str = "3.12") -> ReleaseProbe:
    """One release probed (or its cached outcomes). `reader` reads the release's Python files (track's platform);
    a ptxas is read from this machine's wheel, and the CuTe DSL venvs are this machine's Python's."""
    kind = probe_kind(package)
    if kind is None:
        return ReleaseProbe(package, version, "none", error=f"{package} brings no compiler or kernel source to probe")
    where = {"ptx": f"{host.machine()}-{python}", "cutedsl": f"{host.machine()}-{sys.version_info.major}.{sys.version_info.minor}",
             "archlist": "any"}[kind]
    cache = _cache_file(package, version, kind, arch, where)
    saved = _cached(cache)
    if saved is not None:
        return ReleaseProbe(package, version, kind, saved[0], saved[1], cached=True)
    if kind == "ptx":
        out = _probe_ptx(package, version, arch, python)
    elif kind == "cutedsl":
        out = _probe_cutedsl(reader, version, arch, sys.executable)
    else:
        out = _probe_archlist(reader, version, arch)
    transient = any(o.verdict == "could not run" and "timed out" in o.detail for o in out.outcomes)
    if out.error is None and not transient:  # one that cannot be written (a full disk) is probed again next time
        write_cache_entry(cache, json.dumps({"outcomes": [asdict(o) for o in out.outcomes], "notes": out.notes}).encode())
    return out


def _cached(path: Path) -> tuple[list[Outcome], list[str]] | None:
    """(outcomes, notes) kept by an earlier probe; None (probe again) for a missing, damaged or foreign file."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        outcomes, notes = saved["outcomes"], saved["notes"]
    except (OSError, ValueError, RecursionError, KeyError, TypeError):
        return None
    if not (isinstance(outcomes, list) and isinstance(notes, list) and all(isinstance(n, str) for n in notes)):
        return None
    if not all(isinstance(o, dict) and set(o) == FIELDS and all(isinstance(v, str) for v in o.values()) for o in outcomes):
        return None
    return [Outcome(**o) for o in outcomes], notes


