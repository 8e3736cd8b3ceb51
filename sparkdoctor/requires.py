"""What each serving-stack component requires (its Requires-Dist) and the target does not have.

The target probe reads the Requires-Dist lines of vllm, torch, flashinfer-python, nvidia-cutlass-dsl and triton
from their METADATA (never running their code) and the target interpreter's PEP 508 marker variables. Here each
requirement's marker is evaluated for that interpreter (extras are not asked for: `extra == "..."` is false), and
each one that applies is compared with what is installed, as `pip check` does: not installed, or installed at a
version outside the specifier. An unmet requirement is read from files only; whether the component would in fact
import is not tried.

The same goes for a tracked distribution's own files: each one its RECORD lists that is gone from disk (a
half-finished uninstall, a folder deleted by hand) leaves the version pip reports installed with nothing, or part
of it, to import.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from packaging.markers import (
    InvalidMarker,
    UndefinedComparison,
    UndefinedEnvironmentName,
)
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from sparkdoctor.facts import Facts
from sparkdoctor.text import clip, one_line, shell_word

# The components whose requirements are judged, in the order findings name them (probes/target_env/targetenv_dists.py
# reads the same list).
COMPONENTS = ("vllm", "torch", "flashinfer-python", "nvidia-cutlass-dsl", "triton")
REQUIREMENT_CHARS = 200  # one requirement as an evidence line shows it
MISSING_SHOWN = 5  # missing files an evidence line names


@dataclass(frozen=True)
class Unmet:
    """One requirement of an installed component that the target does not satisfy."""

    component: str
    component_version: str
    requirement: str  # as METADATA writes it, clipped
    installed: str | None  # the installed version of the required distribution; None: not installed

    @property
    def missing(self) -> bool:
        return self.installed is None


def unmet_requirements(facts: Facts) -> list[Unmet]:
    """Every applicable requirement of the installed components that is missing or at a version outside its
    specifier. Nothing when the packages are unknown, the snapshot carries no requirements (an older sparkdoctor took
    it) or no marker variables (a marker cannot be judged for an interpreter that did not say what it is)."""
    if facts.packages is None:
        return []
    markers = (facts.target or {}).get("markers")
    environment = {str(k): str(v) for k, v in markers.items()} if isinstance(markers, Mapping) else None
    out: list[Unmet] = []
    for component in COMPONENTS:
        pkg = facts.package(component)
        requires = pkg.get("requires") if pkg else None
        if not pkg or not isinstance(requires, list):
            continue
        for line in requires:
            unmet = _judge(facts, str(line), environment)
            if unmet is not None:
                out.append(Unmet(component, str(pkg.get("version")), clip(str(line), REQUIREMENT_CHARS), unmet[0]))
    return out


def _judge(facts: Facts, line: str, environment: dict[str, str] | None) -> tuple[str | None] | None:
    """(installed version or None) when the requirement applies and is unmet; None when it is met, does not apply
    or cannot be judged (an unparsable line or marker, no marker variables, an installed version that is no
    version)."""
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    if req.marker is not None:
        if environment is None:
            return None
        try:
            if not req.marker.evaluate({**environment, "extra": ""}):
                return None
        except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, ValueError):
            return None
    installed = facts.package(canonicalize_name(req.name))
    if installed is None:
        return (None,)
    version = installed.get("version")
    if not req.specifier or not isinstance(version, str):
        return None
    try:
        inside = req.specifier.contains(Version(version), prereleases=True)
    except (InvalidVersion, ValueError):
        return None
    return None if inside else (version,)


@dataclass(frozen=True)
class Incomplete:
    """A tracked distribution some of whose files (as its RECORD lists them) are gone from disk."""

    name: str
    version: str
    missing: list[str]  # as the RECORD writes them, in its order
    checked: int  # the files the RECORD lists that were looked for
    import_failure: str | None = None  # the CuTe DSL probe's failed import (cutlass-dsl's wheels only): a file at any depth

    @property
    def roots(self) -> list[str]:
        """The top-level modules among them (`triton/__init__.py`, `six.py`, `_C.*.so`): importing those fails."""
        return [p for p in self.missing
                if p.count("/") == 0 and p.endswith((".py", ".so")) or p.count("/") == 1 and p.endswith("/__init__.py")]

    @property
    def title(self) -> str:
        return f"{self.name} {self.version}: {len(self.missing)} of its {self.checked} installed files are missing"

    @property
    def summary(self) -> str:
        return (f"pip lists {self.name} {self.version} as installed, but files its RECORD names are gone from disk (an "
                "uninstall or upgrade stopped half-way, a folder deleted by hand or by an image clean-up): "
                + ("importing it fails." if self.roots or self.import_failure else "the code that needs them fails."))

    @property
    def remedy(self) -> str:
        return (f"reinstall it in the target (`python -m pip install --force-reinstall --no-deps {shell_word(f'{self.name}=={self.version}')}`), "
                f"or remove what is left (`python -m pip uninstall {self.name}`) if it was meant to go")

    @property
    def evidence(self) -> list[str]:
        more = f" and {len(self.missing) - MISSING_SHOWN} more" if len(self.missing) > MISSING_SHOWN else ""
        roots = self.roots
        shown = [*roots, *(m for m in self.missing[:MISSING_SHOWN + len(roots)] if m not in roots)][:MISSING_SHOWN]
        failed = [f"the CuTe DSL probe: {clip(one_line(self.import_failure), 300)}"] if self.import_failure else []
        return [f"missing: {', '.join(clip(one_line(m), 120) for m in shown)}{more}", *failed]


def incomplete_installs(facts: Facts) -> list[Incomplete]:
    """Every distribution whose integrity was checked and found files missing, by name."""
    out, probes = [], [r for r in (facts.kernels or {}).values() if isinstance(r, Mapping) and r.get("kind") == "cutedsl"]
    failed = next((str(r["detail"]) for r in probes if str(r.get("detail")).startswith("import cutlass.cute failed")), None)
    for name, pkg in sorted((facts.packages or {}).items()):
        missing = pkg.get("files_missing") if isinstance(pkg, Mapping) else None
        if isinstance(missing, list) and missing:
            checked, dist = pkg.get("files_checked"), str(pkg.get("name") or name)
            out.append(Incomplete(dist, str(pkg.get("version")), [str(m) for m in missing],
                                  checked if isinstance(checked, int) and checked >= len(missing) else len(missing),
                                  failed if dist.startswith("nvidia-cutlass-dsl") else None))
    return out


def _reinstall(name: str, version: str | None) -> str:
    return f"`python -m pip install --force-reinstall --no-deps {shell_word(f'{name}=={version}')}`" if version else \
        f"`python -m pip install --force-reinstall --no-deps {shell_word(f'{name}==VERSION')}` with the version it should be"


@dataclass(frozen=True)
class Unlisted:
    """A tracked component's top-level package that imports (its files are on sys.path) with no metadata folder."""

    name: str  # the distribution it belongs to
    module: str
    path: str
    version: str | None  # what its `__version__ = '...'` says

    @property
    def title(self) -> str:
        return f"{self.name}{' ' + self.version if self.version else ''}: `import {self.module}` finds its files, but no " \
               "distribution metadata describes them"

    @property
    def summary(self) -> str:
        return (f"{self.path} is on the target's sys.path, but no {self.name} .dist-info (or .egg-info) is: pip does not list "
                f"it, `pip check` and the resolver take {self.name} for not installed, and sparkdoctor, which reads versions "
                f"from that metadata, does not judge {self.name}'s matrix entries. A .dist-info deleted by hand or by an "
                "image clean-up, or files copied in without pip, leave this.")

    @property
    def remedy(self) -> str:
        return (f"reinstall it in the target ({_reinstall(self.name, self.version)}): pip writes the metadata back and "
                f"replaces the files; or delete {self.path} if it was meant to go")

    @property
    def evidence(self) -> list[str]:
        return [f"found: {clip(one_line(self.path), 200)} (version {self.version or 'not written in its files'}); "
                f"metadata: no {self.name} .dist-info on sys.path"]


def unlisted_installs(facts: Facts) -> list[Unlisted]:
    """The snapshot's modules_without_metadata (a snapshot of an older sparkdoctor has none)."""
    return [Unlisted(str(row.get("distribution")), str(row.get("module")), str(row.get("path")),
                     row["version"] if isinstance(row.get("version"), str) else None)
            for row in facts.modules_without_metadata or []
            if isinstance(row, Mapping) and facts.package(str(row.get("distribution"))) is None]


@dataclass(frozen=True)
class NoRecord:
    """A tracked distribution installed as a .dist-info whose RECORD is gone: pip cannot uninstall or replace it."""

    name: str
    version: str
    info_dir: str

    @property
    def title(self) -> str:
        return f"{self.name} {self.version}: its .dist-info has no RECORD, so pip cannot uninstall or upgrade it cleanly"

    @property
    def summary(self) -> str:
        return (f"RECORD lists the files pip installed for {self.name}; without it `pip uninstall` stops (\"uninstall-no-"
                "record-file\"), an upgrade cannot remove the old release's files, and sparkdoctor cannot check them "
                "(integrity: no-record). A RECORD deleted by hand or by an image clean-up, or an installer that wrote none, "
                "leave this.")

    @property
    def remedy(self) -> str:
        return (f"write it again in the target (`python -m pip install --ignore-installed --no-deps {shell_word(f'{self.name}=={self.version}')}`): "
                "pip writes its files and a new RECORD over the old ones (pip's own hint, --force-reinstall, stops on the "
                "missing RECORD the same way)")

    @property
    def evidence(self) -> list[str]:
        return [f"no RECORD in {clip(one_line(self.info_dir), 200)}"]


def record_less_installs(facts: Facts, named: Collection[str] = ()) -> list[NoRecord]:
    """.dist-info installs with no RECORD (the probe names the folder in no_record; an .egg-info has no RECORD by design,
    and pip uninstalls it from its other files): tracked ones, and those in `named` (what the matrix names). Not every
    one: a system interpreter's Debian-installed .dist-info folders have none by design."""
    return [NoRecord(str(pkg.get("name") or name), str(pkg.get("version")), str(pkg["no_record"]))
            for name, pkg in sorted((facts.packages or {}).items())
            if isinstance(pkg, Mapping) and isinstance(pkg.get("no_record"), str)
            and (pkg.get("integrity") == "no-record" or name in named)]
