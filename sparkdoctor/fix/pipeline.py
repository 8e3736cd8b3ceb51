"""The `fix` verbs end to end, callable without typer: plan, apply (+ re-check), rollback, history.

The same target abstraction as check (sparkdoctor.targets) and the same check service (sparkdoctor.check), so
what fix plans from is exactly what check reports.
"""

from __future__ import annotations

import shlex
import signal
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sparkdoctor import unsettled
from sparkdoctor.check import CheckRequest, check
from sparkdoctor.errors import TargetUnprobeable
from sparkdoctor.exitcodes import EXIT_FIX_FAILED
from sparkdoctor.findings import NO_RECORD_PREFIX
from sparkdoctor.fix import apply as apply_mod
from sparkdoctor.fix import inventory as inv_mod
from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.definitions import load_all
from sparkdoctor.fix.installers import for_target
from sparkdoctor.fix.interface import FixError, Installer, JournalError
from sparkdoctor.fix.journal_trust import refuse_foreign
from sparkdoctor.fix.model import Plan
from sparkdoctor.fix.plan import FixOptions, build_plan, hash_names
from sparkdoctor.proc import Interrupted
from sparkdoctor.targets.files import transport_of

if TYPE_CHECKING:
    from sparkdoctor.findings import Report
    from sparkdoctor.targets.interface import Target


@dataclass
class Planned:
    plan: Plan
    report: Report
    inventory: inv_mod.Inventory
    installer: Installer


def make_plan(request: CheckRequest, options: FixOptions, progress: Callable[[str], None] | None = None) -> Planned:
    """The plan for the request's target (its matrix and fix definitions: `request.matrix`, `request.fixes`)."""
    target = request.target
    assert target is not None, "fix plans for a live target"
    definitions = load_all(request.fixes)
    if progress:
        progress("checking the target")
    report = check(request).report  # exactly what `check` reports on the target
    if not report.probed():  # check's exit 3: nothing to plan from, and nothing was changed
        raise TargetUnprobeable(f"the target could not be probed: {unprobed_why(report)}; nothing to plan, nothing was changed")
    inventory = inv_mod.read(target, hash_names(report.findings, definitions), before_changes=True)
    stuck = unfinished(target, inventory)
    installer = for_target(target, inventory, options.timeout)
    if progress:
        progress(f"planning with {installer.name} (dry-run resolution)")
    plan = build_plan(report.findings, definitions, inventory, installer, report.facts, options, transport_of(target))
    if any(s.op.changes_packages for s in plan.steps):  # the same settings at the plan's dry run and at the apply
        plan.notes += installer.set_aside()
    plan.notes += record_less(report, inventory, plan.refusals)
    record = inv_mod.target_record(target, inventory)
    if record["kind"] == "container":
        plan.target.update(kind="container", container=record["container"], image_id=record.get("image_id"))
    if stuck:  # first: nothing else may be done to a half-changed target, an empty plan included
        plan.refusals.insert(0, stuck)
    return Planned(plan, report, inventory, installer)


def record_less(report: Report, inventory: inv_mod.Inventory, refusals: list[str]) -> list[str]:
    """A note per dist check found with no RECORD (no-record-*) that no refusal names already: pip cannot
    uninstall it cleanly, so no fix can replace or remove it until it is written again."""
    out = []
    for f in report.findings:
        dist = inventory.get(f.component) if f.id.startswith(NO_RECORD_PREFIX) else None
        if dist is None or not dist.no_record or any(r.startswith(f"{dist.name} {dist.version} has no RECORD") for r in refusals):
            continue
        out.append(f"{dist.name} {dist.version} has no RECORD: pip cannot uninstall it cleanly, so no fix can replace or "
                   f"remove it; write it again first: pip install --ignore-installed --no-deps {shlex.quote(f'{dist.name}=={dist.version}')}")
    return out


def held_for_apply(target: Target) -> AbstractContextManager[None]:
    """The target's lock, taken before `fix --yes` checks and plans: a second apply on a target another fix or rollback
    is changing is refused at once, in one line (its check and plan took about 10 s before it met the lock). Keyed as
    the apply and a rollback key it (inventory.lock_of: a container by the id its runtime reports, whichever
    interpreter was named)."""
    desc = target.describe()
    record = {"kind": desc.get("kind", "python"), "python": desc.get("python"), "container": desc.get("container")}
    return jr.target_lock(*inv_mod.lock_of(target, record))


def unprobed_why(report: Report) -> str:
    """Why check could not probe the target, as its facts say (the target's own error first)."""
    errors = [e for e in report.facts.errors if isinstance(e, dict)]
    found = next((e for e in errors if e.get("collector") == "target"), errors[0] if errors else None)
    return str(found["error"]) if found and found.get("error") else "the target's packages could not be read"


def unfinished(target: Target, inventory: inv_mod.Inventory) -> str | None:
    """One line when this target's last apply or rollback did not finish (killed, power cut): the
    unsettled mark, else a journal that says so; it names the command that settles it."""
    key = inv_mod.target_key(inv_mod.target_record(target, inventory))
    found = unsettled.read(key)
    if found is not None and not found.get("damaged"):
        return unsettled.message(found)
    stuck = jr.unfinished_for(key, inv_mod.target_key)  # a damaged mark: the journals tell (an apply replaces the mark)
    if stuck is not None:
        return unsettled.message({"journal": stuck.id, "doing": "rollback" if stuck.status() == "rollback interrupted" else "apply"})
    return None


def finding_ids(report: Report) -> set[str]:
    return {f.id for f in report.findings}


@dataclass
class Applied:
    """What an apply did and what the check after it found (`fix --yes`)."""

    journal: str
    done: list[str]
    error: str | None
    rolled_back: bool
    rollback_verified: dict[str, Any] | None
    outside_restored: list[str]
    gone: list[str]
    remaining: list[str]
    new: list[str]
    expected_gone: list[str]
    report_after: Report

    @property
    def exit_code(self) -> int:
        return EXIT_FIX_FAILED if self.error else int(self.report_after.exit_code())

    def to_json(self) -> dict[str, object]:
        """The apply document's keys (the check after it as its verdict)."""
        return {"journal": self.journal, "done": self.done, "error": self.error, "rolled_back": self.rolled_back,
                "rollback_verified": self.rollback_verified, "outside_restored": self.outside_restored, "gone": self.gone,
                "remaining": self.remaining, "new": self.new, "expected_gone": self.expected_gone,
                "verdict_after": self.report_after.verdict()}


def apply_and_recheck(request: CheckRequest, planned: Planned, progress: Callable[[str], None] | None = None) -> Applied:
    assert request.target is not None, "fix applies to a live target"
    outcome = apply_mod.apply(request.target, planned.plan, planned.inventory, planned.installer, progress)
    if progress:
        progress("checking the target again")
    try:
        after = check(request).report
    except (KeyboardInterrupt, Interrupted) as exc:  # it stopped only the check after the apply: say what the apply left
        raise Interrupted(getattr(exc, "signum", signal.SIGINT), done=_left_by(outcome)) from exc
    before_ids, after_ids = finding_ids(planned.report), finding_ids(after)
    return Applied(journal=outcome.journal, done=outcome.done, error=outcome.error, rolled_back=outcome.rolled_back,
                   rollback_verified=outcome.verified or None, outside_restored=outcome.outside_restored,
                   gone=sorted(before_ids - after_ids), remaining=sorted(before_ids & after_ids),
                   new=sorted(after_ids - before_ids), expected_gone=planned.plan.checks_after, report_after=after)


def _left_by(outcome: apply_mod.Outcome) -> str:
    if outcome.rolled_back:
        return f"the apply had failed and was rolled back (journal {outcome.journal})"
    if outcome.error is None:
        return (f"the fix was applied (journal {outcome.journal}) and not checked again; "
                f"`sparkdoctor fix --rollback {outcome.journal}` undoes it")
    return f"the apply failed (journal {outcome.journal}): see `sparkdoctor fix --history`"


@dataclass
class RolledBack:
    """What `fix --rollback` found and did: the journal, its status, a message; for a rollback that ran, what it
    restored and the verification (`verified`)."""

    journal: str
    status: str
    message: str
    verified: dict[str, Any] | None = None
    restored_packages: dict[str, Any] | None = None
    restored_files: list[str] | None = None
    target: str | None = None  # the journal's target (inventory.target_label), once a rollback ran
    would: dict[str, object] | None = None  # a dry run's steps to reverse and where it restores from (apply.would_reverse)

    @property
    def exit_code(self) -> int:
        """5 when a rollback ran and its verification found differences."""
        return EXIT_FIX_FAILED if self.status == "rolled back" and not (self.verified or {}).get("ok") else 0

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"journal": self.journal, "status": self.status}
        if self.status == "rolled back":
            out.update(target=self.target, verified=self.verified, restored_packages=self.restored_packages,
                       restored_files=self.restored_files)
        if self.status == "would roll back":  # a dry run: what a rollback would restore, nothing changed
            out.update(target=self.target, dry_run=True, restored_packages=self.restored_packages,
                       restored_files=self.restored_files, **(self.would or {}))
        out["message"] = self.message
        if self.status == "already rolled back":
            out["verified"] = self.verified
        return out


def rollback(target_for: Callable[[dict[str, Any]], Target], ident: str | None,
             progress: Callable[[str], None] | None = None, timeout: float | None = None, dry_run: bool = False) -> RolledBack:
    """`target_for(journal's target record)` finds that target again (or refuses, in one line); timeout: seconds one pip
    call may run (`fix --timeout`); dry_run: every check a rollback makes before it changes anything (the same
    refusals), then what it would restore, and nothing changed (`fix --rollback --dry-run`)."""
    journal = jr.load(ident)
    status = journal.status()
    if status == "half-written":
        return RolledBack(journal.id, status, f"journal {journal.id} is half-written (no COMPLETE marker): not trusted; "
                                              "its apply never started, so nothing was changed")
    if status == "damaged":
        raise JournalError(f"journal {journal.id} lost its COMPLETE marker after its apply started: it is not trusted, so nothing "
                           "was done from it; the target may be half-changed: compare it with `sparkdoctor check`, restore "
                           f"the marker from a backup of {journal.path}, or rebuild the environment")
    if status == "planned":
        return RolledBack(journal.id, status, f"journal {journal.id} is complete but its apply never started: nothing was changed")
    if status == "rolled back":
        return RolledBack(journal.id, "already rolled back", f"journal {journal.id} was already rolled back",
                          verified=journal.marker(jr.ROLLED_BACK))
    refuse_foreign(journal)  # before the journal's interpreter is started: which one is the journal's word
    target = target_for(journal.data["target"])
    label = inv_mod.target_label(journal.data["target"])
    restored = {"restored_packages": journal.data["touched_before"],
                "restored_files": [r["path"] for r in journal.data["files"]], "target": label}
    if dry_run:
        if progress:
            progress(f"checking that journal {journal.id} of {label} can restore it (a dry run: nothing is changed)")
        would = apply_mod.rollback(target, journal, lambda inventory: for_target(target, inventory, timeout), dry_run=True)
        return RolledBack(journal.id, "would roll back", f"journal {journal.id} of {label} can be rolled back; nothing was "
                          f"changed (run `sparkdoctor fix --rollback {journal.id}` to do it)", would=would, **restored)
    if progress:  # the saved wheels are checked, reinstalled offline and every file verified: tens of seconds
        progress(f"rolling back journal {journal.id} of {label} (checking it can restore, restoring, verifying)")
    try:
        verified = apply_mod.rollback(target, journal, lambda inventory: for_target(target, inventory, timeout))
    except (KeyboardInterrupt, Interrupted) as exc:  # the CLI's one line says what is left to do
        left = (f"the rollback of journal {journal.id} may have stopped part way: run `sparkdoctor fix --rollback "
                f"{journal.id}` again, which puts back what is left and verifies it")
        raise Interrupted(getattr(exc, "signum", signal.SIGINT), done=left) from None
    return RolledBack(journal.id, "rolled back", f"journal {journal.id} of {label} rolled back", verified=verified,
                      **restored)


@dataclass
class JournalRow:
    """One fix journal as `fix --history` lists it."""

    journal: str
    status: str
    created: str | None
    target: str | None
    fixes: list[str]
    bytes: int

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _row(j: jr.Journal) -> JournalRow:
    plan = j.data.get("plan") or {}
    return JournalRow(journal=j.id, status="damaged" if j.damaged else j.status(), created=j.data.get("created"),
                      target=inv_mod.target_label(j.data["target"]) if j.data.get("target") else None,
                      fixes=[f["id"] for f in plan.get("fixes", [])], bytes=j.size())


def history() -> list[JournalRow]:
    return [_row(j) for j in jr.history()]


@dataclass
class Pruned:
    """What `fix --prune` removed, what it kept because it is not settled, and the bytes freed."""

    removed: list[dict[str, str]]
    kept_unsettled: list[JournalRow]
    freed_bytes: int

    def to_json(self) -> dict[str, object]:
        return asdict(self)  # kept_unsettled: each row as JournalRow.to_json writes it


def prune(keep: int | None, older_than_s: float | None) -> Pruned:
    """Remove settled journals beyond the newest `keep` and/or older than `older_than_s`; never the
    journal of an apply or rollback that did not finish (nor a damaged one: it may be all that is left). The command
    (commands/fix.py) refuses a prune with neither: `--prune needs --keep N and/or --older-than AGE`."""
    removed, spared = jr.prune(keep, older_than_s, lock_for=inv_mod.recorded_lock)
    return Pruned(removed=[{"journal": j.id, "status": j.pruned_status} for j in removed],
                  kept_unsettled=[_row(j) for j in spared], freed_bytes=sum(j.freed for j in removed))


__all__ = ["Applied", "FixError", "FixOptions", "apply_and_recheck", "held_for_apply", "history", "make_plan", "prune", "Pruned", "rollback", "RolledBack"]
