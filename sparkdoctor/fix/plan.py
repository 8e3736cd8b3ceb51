"""From check's findings to a Plan: which fixes the findings name, what each action becomes on THIS
target (a file's new text, an installer call), the dry-run resolution, and the refusals (one line each, with the
flag that says yes where there is one; docs/fix.md lists them)."""

from __future__ import annotations

import os
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from sparkdoctor.facts import Facts
from sparkdoctor.fix import edits
from sparkdoctor.fix.definitions import ActionSpec, FixDefinition
from sparkdoctor.fix.interface import (
    ActionKind,
    FixError,
    Installer,
    Resolution,
    ResolutionError,
    StepKind,
)
from sparkdoctor.fix.inventory import Inventory
from sparkdoctor.fix.model import Plan, Step
from sparkdoctor.fix.siblings import pinned_siblings
from sparkdoctor.targets.files import FileError, FileTransport, LocalFiles

if TYPE_CHECKING:
    from sparkdoctor.findings import Finding


@dataclass
class FixOptions:
    env_file: Path | None = None
    recipe: Path | None = None
    system: bool = False
    allow_replace: set[str] = field(default_factory=set)
    allow_downgrade: set[str] = field(default_factory=set)
    timeout: float | None = None  # seconds one pip call may run (`fix --timeout`; None: installers.install_timeout())


def wanted_fixes(findings: list[Finding], definitions: dict[str, FixDefinition]) -> list[tuple[FixDefinition, list[str]]]:
    """Each fix the findings name, once, with the finding ids that ask for it (report order)."""
    out: dict[str, list[str]] = {}
    for f in findings:
        if f.fix:
            if f.fix not in definitions:
                raise FixError(f"finding {f.id} names fix {f.fix!r}, which is not in the fixes folder")
            out.setdefault(f.fix, []).append(f.id)
    return [(definitions[k], v) for k, v in out.items()]


@dataclass
class Family:
    """A reinstall_family action's packages, gathered over every fix that asks for them: one step for them all."""

    requirement: str
    specs: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    last: str | None = None


class Planner:
    def __init__(self, inventory: Inventory, installer: Installer, facts: Facts, options: FixOptions,
                 files: FileTransport | None = None):
        self.inv, self.installer, self.facts, self.opts = inventory, installer, facts, options
        # a pin file check found is the target's; the env file and recipe named here are this machine's
        self.sides: dict[str, FileTransport] = {"target": files or LocalFiles(), "host": LocalFiles()}
        self.local = isinstance(self.sides["target"], LocalFiles)
        self.side_of: dict[str, str] = {}
        self.plan = Plan(target={"python": inventory.python, "is_venv": inventory.is_venv}, installer=installer.describe())
        self.texts: dict[str, str] = {}  # path -> text as edited so far
        self.originals: dict[str, str] = {}
        self.families: dict[tuple[str, ...], Family] = {}
        self.restores: dict[str, str] = {}
        self.restore_last: set[str] = set()
        self.exact_installs: list[str] = []
        self.uninstalls: list[str] = []
        self.why: dict[str, tuple[str, list[str], ActionKind]] = {}

    # ---- files --------------------------------------------------------------------------------
    def _text(self, path: Path, side: str = "host") -> str:
        key = str(path)
        if key not in self.texts:
            try:
                self.texts[key] = self.originals[key] = self.sides[side].read(key).decode("utf-8")
            except (FileError, UnicodeDecodeError) as exc:
                raise FixError(f"{path}: cannot read: {exc}") from None
            self.side_of[key] = side
        return self.texts[key]

    def _edit(self, path: Path, new: str, fix: str, why: list[str], kind: ActionKind) -> None:
        self.texts[str(path)] = new
        self.why[str(path)] = (fix, why, kind)

    # ---- actions ------------------------------------------------------------------------------
    def add(self, fix: FixDefinition, why: list[str]) -> None:
        self.plan.fixes.append({"id": fix.id, "title": fix.title, "findings": why})
        self.plan.checks_after += [w for w in why if w not in self.plan.checks_after]
        planners = {ActionKind.pin: self._pin, ActionKind.unset_env: self._unset_env, ActionKind.set_env: self._set_env,
                    ActionKind.add_flag: self._add_flag, ActionKind.drop_flag: self._drop_flag,
                    ActionKind.install: self._install, ActionKind.uninstall: self._uninstall,
                    ActionKind.reinstall_family: self._reinstall_family, ActionKind.restore_files: self._restore_files}
        for action in fix.actions:
            planners[action.kind](action, fix.id, why)

    def _pin(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        package = canonicalize_name(a.fields["package"])
        files = list(dict.fromkeys(Path(c["file"]) for c in self.facts.constraints or []
                                   if canonicalize_name(c.get("name", "")) == package and c.get("file")))
        if not files:
            self.plan.notes.append(f"{fix}: no constraints or requirements file that check read pins {a.fields['package']}; nothing to edit")
        for path in files:
            spec = None if a.fields.get("remove") else a.fields["specifier"]
            text = edits.edit_pin(self._text(path, "target"), package, spec, str(path))
            moved, refused = pinned_siblings(self.inv, self.facts.constraints or [], package, path)
            if refused:
                self.plan.refusals.append(f"{fix}: {refused}")
            for sibling in moved:
                text = edits.edit_pin(text, sibling, spec, str(path))
                self.plan.notes.append(f"{fix}: {path} pins {sibling} with {package} (one family, one version): its pin moves too")
            self._edit(path, text, fix, why, a.kind)

    def _env_file(self, fix: str, names: list[str]) -> Path | None:
        if self.opts.env_file is None:
            self.plan.notes.append(f"{fix}: {', '.join(names)} is set in the environment sparkdoctor runs in: remove it where it is set, or name the env file with --env-file FILE")
        return self.opts.env_file

    def _unset_env(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        path = self._env_file(fix, a.fields["names"])
        if path is not None:
            self._edit(path, edits.unset_env(self._text(path), a.fields["names"]), fix, why, a.kind)

    def _set_env(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        path = self._env_file(fix, [a.fields["name"]])
        if path is not None:
            self._edit(path, edits.set_env(self._text(path), a.fields["name"], a.fields["value"]), fix, why, a.kind)

    def _recipe(self, fix: str) -> Path | None:
        if self.opts.recipe is None:
            self.plan.notes.append(f"{fix}: changes a serving recipe: name it with --recipe FILE")
        return self.opts.recipe

    def _add_flag(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        path = self._recipe(fix)
        if path is not None:
            self._edit(path, edits.add_flag(self._text(path), a.fields["flag"], a.fields.get("value"), str(path)), fix, why, a.kind)

    def _drop_flag(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        path = self._recipe(fix)
        if path is not None:
            self._edit(path, edits.drop_flag(self._text(path), a.fields["flag"], str(path)), fix, why, a.kind)

    def _install(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        self.exact_installs += [r for r in a.fields["requirements"] if r not in self.exact_installs]
        self.why.setdefault("install", (fix, why, a.kind))

    def _uninstall(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        self.uninstalls += [n for n in a.fields["packages"] if self.inv.get(n) and n not in self.uninstalls]
        self.why.setdefault("uninstall", (fix, why, a.kind))

    def _reinstall_family(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        key = tuple(sorted(a.fields["packages"]))
        fam = self.families.setdefault(key, Family(a.fields["requirement"]))
        fam.last = fam.last or a.fields.get("last")
        if a.fields["version"] != "installed" and a.fields["version"] not in fam.specs:
            fam.specs.append(a.fields["version"])
        fam.fixes.append(fix)
        fam.why += why

    def _restore_files(self, a: ActionSpec, fix: str, why: list[str]) -> None:
        if a.fields.get("last"):
            self.restore_last.add(a.fields["last"])
        for name in a.fields["packages"]:
            dist = self.inv.get(name)
            if dist is None:
                continue
            if dist.mismatched is None:
                raise FixError(f"internal: {name} was not hashed")
            if not dist.files:  # no RECORD (a repackaged or hand-copied dist): no file can be told edited
                self.plan.notes.append(f"{fix}: {dist.name} {dist.version} has no RECORD, so which files were edited cannot be told and none is restored; write it again with pip install --ignore-installed --no-deps {shlex.quote(f'{dist.name}=={dist.version}')} (--force-reinstall stops on the missing RECORD)")
            if not dist.mismatched:
                continue
            if not dist.from_registry():
                self.plan.refusals.append(f"{dist.name} {dist.version} was installed from {dist.source()}: its files cannot be restored from the registry; reinstall it from that source (rebuild the image, re-run the build, git checkout the edit)")
                continue
            self.restores[dist.key] = dist.version
            self.why.setdefault("restore:" + dist.key, (fix, why, a.kind))
            shown = ", ".join(f"{m['path']} ({m['problem']})" for m in dist.mismatched[:5])
            self.plan.notes.append(f"{dist.name} {dist.version}: {len(dist.mismatched)} file(s) differ from RECORD: {shown}")

    # ---- packages -----------------------------------------------------------------------------
    def _dependents(self, family: set[str]) -> list[str]:
        """What the installed dists outside the family require of it, as constraint lines."""
        lines: dict[str, None] = {}  # in order, once each
        for dist in self.inv.dists.values():
            if dist.key in family:
                continue
            for text in dist.requires:
                try:
                    req = Requirement(text)
                    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                        continue
                except Exception:  # noqa: BLE001 (an invalid requirement; markers raise odd things)
                    continue
                if canonicalize_name(req.name) in family and req.specifier:
                    lines[f"{canonicalize_name(req.name)}{req.specifier}"] = None
        return list(lines)

    def _family_step(self, key: tuple[str, ...], fam: Family, env: dict[str, str] | None) -> None:
        family = set(key)
        base = fam.requirement
        req_name = canonicalize_name(Requirement(base).name)
        have = self.inv.get(req_name)
        if fam.specs:
            spec = ",".join(fam.specs)
        elif have is not None:
            spec = f"=={have.version}"
        else:
            raise FixError(f"{fam.fixes[0]}: {req_name} is not installed, so there is no installed version to reinstall")
        requirement = f"{base}{spec}"
        # and pins that keep every registry dist outside the family where it is (resolution must not move them)
        constraints = self._dependents(family) + [f"{d.key}=={d.version}" for d in self.inv.dists.values()
                                                  if d.key not in family and d.from_registry()]
        res = self._dry_run([requirement], constraints, env, ignore_installed=True)
        installed_family = sorted(n for n in family if self.inv.get(n))
        fix, why = fam.fixes[0], fam.why
        self.plan.steps.append(Step(StepKind.uninstall, fix, why, ActionKind.reinstall_family, names=installed_family))
        self.plan.steps.append(Step(StepKind.install, fix, why, ActionKind.reinstall_family, requirements=[requirement], constraints=constraints))
        last = fam.last
        if last and last in res.installs:  # its files must win where the family's wheels share paths
            self.plan.steps.append(Step(StepKind.restore, fix, why, ActionKind.reinstall_family, requirements=[f"{last}=={res.installs[last]}"]))
        changed = set(installed_family)
        for name in installed_family:
            installed = self.inv.get(name)  # the family's installed members: found by construction
            self.plan.changes[name] = [installed.version if installed else None, res.installs.get(name)]
        for name, version in res.installs.items():
            before = self.inv.get(name)
            if name in family or before is None or before.version != version:
                self.plan.changes[name] = [before.version if before else None, version]
                changed.add(name)
        self.plan.touched += sorted(changed)

    def _dry_run(self, requirements: list[str], constraints: list[str], env: dict[str, str] | None,
                 ignore_installed: bool = False) -> Resolution:
        with tempfile.TemporaryDirectory(prefix="sparkdoctor-plan-") as tmp:
            cfile = os.path.join(tmp, "constraints.txt")
            with open(cfile, "w", encoding="utf-8") as fh:
                fh.write("".join(c + "\n" for c in constraints))
            return self.installer.dry_run(requirements, constraints=[cfile], env=env, ignore_installed=ignore_installed)

    def _constraint_env(self, tmp: str) -> dict[str, str] | None:
        """PIP_CONSTRAINT with the files this plan edits replaced by their edited text (copies in the
        target's scratch folder `tmp`): the dry run must resolve against the pins as they will be. A
        container's PIP_CONSTRAINT is its own (as check read it), not this process's."""
        edited = {p: t for p, t in self.texts.items() if self.originals.get(p) != t and self.side_of.get(p) == "target"}
        current = os.environ.get("PIP_CONSTRAINT", "") if self.local else str((getattr(self.facts, "env", None) or {}).get("PIP_CONSTRAINT") or "")
        if not edited or not current:
            return None
        same = (lambda a, b: os.path.realpath(a) == os.path.realpath(b)) if self.local else (lambda a, b: a == b)
        parts = []
        for i, part in enumerate(current.split()):
            match = next((p for p in edited if same(p, part)), None)
            if match is not None:
                part = f"{tmp}/edited-{i}.txt"
                self.sides["target"].write(part, edited[match].encode("utf-8"))
            parts.append(part)
        return {"PIP_CONSTRAINT": " ".join(parts)}

    # ---- the whole plan -----------------------------------------------------------------------
    def finish(self) -> Plan:
        plan = self.plan
        for path, new in self.texts.items():
            old = self.originals[path]
            if new == old:
                continue
            fix, why, kind = self.why[path]
            side = self.side_of.get(path, "host")
            row = self.sides[side].info([path], with_hash=True).get(path) or {}
            plan.steps.append(Step(StepKind.edit, fix, why, kind, path=path, old_sha256=row.get("sha256"), new_text=new,
                                   diff=edits.line_diff(old, new), side=side))
            where = "" if side == "host" or self.local else f" in {self.sides[side].where}"
            if row.get("read_only_fs"):
                plan.refusals.append(f"{path}{where} is not writable: it is on a read-only file system (mount it read-write, or change the image)")
            elif not row.get("writable"):
                plan.refusals.append(f"{path}{where} is not writable by this user (run as its owner)")
        with self.sides["target"].scratch() as tmp:  # where the target's pip can read the edited pins
            env = self._constraint_env(tmp)
            try:
                for key, fam in self.families.items():
                    self._family_step(key, fam, env)
            except ResolutionError as exc:
                if not plan.refusals:
                    raise
                plan.notes.append(f"no resolution while the refusal below stands: {exc}")
            if self.exact_installs:
                fix, why, kind = self.why["install"]
                res = self._dry_run(self.exact_installs, [], env)
                plan.steps.append(Step(StepKind.install, fix, why, kind, requirements=list(self.exact_installs)))
                for name, version in res.installs.items():
                    before = self.inv.get(name)
                    plan.changes[name] = [before.version if before else None, version]
                plan.touched += sorted(res.installs)
        if self.uninstalls:
            fix, why, kind = self.why["uninstall"]
            plan.steps.append(Step(StepKind.uninstall, fix, why, kind, names=list(self.uninstalls)))
            for name in self.uninstalls:
                installed = self.inv.get(name)  # uninstalls are installed dists by construction
                plan.changes[name] = [installed.version if installed else None, None]
            plan.touched += self.uninstalls
        for name in sorted(self.restores):
            if any(name in key for key in self.families):  # a clean reinstall writes all its files fresh
                del self.restores[name]
                plan.notes.append(f"{name}: its edited files are replaced by the clean reinstall above")
        if self.restores:
            first = [n for n in sorted(self.restores) if n not in self.restore_last]
            last = [n for n in sorted(self.restores) if n in self.restore_last]
            for group in (first, last):  # `last`: its files win the paths it shares with the others
                if group:
                    fix, why, kind = self.why["restore:" + group[0]]
                    plan.steps.append(Step(StepKind.restore, fix, why, kind, requirements=[f"{n}=={self.restores[n]}" for n in group]))
            for name, version in self.restores.items():
                plan.changes[name] = [version, version]
            plan.touched += sorted(self.restores)
        plan.touched = sorted(set(plan.touched))
        self._refuse()
        return plan

    def _refuse(self) -> None:
        plan = self.plan
        if not any(s.op.changes_packages for s in plan.steps):
            return
        if self.inv.externally_managed:
            plan.refusals.append(f"{self.inv.python} is marked EXTERNALLY-MANAGED by the OS (PEP 668): pip refuses to change "
                                 "it; fix a venv (python3 -m venv --system-site-packages) instead (to allow it: --system "
                                 "with PIP_BREAK_SYSTEM_PACKAGES=1)")
        elif not self.inv.is_venv and not self.opts.system:
            plan.refusals.append(f"{self.inv.python} is a system interpreter, not a venv: changing its packages can break the OS's own tools (to allow it: --system)")
        where = "" if self.local else f" in {self.sides['target'].where}"
        if self.inv.read_only:
            plan.refusals.append(f"{self.inv.purelib}{where} is not writable: it is on a read-only file system ({read_only_remedy(self.local)})")
        elif not self.inv.writable:
            plan.refusals.append(f"{self.inv.purelib}{where} is not writable by this user (run as the owner of the environment)")
        pinned = {canonicalize_name(c.get("name", "")) for c in self.facts.constraints or []}
        for name, (before, after) in sorted(plan.changes.items()):
            dist = self.inv.get(name)
            if dist is not None and (why := dist.not_restorable(self.inv.purelib)):
                plan.refusals.append(why)
            elif dist is not None and not dist.from_registry() and name not in self.opts.allow_replace:
                plan.refusals.append(f"{dist.name} {dist.version} came from {dist.source()}, not the registry: replacing it with a registry wheel changes the build (to allow it: --allow-replace {name})")
            if before and after and name in pinned and name not in self.opts.allow_downgrade and _lower(after, before):
                plan.refusals.append(f"{name} is pinned in a constraints/requirements file and the plan downgrades it {before} -> {after} (to allow it: --allow-downgrade {name})")


def read_only_remedy(local: bool) -> str:
    """What a user can do about an environment on a read-only file system: a container's comes from its mount or image;
    a local venv's file system is remounted, or another venv is used."""
    if not local:
        return "mount the environment read-write, or fix the image it comes from and recreate the container"
    return "remount that file system read-write, or make a venv you own on a writable disk and fix that one (--python)"


def _lower(after: str, before: str) -> bool:
    try:
        return Version(after) < Version(before)
    except InvalidVersion:
        return False


def build_plan(findings: list[Finding], definitions: dict[str, FixDefinition], inventory: Inventory, installer: Installer,
               facts: Facts, options: FixOptions, files: FileTransport | None = None) -> Plan:
    planner = Planner(inventory, installer, facts, options, files)
    for fix, why in wanted_fixes(findings, definitions):
        planner.add(fix, why)
    try:
        plan = planner.finish()
    except FileError as exc:
        raise FixError(str(exc)) from None
    plan.probes_after = sorted({str(f.verified_by["probe"]) for f in findings if f.fix and f.verified_by and f.verified_by.get("probe")})
    written = {canonicalize_name(name) for name in plan.changes}  # a dist written anew has all its files again
    plan.checks_after += [f.id for f in findings if f.id == f"files-missing-{f.component}" and f.component in written]
    return plan


def hash_names(findings: list[Finding], definitions: dict[str, FixDefinition]) -> list[str]:
    """The dists whose files a restore-files action must hash before it can plan."""
    names: list[str] = []
    for fix, _ in wanted_fixes(findings, definitions):
        for a in fix.actions:
            if a.kind is ActionKind.restore_files:
                names += [n for n in a.fields["packages"] if n not in names]
    return names


__all__ = ["FixOptions", "build_plan", "hash_names", "wanted_fixes"]
