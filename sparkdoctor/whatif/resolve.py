"""Resolve a proposed upgrade with the target's own installer, without installing anything:
`pip install --dry-run --report` run by the target's own pip, or by sparkdoctor's pip for a venv without one (a
uv venv too), with every constraint file the target's Facts found, in the target's interpreter without site. Never
by `uv pip --python PY`: uv asks the interpreter about itself with site, which runs the target's `.pth` import lines
and sitecustomize.py (pip's dry run downloads every wheel it picks, 337 MB for vLLM 0.33.0, where uv read only
metadata: docs/evidence/whatif-speed.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from sparkdoctor import proc
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_USAGE
from sparkdoctor.facts import Facts
from sparkdoctor.facts_shapes import table
from sparkdoctor.inputs import NotJSON, json_answer
from sparkdoctor.matrix.versions import parse_version
from sparkdoctor.proc import ProcResult
from sparkdoctor.targets.early import PIP_NO_SITE, own_pip_folder, own_pip_misfit
from sparkdoctor.targets.interface import Target
from sparkdoctor.text import clip
from sparkdoctor.verify.stacks import conflict
from sparkdoctor.verify.venvs import own_pip

RESOLVE_TIMEOUT = 600.0
NO_PROCESS = "sparkdoctor's pip call starts no process"  # what targets/target_pip_dry.py's audit hook says


class ResolveError(SparkdoctorError):
    """The upgrade cannot be resolved (conflict, no such version, no registry); one line (exit 2)."""

    exit_code = EXIT_USAGE
    code = "unresolvable"


@dataclass(frozen=True)
class Change:
    name: str  # canonical
    old: str | None  # None: a new install
    new: str
    url: str | None = None
    sha256: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "from": self.old, "to": self.new, "url": self.url, "sha256": self.sha256}


@dataclass
class Resolution:
    """How the dry run went, besides its changes: which installer ran it, and the dependency-conflict lines it
    printed (pip's "X requires Y==V, but you have Y W": the upgrade would leave a family at mixed versions)."""

    installer: str = ""
    warnings: list[str] = field(default_factory=list)


_CONFLICT = re.compile(r"requires .*, but you (?:have|'ll have) |dependency conflicts")


def conflict_lines(*texts: str | None) -> list[str]:
    return [line.strip() for text in texts for line in (text or "").splitlines() if _CONFLICT.search(line)][:8]


# What pip takes for a file to install when a requirement's name ends so and the file exists (pip's is_archive_file)
ARCHIVE_SUFFIXES = (".zip", ".whl", ".tar.bz2", ".tbz", ".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma", ".tar.gz",
                    ".tgz", ".tar")


PIP_DRY = Path(PIP_NO_SITE)


def check_specs(specs: list[str], allow_url: bool = False) -> None:
    """Refuse, in one line, a SPEC that is no requirement: one starting with '-' (pip would take it as an option:
    `--log=PATH` writes a file, `-r FILE` reads one), a path (`./pkg`, `x.tar.gz`), and a URL requirement (`name @
    file:///...`) unless allow_url, and then only a wheel's: pip builds a direct sdist or folder even under
    --only-binary :all:, running its code."""
    for spec in specs:
        if spec.startswith("-"):
            raise ResolveError(f"{spec!r}: a requirement cannot start with '-' (whatif takes no pip options in SPEC)")
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            raise ResolveError(f"{spec!r} is not a requirement as pip takes them (name[extras]specifier, e.g. vllm==0.33.0)"
                               + ("" if allow_url else "; a path or URL needs --allow-url")) from None
        if req.name.lower().endswith(ARCHIVE_SUFFIXES):  # a valid name to packaging, a local file to pip when it exists
            raise ResolveError(f"{spec!r}: a name ending like an archive is read by pip as a local file, which it would "
                               "build (running its code); whatif resolves registry releases by name")
        if req.url and not allow_url:
            raise ResolveError(f"{spec!r}: a URL or path requirement is refused (whatif resolves registry releases); "
                               "--allow-url to judge a wheel's URL anyway")
        if req.url and not urlsplit(req.url).path.endswith(".whl"):  # pip builds a direct sdist or folder, --only-binary or not
            raise ResolveError(f"{spec!r}: only a wheel's URL can be judged: a source distribution or folder would be built, "
                               "running its code")


def dry_run_argv(pip: list[str], specs: list[str], constraints: list[str], quiet: bool = True, no_deps: bool = False,
                 extra: tuple[str, ...] = ()) -> list[str]:
    """pip's dry run; quiet, the report is the only thing on stdout (`--report -`). no_deps: for a target that
    is a --no-deps file set (installed without its dependency closure), resolved the way it was installed.
    Wheels only (`--only-binary :all:`): a release with only a source distribution would have its setup.py run
    to read its metadata. The requirements come after `--`, so none can become an option."""
    argv = [*pip, "--disable-pip-version-check", "--no-input", "install", "--dry-run", "--only-binary", ":all:"]
    argv += ["--no-deps"] if no_deps else []
    argv += ["--quiet", "--report", "-"] if quiet else []
    for c in constraints:
        argv += ["-c", c]
    return [*argv, *extra, "--", *specs]


def constraint_files(facts: Facts, local: bool) -> list[str]:
    files = []
    for row in facts.constraints or []:
        f = row.get("file") if isinstance(row, dict) else None
        if f and f not in files and (not local or Path(f).is_file()):
            files.append(f)
    return files


def resolve_upgrade(target: Target, python: str, specs: list[str], facts: Facts, no_deps: bool = False,
                    seen: Resolution | None = None) -> list[Change]:
    """The distributions the upgrade would install or change, from the target's own pip in a dry run
    (inside the container for a container target), run by the target's interpreter without site (whatif/
    target_pip_dry.py: no .pth line or sitecustomize of the target runs). A local venv without pip is resolved by
    sparkdoctor's pip, run the same way from its own folder, with the same options. `seen`, when given, gets the
    installer and the dependency-conflict lines the dry run printed."""
    local = getattr(target, "shares_files", True)
    seen = seen if seen is not None else Resolution()
    seen.installer = f"{python} -m pip"
    pip: list[str] = []  # the arguments of target_pip_dry.py: pip without site, in the target (see there)
    constraints = constraint_files(facts, local)

    def run(argv: list[str]) -> ProcResult:
        return target.run_script(PIP_DRY, argv, RESOLVE_TIMEOUT)

    result = run(dry_run_argv(pip, specs, constraints, no_deps=no_deps))
    old = not result.ok and _NO_DRY_RUN.search(result.stderr or "") and local
    if old and (misfit := own_pip_misfit(str((facts.target or {}).get("version") or ""))):
        why = "has no pip" if "No module named pip" in (result.stderr or "") else "has a pip older than 22.2 (no --dry-run --report)"
        raise ResolveError(f"{python} {why}, and {misfit}: add or upgrade the target's pip: nothing is predicted")
    if old and own_pip() and own_pip_folder():
        pip = ["--pip-from", str(own_pip_folder())]  # sparkdoctor's pip, run by the target's interpreter without site
        seen.installer = f"{python} -m pip (sparkdoctor's pip, {own_pip_folder()})"
        result = run(dry_run_argv(pip, specs, constraints, no_deps=no_deps))
    if result.timed_out or result.start_error or result.signal:
        raise ResolveError(f"pip's dry run did not finish: {result.describe_failure()}")
    if not result.ok:  # run again without --quiet: pip says which requirements conflict only then
        asked = clip(" ".join(specs), 300)  # 1,500 long specs were 1.4 MB of one line
        loud = run(dry_run_argv(pip, specs, constraints, quiet=False, no_deps=no_deps))
        debug = None
        if _NO_VERSION.search((loud.stderr or "") + "\n" + (loud.stdout or "")):  # was it the index, or a file pip skipped?
            debug = run(dry_run_argv(pip, specs, constraints, quiet=False, no_deps=no_deps, extra=("-vv",)))
        if debug is not None and (unreachable := _unreachable(debug)):
            raise ResolveError(f"{asked}: the package index cannot be reached from {python} ({unreachable}): "
                               "nothing is predicted")
        if NO_PROCESS in (loud.stderr or "") + (loud.stdout or ""):  # target_pip_dry.py refused what a build starts
            raise ResolveError(f"{asked} cannot be resolved in {python} without building a source distribution (its code would "
                               "run; sparkdoctor's pip call starts no process): a constraint file or pip config with --no-binary asks for one")
        raise ResolveError(f"{asked} cannot be resolved in {python}: {conflict(loud)}{_no_wheel(loud, debug)}")
    seen.warnings = conflict_lines(result.stderr)
    try:
        doc = json_answer(result.stdout)
    except NotJSON as exc:
        raise ResolveError(f"pip's --report {exc}") from None
    install = doc.get("install") if isinstance(doc, dict) else None
    if not isinstance(install, list) or not all(isinstance(i, dict) and isinstance(i.get("metadata"), dict) for i in install):
        raise ResolveError(f"pip's --report is not an installation report: {clip(result.stdout.strip(), 120)}")
    changes = []
    for item in install:
        meta = item["metadata"]
        name = canonicalize_name(str(meta.get("name", "")))
        if not name:
            continue
        info = table(item.get("download_info"))
        hashes = table(table(info.get("archive_info")).get("hashes"))
        old = (facts.package(name) or {}).get("version")
        new = str(meta.get("version"))
        url, sha256 = info.get("url"), hashes.get("sha256")
        if old != new:
            changes.append(Change(name, old, new, url if isinstance(url, str) else None, sha256 if isinstance(sha256, str) else None))
    return sorted(changes, key=lambda c: c.name)


# no pip in the target, or one older than `install --dry-run --report` (pip 22.2): sparkdoctor's pip resolves instead
_NO_DRY_RUN = re.compile(r"No module named pip|no such option: --(?:dry-run|report)")


_FETCH_FAILED = re.compile(r"Could not fetch URL (\S+?): (.*?)(?: - skipping)?$", re.MULTILINE)
_CAUSE = re.compile(r"\[Errno -?\d+\] [^'\")]+|Name or service not known|Temporary failure in name resolution|"
                    r"Connection refused|timed out|certificate verify failed")


def _unreachable(result: proc.ProcResult) -> str | None:
    """"could not fetch URL (why)" when pip found no candidate because an index did not answer, else None."""
    text = (result.stderr or "") + "\n" + (result.stdout or "")
    # a 404 is an index that answered: it has no project of that name (said by the caller as no such project)
    found = next((m for m in _FETCH_FAILED.finditer(text) if not re.search(r"\b404\b", m.group(2))), None)
    if not found or "from versions: none" not in text:
        return None
    cause = _CAUSE.search(found.group(2))
    return f"could not fetch {found.group(1)}: {cause.group(0).strip() if cause else clip(found.group(2), 160)}"


_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+)[^\n]*?(?:\(from versions: ([^)]*)\))?$",
                         re.MULTILINE)


def _no_wheel(result: proc.ProcResult, debug: proc.ProcResult | None = None) -> str:
    """Why a requirement found no candidate under --only-binary :all:. pip lists only the versions with a wheel
    for this interpreter and platform, so a release that is there as a source distribution only (or as wheels
    for other platforms) looks like one that does not exist; the `-vv` run (`debug`) tells them apart: pip
    names every file it skipped there. A release that fits among them: it has no wheel here (whatif never
    builds a source distribution). None: no such release, with the nearest and newest versions pip listed."""
    found = _NO_VERSION.search((result.stderr or "") + "\n" + (result.stdout or ""))
    if not found:
        return ""
    have = (found.group(2) or "").strip()
    listed = [v.strip() for v in have.split(",") if v.strip() and have != "none"]
    if listed and debug is not None and not _skipped_release_fits(found.group(1), debug):
        return f" ({found.group(1)}: no such release; {_nearest(found.group(1), listed)})"
    which = f"releases with one: {have}" if listed else "none has one, or no such project"
    return (f" ({found.group(1)}: no release that fits has a wheel for this interpreter and platform ({which}); whatif reads "
            "wheels only, it never builds a source distribution, which would run the package's code)")


_SKIPPED_FILE = re.compile(r"Skipping link: .*?([^/\s#?]+?)(?:\.whl|\.tar\.gz|\.zip|\.tar\.bz2|\.tgz|\.tar)(?=[#?\s]|$)",
                           re.MULTILINE)


def _skipped_release_fits(spec: str, debug: proc.ProcResult) -> bool:
    """A file pip skipped (`Skipping link: REASON: URL`, at -vv: a source distribution under --only-binary, a wheel
    for another platform or Python) is of a release that satisfies `spec`. True when `spec` cannot be read: the
    caller then keeps the cautious message."""
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return True
    want = canonicalize_name(req.name)
    for m in _SKIPPED_FILE.finditer((debug.stderr or "") + "\n" + (debug.stdout or "")):
        stem = m.group(1)
        parts = stem.split("-")
        for cut in range(1, len(parts)):  # an sdist's name may hold '-': try each split, name first
            if canonicalize_name("-".join(parts[:cut])) == want:
                if req.specifier.contains(parts[cut], prereleases=True):
                    return True
                break
    return False


def _nearest(spec: str, listed: list[str]) -> str:
    """"versions found: N; nearest A, B; newest C" from pip's `(from versions: ...)`, the nearest being those
    either side of the version a `==` or `~=` names."""
    versions = sorted({p for p in (parse_version(v) for v in listed) if p is not None})
    if not versions:
        return f"versions pip found: {clip(', '.join(listed), 200)}"
    text = f"pip found {len(versions)} version{'s' if len(versions) != 1 else ''}"
    try:
        named = [parse_version(s.version) for s in Requirement(spec).specifier if s.operator in ("==", "~=", "===")]
    except InvalidRequirement:
        named = []
    asked = named[0] if named else None
    if asked is not None:
        below = [v for v in versions if v < asked][-1:]
        above = [v for v in versions if v > asked][:1]
        text += f", nearest {', '.join(str(v) for v in below + above)}"
    return f"{text}, newest {versions[-1]}"
