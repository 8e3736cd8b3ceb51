"""The plan's steps as Action objects (StepAction: verify / execute / reverse), and the
transaction that runs them, as conda's link.py does: every action's verify() runs before the first
change and returns its problems; then execute() in order; on any failure or interrupt, reverse() of
the executed ones (and the one that was executing) in reverse order, each reverse's error collected,
each reverse recorded in the journal.

A package action's reverse is the Restorer's package restore (from the journal's wheels, else its
byte copies): it runs once, for the last package action executed; the earlier ones find it done.
An edit's reverse puts back the journal's copy of its file.
"""

from __future__ import annotations

import dataclasses
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from sparkdoctor.fix import inventory as inv_mod
from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import (
    FixError,
    Installer,
    StepKind,
    failure_text,
)
from sparkdoctor.fix.inventory import Inventory
from sparkdoctor.fix.model import Plan, Step
from sparkdoctor.fix.restore import Restorer
from sparkdoctor.targets.files import FileError, FileTransport, LinkRefused


@dataclass
class Context:
    """What every action of one apply (or rollback) shares."""

    journal: jr.Journal
    installer: Installer
    inventory: Inventory
    sides: dict[str, FileTransport]
    restorer: Restorer


class StepAction(ABC):
    """One planned change, with conda's contract (core/path_actions.py), called in this order:

    verify()  before ANY action executes: returns the problems (never raises), so every problem of
              every action is known before the first change;
    execute() makes the change;
    reverse() only for an action that executed (or was executing) when a later one failed: puts back
              what the journal recorded. Reversal runs in reverse order; its errors are collected.
    describe() is what the plan shows."""

    def __init__(self, step: Step, ctx: Context):
        self.step, self.ctx = step, ctx
        self.op, self.why = step.op, step.why  # why: the finding ids that ask for it

    def describe(self) -> str:
        return f"{self.op} {self.step.path or ' '.join(self.step.names or self.step.requirements)}"

    @abstractmethod
    def verify(self) -> list[str]: ...

    @abstractmethod
    def execute(self) -> None: ...

    @abstractmethod
    def reverse(self) -> None: ...


class EditFile(StepAction):
    @property
    def path(self) -> str:
        assert self.step.path is not None  # Plan.from_dict and journal_schema make sure of it
        return self.step.path

    def verify(self) -> list[str]:
        s, files = self.step, self.ctx.sides[self.step.side]
        try:
            row = files.info([self.path], with_hash=True).get(self.path) or {}
        except FileError as exc:
            return [str(exc)]
        if row.get("sha256") != s.old_sha256:
            return [f"{s.path} changed since the plan was made; run the plan again"]
        if row and row.get("read_only_fs"):
            return [f"{s.path} is on a read-only file system now"]
        if row and not row.get("writable", True):
            return [f"{s.path} is not writable by this user now"]
        return []

    def execute(self) -> None:
        s = self.step
        try:
            self.ctx.sides[s.side].write(self.path, (s.new_text or "").encode("utf-8"))
        except FileError as exc:
            raise FixError(str(exc)) from None

    def reverse(self) -> None:
        self.ctx.restorer.restore_file(self.path, self.step.side)


class PackageAction(StepAction):
    def verify(self) -> list[str]:
        """The undo must be possible before the do: the journal can restore every touched dist."""
        return self.ctx.restorer.prepare()

    def reverse(self) -> None:
        self.ctx.restorer.restore_packages()


class Uninstall(PackageAction):
    def execute(self) -> None:
        self.ctx.installer.uninstall(self.step.names)
        _remove_leftovers(self.ctx, self.step.names)


class Install(PackageAction):
    def execute(self) -> None:
        s = self.step
        cfile = self.ctx.journal.path / f"constraints-{abs(hash(tuple(s.requirements))) % 10**8}.txt"
        jr.write_bytes(cfile, "".join(c + "\n" for c in s.constraints).encode())
        self.ctx.installer.install(s.requirements, constraints=[str(cfile)])


class Restore(PackageAction):
    def execute(self) -> None:
        self.ctx.installer.install(self.step.requirements, force_reinstall=True, no_deps=True)
        _unrequest(self.ctx, [r.split("==")[0] for r in self.step.requirements])


def _unrequest(ctx: Context, names: list[str]) -> None:
    """An installer marks what it is asked for by name as REQUESTED (PEP 376): a dist reinstalled to put
    its files back was not asked for by its user. Where it had no marker before, the marker and its RECORD
    row go again, so the dist's metadata is what it was (as the rollback drops what its reinstall adds)."""
    now = inv_mod.read(ctx.restorer.target)
    files = ctx.sides["target"]
    for name in names:
        dist, before = now.get(name), ctx.journal.data["dist_files"].get(canonicalize_name(name))
        if dist is None or not before:
            continue
        had = {row["path"] for row in before}
        for rel, full in zip(dist.files, dist.paths(), strict=True):
            if not rel.endswith(".dist-info/REQUESTED") or str(full) in had:
                continue
            record = full.with_name("RECORD")
            try:
                text = files.read(str(record)).decode("utf-8")
                rows = [ln for ln in text.splitlines(keepends=True) if not ln.startswith(f"{rel},")]
                files.write(str(record), "".join(rows).encode("utf-8"))
                files.remove([str(full)])
            except (FileError, UnicodeDecodeError) as exc:
                raise FixError(f"{record}: {exc}") from None


ACTIONS: dict[StepKind, type[StepAction]] = {StepKind.edit: EditFile, StepKind.uninstall: Uninstall, StepKind.install: Install,
                                             StepKind.restore: Restore}


def actions_of(plan: Plan, ctx: Context, inject: Callable[[int, Step], Step] | None = None) -> list[StepAction]:
    """One action per step, in plan order (`inject`: the tests' installer faults, by step number)."""
    steps = [inject(i + 1, s) for i, s in enumerate(plan.steps)] if inject else plan.steps
    return [ACTIONS[s.op](s, ctx) for s in steps]


def _remove_leftovers(ctx: Context, names: list[str]) -> None:
    """What the uninstall left on disk of those dists (a file another one overwrote, a folder):
    a clean reinstall starts from nothing. Files another installed dist owns are kept."""
    owned = {str(p) for d in ctx.inventory.dists.values() if d.key not in names for p in d.paths()}
    rows = [r for n in names for r in ctx.journal.data["dist_files"].get(n, [])]
    left = list(dict.fromkeys(r["path"] for r in rows if r["path"] not in owned))
    try:
        ctx.sides["target"].remove(left, prune=True)
    except FileError as exc:
        raise FixError(str(exc)) from None


def verify_all(actions: list[StepAction]) -> list[str]:
    """Every action's problems, before anything changes (each action is asked, whatever the others say)."""
    return [p for a in actions for p in a.verify()]


def reverse_all(executed: list[StepAction], record: Callable[[list[dict]], None]) -> list[dict]:
    """Reverse the executed actions, last first; every reverse runs even when one before it failed (but a write that
    met a link: LinkRefused stops the rollback there).
    `record` gets the list so far after each one (the journal keeps it)."""
    done: list[dict] = []
    for i in range(len(executed) - 1, -1, -1):
        a = executed[i]
        row = {"step": i + 1, "action": a.describe(), "ok": True, "error": None}
        try:
            a.reverse()
        except LinkRefused:
            raise  # a link met at a write: the rollback stops there, nothing written through it (apply._reverse)
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 (collected, the next reverse still runs)
            row.update(ok=False, error=failure_text(exc))
        done.append(row)
        record(done)
    return done


def injected(index: int, s: Step) -> Step:
    """SPARKDOCTOR_FIX_FAULT=bad-version:N asks the installer for a version that does not exist at step
    N; conflict:N adds a constraint no version satisfies; drift:N installs something else than the
    plan said; extra:N:REQ installs REQ too (a dist the plan does not name). Only the tests set it: it
    proves a failing installer is rolled back."""
    spec = os.environ.get("SPARKDOCTOR_FIX_FAULT", "")
    kind, _, at = spec.partition(":")
    at, _, arg = at.partition(":")
    if not at.isdigit() or int(at) != index or s.op not in (StepKind.install, StepKind.restore) or not s.requirements:
        return s

    name = Requirement(s.requirements[0]).name
    if kind == "bad-version":
        return dataclasses.replace(s, requirements=[f"{name}==0.0.0.dev987654"])
    if kind == "drift":
        return dataclasses.replace(s, requirements=[name], op=StepKind.install)
    if kind == "extra" and arg:
        return dataclasses.replace(s, requirements=[*s.requirements, arg])
    if kind == "conflict":
        return dataclasses.replace(s, constraints=[*s.constraints, f"{name}<0.0.0.dev0"], op=StepKind.install)
    return s
