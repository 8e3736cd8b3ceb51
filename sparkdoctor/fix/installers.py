"""The target's installer: the target's own pip, run by its interpreter without site through the Target protocol; for a
venv without pip (a uv venv, `python -m venv --without-pip`), sparkdoctor's own pip, run the same way by the target's
interpreter.

Every plan starts from a dry-run resolution (`pip install --dry-run --report`), so what the plan shows is what the
real call will do. No pip call runs the target's code, the install and uninstall included: pip runs in the target's
interpreter without site (targets/target_pip_dry.py: the import path rebuilt from files, no process started). A venv
without pip is never driven by `uv pip --python PY`: uv starts PY with site to ask about it, so the target's `.pth`
import lines and sitecustomize.py ran on every install and uninstall. Every call has a timeout and is killed with its
children (sparkdoctor.proc); a failure is a FixError with the installer's last line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)

from sparkdoctor import proc
from sparkdoctor.errors import seconds_from_env
from sparkdoctor.fix import pip_settings
from sparkdoctor.fix.interface import (
    FixError,
    Installer,
    Resolution,
    ResolutionError,
    UnchangedError,
)
from sparkdoctor.fix.inventory import Inventory
from sparkdoctor.fix.pip_settings import keep_argument
from sparkdoctor.inputs import json_answer
from sparkdoctor.targets.early import (
    OLD_PIP,
    PIP_NO_SITE,
    own_pip_folder,
    own_pip_misfit,
)
from sparkdoctor.targets.files import FileError, transport_of
from sparkdoctor.targets.local import Target
from sparkdoctor.unreachable import index_unreachable

TIMEOUT = 1800.0  # seconds one pip call of fix may run ($SPARKDOCTOR_FIX_INSTALL_TIMEOUT)


def install_timeout(given: float | None = None) -> float:
    """`fix --timeout` (given), else $SPARKDOCTOR_FIX_INSTALL_TIMEOUT, else TIMEOUT: read when a pip call needs it (a bad
    value of the variable is one line naming it, and stops only what would run pip)."""
    return given if given is not None else seconds_from_env("SPARKDOCTOR_FIX_INSTALL_TIMEOUT", TIMEOUT)


def _fail(what: str, result: proc.ProcResult, dry_run: bool = False, sources: str | None = None) -> FixError:
    """sources: the package sources fix's pip ran without (pip_settings.sources_set_aside), said when a package was not
    found: the one place the user learns why a package their pip finds is missing."""
    text = result.stderr or result.stdout
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR", "error"))]
    last = (errors or lines or [result.describe_failure()])[-1]
    if last == "ERROR: Exception:" and lines[-1] != last:  # pip crashed: its traceback's last line says on what
        last = f"pip stopped on an error of its own: {lines[-1]}"
    if result.returncode is None or result.signal:
        last = result.describe_failure()
    conflict = resolution_conflict(f"{result.stderr}\n{result.stdout}")  # pip writes the causes to stdout
    missing = re.search(r"from versions:|no matching distribution|no usable wheels|no wheels", text, re.I)
    hint = f" ({NO_WHEEL})" if missing else ""
    after = f"; {sources}" if missing and sources else ""
    if conflict:
        return ResolutionError(f"{what} failed: the requirements conflict: {conflict}{hint}" + ("; nothing was changed" if dry_run else "") + after)
    if dry_run and index_unreachable(text):
        return UnchangedError(f"{what} failed: the package index cannot be reached ({last[:200]}); nothing was changed")
    last = f"{last[:300]}{hint}"
    if dry_run:  # a dry run changes nothing, whatever made it fail
        return UnchangedError(f"{what} failed: {last[:600]}; nothing was changed{after}")
    return FixError(f"{what} failed: {last[:600]}{after}")


_PIP_CAUSE = re.compile(r"^\s*(The user requested(?: \(constraint\))? .+|\S+ \S+ depends on .+)$")


def resolution_conflict(text: str) -> str | None:
    """The requirements that conflict, in one line, from pip's ResolutionImpossible report ("The
    conflict is caused by:" and its lines); None when the text is not a resolution failure."""
    lines = text.splitlines()
    if "ResolutionImpossible" in text or "conflict is caused by" in text:
        causes: list[str] = []
        for i, ln in enumerate(lines):
            if "conflict is caused by" in ln:
                for nxt in lines[i + 1:]:
                    m = _PIP_CAUSE.match(nxt)
                    if not m:
                        if causes:
                            break
                        continue
                    causes.append(m.group(1).strip())
        if not causes:
            cannot = next((ln.strip() for ln in lines if "Cannot install" in ln or "conflicting dependencies" in ln), None)
            return (cannot or "pip found no versions that satisfy every requirement")[:400]
        return "; ".join(dict.fromkeys(causes))[:400]
    return None


# Wheels only, in the plan's dry run and in the install: pip builds a release that has only a source distribution
# to read its metadata, running its setup.py or build backend, even in a dry run (a plan changes nothing and runs nothing).
WHEELS_ONLY = ["--only-binary", ":all:"]
NO_WHEEL = "fix installs wheels only: a release with only a source distribution would be built, running its code"


# Every fix pip call runs with these, and with only the user's pip settings that reach the index (pip_settings.KEEP;
# targets/target_pip_dry.py drops every other PIP_* variable and loads no pip config file).
NEUTRAL_ENV = {
    "_PIP_RUNNING_IN_SUBPROCESS": "1",  # PIP_PYTHON (pip --python) ran pip again under another interpreter: refused there
    "PYTHONWARNINGS": "",  # `error` stopped pip on a DeprecationWarning of its own (an empty value is no value)
}


def _env(env: dict[str, str] | None) -> dict[str, str]:
    return {**NEUTRAL_ENV, **(env or {})}


def _constraint_args(constraints: list[str] | None) -> list[str]:
    return [a for c in constraints or [] for a in ("-c", c)]


class PipInstaller(Installer):
    """pip in the target. Its files (constraints, the dry run's report, downloaded wheels, the
    journal's wheels for an offline reinstall) go through a scratch folder IN the target, moved by
    the target's file transport: pip in a container sees the container's files, not this machine's."""

    name = "pip"

    def __init__(self, target: Target, inventory: Inventory, pip_from: str | None = None, timeout: float | None = None):
        """pip_from: the folder of the `pip` package to run without site for every call (sparkdoctor's own, for a venv
        without pip)."""
        self.target, self.inventory, self.pip_from = target, inventory, pip_from
        self.timeout = timeout  # seconds one pip call may run: `fix --timeout`; None: install_timeout()'s default
        self.files = transport_of(target)
        self.settings: dict[tuple[str, str], str] | None = None

    def _stage(self, tmp: str, constraints: list[str] | None) -> list[str]:
        """The host constraint files, copied into the target's scratch folder; their paths there."""
        items: list[tuple[Path, str, int | None]] = [(Path(c), f"{tmp}/constraints-{i}.txt", None)
                                                     for i, c in enumerate(constraints or [])]
        self.files.import_files(items)
        return [path for _src, path, _mode in items]

    def _pip(self, args: list[str], what: str, env: dict[str, str] | None = None, dry_run: bool = False) -> proc.ProcResult:
        base = ["--disable-pip-version-check", "--no-input"]
        # every call runs pip without site, the install and uninstall too: no .pth import line or sitecustomize.py of the
        # target runs, and no process starts (wheels only, byte-compiled in pip's own process)
        pip_from = ["--pip-from", self.pip_from] if self.pip_from else []
        # the plan's first dry run also prints the user's settings it read: the plan's note costs no pip start of its own
        show = ["--print-settings"] if dry_run and self.settings is None and pip_settings.kept_only(env) else []
        result = self.target.run_script(Path(PIP_NO_SITE), [*keep_argument(), *show, *pip_from, args[0], *base, *args[1:]],
                                        install_timeout(self.timeout), env=_env(env))
        seen = None
        if show:  # printed before pip ran, whatever pip did next; pip's own output is read as before
            seen, result.stdout = pip_settings.shown(result.stdout or "")
        too_old = not pip_from and not result.ok and dry_run and any(old in (result.stderr or "") for old in OLD_PIP)
        if too_old and (misfit := own_pip_misfit(self.inventory.version)):
            raise UnchangedError(f"{what} failed: {self.inventory.python}'s pip is older than 22.2 (no --dry-run --report), "
                                 f"and {misfit}: upgrade the target's pip; nothing was changed")
        if too_old and getattr(self.target, "shares_files", True) and (own := own_pip_folder()):
            # a pip older than 22.2 has no --dry-run --report: sparkdoctor's pip resolves, run by the target's
            # interpreter without site, as whatif does; the install itself stays the target's own pip
            result = self.target.run_script(Path(PIP_NO_SITE), [*keep_argument(), "--pip-from", own, args[0], *base, *args[1:]],
                                            install_timeout(self.timeout), env=_env(env))
        if seen is not None:
            self.settings = seen
        if not result.ok:
            raise _fail(what, result, dry_run, self._sources())
        return result

    def _sources(self) -> str | None:
        """The package sources set aside, for a failure's line (None when they cannot be read: the failure stands)."""
        try:
            self.set_aside()
        except FixError:
            return None
        return pip_settings.sources_set_aside(self.settings or {})

    def set_aside(self) -> list[str]:
        """The user's pip settings (the target's environment and pip config files) that fix's pip runs without, as
        the plan's note: read once, as pip merges them for the user (by the plan's first dry run, else here)."""
        if self.settings is None:
            pip_from = ["--pip-from", self.pip_from] if self.pip_from else []
            result = self.target.run_script(Path(PIP_NO_SITE), [*pip_from, "--list-settings"], install_timeout(self.timeout), env=_env(None))
            if not result.ok:
                raise _fail("reading pip's settings", result, dry_run=True)
            self.settings = pip_settings.parse(result.stdout or "")
        found = pip_settings.note(self.settings)
        return [found] if found else []

    def _offline(self, offline_from: str, tmp: str) -> tuple[list[str], dict[str, str]]:
        """The journal's wheels (on this machine), copied into the target: pip's args and env to use them alone."""
        wheels = sorted(Path(offline_from).glob("*.whl"))
        self.files.import_files([(w, f"{tmp}/wheels/{w.name}", None) for w in wheels])
        return (["--no-index", "--find-links", f"{tmp}/wheels"],
                {"PIP_NO_INDEX": "1", "PIP_CONSTRAINT": "", "PIP_FIND_LINKS": f"{tmp}/wheels"})

    def describe(self) -> str:
        return f"{self.inventory.python} -m pip" + (f" (sparkdoctor's pip from {self.pip_from}: the target has none)" if self.pip_from else "")

    def dry_run(self, requirements: list[str], *, no_deps: bool = False, ignore_installed: bool = False,
                constraints: list[str] | None = None, env: dict[str, str] | None = None,
                offline_from: str | None = None) -> Resolution:
        try:
            with self.files.scratch() as tmp:
                report = f"{tmp}/report.json"
                args = ["install", "--dry-run", "--quiet", *WHEELS_ONLY, "--report", report, *_constraint_args(self._stage(tmp, constraints))]
                args += (["--no-deps"] if no_deps else []) + (["--ignore-installed"] if ignore_installed else [])
                if offline_from:
                    extra, env = self._offline(offline_from, tmp)
                    args += extra
                self._pip([*args, "--", *requirements], f"pip dry run of {' '.join(requirements)}", env, dry_run=True)
                try:
                    data = json_answer(self.files.read(report))
                except (FileError, ValueError) as exc:
                    raise FixError(f"pip dry run wrote no readable report: {exc}") from None
        except FileError as exc:
            raise FixError(str(exc)) from None
        res = Resolution()
        for item in data.get("install") or []:  # type: ignore[attr-defined]
            meta = item.get("metadata") or {}
            res.installs[canonicalize_name(meta.get("name", "?"))] = str(meta.get("version", "?"))
        return res

    def install(self, requirements: list[str], *, force_reinstall: bool = False, no_deps: bool = False,
                offline_from: str | None = None, constraints: list[str] | None = None) -> None:
        try:
            with self.files.scratch() as tmp:
                args = ["install", "--quiet", *WHEELS_ONLY, *_constraint_args(self._stage(tmp, constraints))]
                args += (["--force-reinstall"] if force_reinstall else []) + (["--no-deps"] if no_deps else [])
                env = None
                if offline_from:  # the journal's wheels (on this machine), copied into the target first
                    extra, env = self._offline(offline_from, tmp)
                    args += [*extra, "--no-compile"]
                self._pip([*args, "--", *requirements], f"pip install {' '.join(requirements)}", env)
        except FileError as exc:
            raise FixError(str(exc)) from None

    def uninstall(self, names: list[str]) -> None:
        if names:
            self._pip(["uninstall", "--yes", "--", *names], f"pip uninstall {' '.join(names)}")

    def download(self, requirements: list[str], dest: str) -> dict[str, str | None]:
        """pip download runs WHERE THE TARGET RUNS (a container's platform, Python and glibc pick the
        wheels); the wheels then come out to dest on this machine, where the journal keeps them."""
        try:
            with self.files.scratch() as tmp:
                # without site, as the comment in _pip says: fetching wheels needs no package's .pth line
                pip_from = [*keep_argument(), *(["--pip-from", self.pip_from] if self.pip_from else [])]
                _fetch(requirements, tmp, lambda args: self.target.run_script(Path(PIP_NO_SITE), [*pip_from, *args], install_timeout(self.timeout), env=_env(None)))
                names = [n for n in self.files.listdir(tmp) if n.endswith(".whl")]
                got = self.files.export([f"{tmp}/{n}" for n in names], Path(dest))
                for path, row in got.items():
                    os.replace(Path(dest) / row["name"], Path(dest) / path.rsplit("/", 1)[-1])
        except FileError as exc:
            raise FixError(str(exc)) from None
        return _match(requirements, dest)


def _fetch(requirements: list[str], dest: str, run: Callable[[list[str]], proc.ProcResult]) -> None:
    """The wheels of `requirements` saved into dest, in one pip call (one start-up), before any
    change; one by one when the call fails, to keep those that can be had."""
    def fetch(reqs: list[str]) -> bool:
        return run(["download", "--disable-pip-version-check", "--quiet", "--no-deps", "--only-binary=:all:", "-d", dest, "--", *reqs]).ok

    if requirements and not fetch(requirements) and len(requirements) > 1:
        for req in requirements:
            fetch([req])


def _match(requirements: list[str], dest: str) -> dict[str, str | None]:
    """name -> the wheel file in dest for each requirement; None for one that could not be had."""
    found: dict[str, str] = {}
    for fname in sorted(os.listdir(dest)):
        try:
            name, version, _b, _t = parse_wheel_filename(fname)
        except InvalidWheelFilename:
            continue
        found[f"{canonicalize_name(name)}=={version}"] = fname
    out: dict[str, str | None] = {}
    for req in requirements:
        r = Requirement(req)
        pinned = next(iter(r.specifier)).version
        out[canonicalize_name(r.name)] = found.get(f"{canonicalize_name(r.name)}=={pinned}")
    return out


def for_target(target: Target, inventory: Inventory, timeout: float | None = None) -> Installer:
    """The target's own pip; sparkdoctor's own pip for a local venv without pip (a uv venv). In a container, always the
    container's own pip: sparkdoctor's pip is not in the container's files. timeout: `fix --timeout` (one pip call)."""
    if getattr(target, "kind", "python") == "container":
        if not inventory.has_pip:
            raise FixError(f"{inventory.python} in container {getattr(target, 'name', '?')} has no pip, and sparkdoctor's own "
                           "pip is not in the container's files: install pip in that environment (or fix the image)")
    elif not inventory.has_pip:
        # nothing was changed: exit 6, as for an index that cannot be reached, never 5 (a failed apply)
        if inventory.externally_managed:  # Debian and Ubuntu disable ensurepip for it, and pip would refuse anyway
            raise UnchangedError(f"{inventory.python} has no pip and is marked EXTERNALLY-MANAGED by the OS (PEP 668): fix a "
                                 "venv instead (python3 -m venv --system-site-packages)")
        own = own_pip_folder()
        if own is None:
            raise UnchangedError(f"{inventory.python} has no pip, and sparkdoctor's own pip, which installs there without "
                                 f"running the target's code, cannot be found: reinstall sparkdoctor with pip, or add pip with "
                                 f"`{inventory.python} -m ensurepip`")
        if misfit := own_pip_misfit(inventory.version):
            raise UnchangedError(f"{inventory.python} has no pip, and {misfit}: add pip to the target with "
                                 f"`{inventory.python} -m ensurepip`")
        return PipInstaller(target, inventory, pip_from=own, timeout=timeout)
    return PipInstaller(target, inventory, timeout=timeout)
