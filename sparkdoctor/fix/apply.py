"""Apply a Plan (journal first, restore always) and roll a journal back, byte for byte and offline.

The steps are Action objects (sparkdoctor.fix.actions): every action is verified before the first
change (including that the journal can undo it), executed in order, and on any failure reversed in
reverse order from the journal. Each stage passes numbered step boundaries (`boundary(name)`).
SPARKDOCTOR_FIX_KILL_AT=PHASE:N makes the process SIGKILL itself at the Nth boundary of PHASE (apply,
rollback or auto-rollback): the fault-injection tests kill it at every one and prove that either the
apply completed or a rollback restores it. SPARKDOCTOR_FIX_STOP_AT=PHASE:NAME makes it SIGSTOP itself at
the first boundary of PHASE whose name starts with NAME, so a test can look at a fix held exactly there.
The installer's children die with this process (a parent-death signal), and a target whose apply or
rollback did not finish is marked (sparkdoctor.unsettled) until one settles it.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import proc, unsettled
from sparkdoctor.fix import inventory as inv_mod
from sparkdoctor.fix import journal as jr
from sparkdoctor.fix import outside as outside_mod
from sparkdoctor.fix.actions import (
    Context,
    StepAction,
    actions_of,
    injected,
    reverse_all,
    verify_all,
)
from sparkdoctor.fix.interface import (
    FixError,
    Installer,
    JournalError,
    Refusal,
    StepKind,
    UnchangedError,
    failure_text,
)
from sparkdoctor.fix.inventory import (
    Dist,
    Inventory,
    lock_of,
    target_key,
    target_label,
    target_record,
)
from sparkdoctor.fix.journal_trust import refuse_outside, refuse_stray_paths
from sparkdoctor.fix.model import Plan, Step
from sparkdoctor.fix.pdeath import children_die_with_parent
from sparkdoctor.fix.restore import Restorer, verify_rolled_back
from sparkdoctor.names import canonicalize_name
from sparkdoctor.targets.files import (
    FileError,
    FileTransport,
    LinkRefused,
    LocalFiles,
    transport_of,
)
from sparkdoctor.targets.local import Target

KILL_ENV = "SPARKDOCTOR_FIX_KILL_AT"
STOP_ENV = "SPARKDOCTOR_FIX_STOP_AT"
FAULT_ENV = "SPARKDOCTOR_FIX_FAULT"  # the tests' installer faults (actions.injected); unlink:N:PATH below


class Boundaries:
    """Counts the step boundaries of one phase; kills the process where SPARKDOCTOR_FIX_KILL_AT says and stops it
    (SIGSTOP, once) where SPARKDOCTOR_FIX_STOP_AT says."""

    def __init__(self, phase: str):
        self.phase, self.count = phase, 0
        spec = os.environ.get(KILL_ENV, "")
        self.kill_at = int(spec.split(":")[1]) if spec.startswith(phase + ":") else None
        stop = os.environ.get(STOP_ENV, "")
        self.stop_at = stop.partition(":")[2] if stop.startswith(phase + ":") else None

    def __call__(self, name: str) -> None:
        self.count += 1
        if self.stop_at and name.startswith(self.stop_at):
            self.stop_at = None
            os.kill(os.getpid(), signal.SIGSTOP)
        if self.kill_at == self.count:
            os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class Outcome:
    journal: str
    done: list[str] = field(default_factory=list)
    rolled_back: bool = False
    error: str | None = None
    verified: dict[str, Any] = field(default_factory=dict)
    outside_restored: list[str] = field(default_factory=list)  # .pyc files of other dists compiled again


def _installed(inventory: Inventory, names: list[str]) -> list[Dist]:
    return [d for d in (inventory.get(n) for n in names) if d is not None]


def _room_for(files: FileTransport, paths: list[str]) -> None:
    """Before the journal copies the touched dists' files: one line when they are more bytes than its folder's disk has
    free. A 64 GB sparse file a RECORD lists was copied out in full (a copy is not sparse) until the disk was full,
    whoever else needed that disk, before the apply stopped."""
    root = jr.journals_dir()
    disk = next((p for p in [root, *root.parents] if p.is_dir()), root)  # the folder may not be made yet
    need = sum(int(row.get("size") or 0) for row in files.info(paths).values() if row and row.get("kind") == "file")
    try:
        free = shutil.disk_usage(disk).free
    except OSError:
        return  # the journal's own write says why, in its line
    if need > free:
        raise UnchangedError(f"the journal's copies of the touched dists' files need {need:,} bytes and {root} has "
                             f"{free:,} free: free some space there (or remove old journals: sparkdoctor fix --prune "
                             "--keep N); nothing was changed")


def sides_of(target: Target) -> dict[str, FileTransport]:
    """Where a step's files live: "target" (a pin file check found, a dist's files) goes through the
    target's transport; "host" (the env file, the recipe named on the command line) is this machine's."""
    return {"target": transport_of(target), "host": LocalFiles()}


def _header(target: Target, plan: Plan, inventory: Inventory, installer: Installer) -> dict[str, Any]:
    touched = _installed(inventory, plan.touched)
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "target": target_record(target, inventory),
        "installer": installer.name,
        "plan": plan.to_dict(),
        "packages_before": [inventory.dists[k].to_dict() for k in sorted(inventory.dists)],
        "touched_before": {d.key: d.version for d in touched},
        "hashes_before": inv_mod.file_hashes(transport_of(target), inventory, {d.key for d in touched}),
    }


def _save_wheels(plan: Plan, inventory: Inventory, installer: Installer):
    def save(folder: Path) -> dict[str, str | None]:
        # what the apply replaces or removes: its wheel, fetched BEFORE any change (none for a non-registry dist)
        dists = _installed(inventory, plan.touched)
        out: dict[str, str | None] = {d.key: None for d in dists}
        out.update(installer.download([f"{d.key}=={d.version}" for d in dists if d.from_registry()], str(folder)))
        return out
    return save


def apply(target: Target, plan: Plan, inventory: Inventory, installer: Installer,
          progress: Callable[[str], None] | None = None) -> Outcome:
    """Journal first, then each step; on any failure or signal every executed step reversed. `progress` hears of
    each phase (an apply of a package family takes a minute or more)."""
    say = progress or (lambda message: None)
    if plan.refusals:
        raise Refusal(plan.refusals[0])
    step = Boundaries("apply")
    sides = sides_of(target)
    record = target_record(target, inventory)
    key, label = target_key(record), target_label(record)
    running_before = set(proc.live_pids())  # not the apply's to stop (a caller's own children, in-process)
    with jr.target_lock(*lock_of(target, record)), children_die_with_parent():
        stuck = jr.unfinished_for(key, target_key)
        if stuck:
            raise Refusal(f"journal {stuck.id} of this target stopped mid-apply: run `sparkdoctor fix --rollback {stuck.id}` first")
        # The plan was made before the lock: another fix (or a pip) may have changed the target since. Judged again
        # under the lock, and the journal's "before" taken from what is there now.
        now = inv_mod.read(target, before_changes=True)
        if now.package_set() != inventory.package_set():
            was, got = inventory.package_set(), now.package_set()
            moved = [f"{k} {was.get(k) or '-'} -> {got.get(k) or '-'}" for k in sorted(set(was) | set(got)) if was.get(k) != got.get(k)]
            raise UnchangedError(f"the target changed since the plan was made ({', '.join(moved[:3])}"
                                 f"{', ...' if len(moved) > 3 else ''}): run the fix again; nothing was changed")
        dist_paths = {d.key: [str(p) for p in d.paths()] for d in _installed(inventory, plan.touched)}
        unique = list(dict.fromkeys(p for paths in dist_paths.values() for p in paths))
        try:  # before any file is hashed or copied: a RECORD row or a link out of the target would put a file of the home folder in it
            refuse_outside(unique, now, label, sides["target"])
        except JournalError as exc:
            raise UnchangedError(str(exc)) from None
        _room_for(sides["target"], unique)
        header = _header(target, plan, inventory, installer)
        step("locked")
        edited = [(s.path, s.side) for s in plan.steps if s.op is StepKind.edit and s.path]
        say("writing the journal (what is there now, and the wheels of what the apply replaces)")
        outside = outside_mod.snapshot(target, plan.touched) if any(s.op.changes_packages for s in plan.steps) else None
        journal = jr.create(header, edited, dist_paths, _save_wheels(plan, inventory, installer), step, sides, outside)
        step("journal-complete")
        restorer = Restorer(target, journal, installer, sides, Boundaries("auto-rollback"))
        try:  # the rollback of a failed apply writes as `fix --rollback` would: where checked now, through no link
            restorer.pin_writes(*refuse_stray_paths(journal, now, label, sides["target"]))
        except JournalError as exc:
            raise UnchangedError(f"{exc} (journal {journal.id} was not used)") from None
        ctx = Context(journal, installer, inventory, sides, restorer)
        actions = actions_of(plan, ctx, injected)
        problems = verify_all(actions)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise UnchangedError(f"{problems[0]}{more}; nothing was changed (journal {journal.id} was not used)")
        outcome = Outcome(journal.id)
        _marks(lambda: unsettled.mark(key, label, journal.id, "apply"), lambda: journal.mark(jr.APPLYING, {"step": 0, "of": len(actions)}))
        executed: list[StepAction] = []
        try:
            for i, action in enumerate(actions):
                step(f"step-{i + 1}-{action.op}")
                say(f"step {i + 1} of {len(actions)}: {action.describe()}")
                journal.mark(jr.APPLYING, {"step": i + 1, "of": len(actions)})
                executed.append(action)  # reversed even if it fails half-way (conda: actions[:failed + 1])
                action.execute()
                _fault_after(i + 1)
                outcome.done.append(action.describe())
            step("verify")
            _verify_applied(target, plan, journal, outcome, installer)
            journal.mark(jr.APPLIED, {"done": outcome.done, "outside_restored": outcome.outside_restored})
            unsettled.clear(key, journal.id)
            step("applied")
        except (Exception, KeyboardInterrupt, proc.Interrupted) as exc:
            outcome.error = failure_text(exc)
            if not isinstance(exc, Exception):
                # a signal (Ctrl-C) may have come between an installer's start and its wait (proc.start's pending
                # signal, a Running not yet waited on): that installer would go on changing the target beside the
                # rollback. Every child started since the apply began is killed and reaped before the first reverse.
                proc.stop_all(keep=running_before)
            try:
                say(f"rolling back ({outcome.error})")
                outcome.verified = _reverse(target, journal, executed, restorer, sides)
                outcome.rolled_back = True
                if outcome.verified.get("ok") and journal.has(jr.ROLLED_BACK):
                    unsettled.clear(key, journal.id)
            except (Exception, KeyboardInterrupt, proc.Interrupted) as exc2:
                raise FixError(f"{outcome.error}; the automatic rollback failed too ({failure_text(exc2)}): run `sparkdoctor fix "
                               f"--rollback {journal.id}`") from None
        return outcome


def _marks(*writes: Callable[[], None]) -> None:
    """The first writes of an apply or rollback (its state marks), before anything changes."""
    try:
        for write in writes:
            write()
    except OSError as exc:
        raise UnchangedError(f"cannot record that a fix is under way in {jr.state_dir()}: {exc.strerror or exc}; nothing was changed") from None


def _fault_after(index: int) -> None:
    """SPARKDOCTOR_FIX_FAULT=unlink:N:PATH[:PATH...] deletes each PATH after step N, as an installer that
    deletes files of a dist the plan does not name would (only the tests set it)."""
    kind, _, rest = os.environ.get(FAULT_ENV, "").partition(":")
    at, _, paths = rest.partition(":")
    if kind == "unlink" and at.isdigit() and int(at) == index:
        for path in paths.split(":"):
            Path(path).unlink()


def _verify_applied(target: Target, plan: Plan, journal: jr.Journal, outcome: Outcome, installer: Installer) -> None:
    """What is installed now must be what the plan said (otherwise the resolution differed): every dist
    the plan names at its version, no other dist installed, removed or moved; and nothing outside the plan
    may have changed (byte code of an unchanged source is compiled again if gone; anything else: undo)."""
    now = inv_mod.read(target)
    for name, (_before, after) in sorted(plan.changes.items()):
        dist = now.get(name)
        got = dist.version if dist else None
        if got != after:
            raise FixError(f"the installer's result differs from the plan: {name} is {got or 'not installed'}, the plan said {after or 'removed'}")
    was: dict[str, str] = {canonicalize_name(p["name"]): p["version"] for p in journal.data["packages_before"]}
    has = now.package_set()
    unnamed = [f"{k} {was.get(k) or '(not installed)'} -> {has.get(k) or '(removed)'}" for k in sorted(set(was) | set(has))
               if was.get(k) != has.get(k) and k not in plan.changes]
    if unnamed:
        raise FixError(f"the installer's result differs from the plan: it changed {len(unnamed)} dist(s) the plan does not name: {'; '.join(unnamed[:5])}")
    before = journal.outside()
    if before is not None:
        outcome.outside_restored, lost = outside_mod.restore(target, before, plan.touched, installer)
        if lost:
            raise FixError(f"the apply changed {len(lost)} file(s) of dists the plan does not name, e.g. {lost[0]}")


def rollback(target: Target, journal: jr.Journal, installer_for: Callable[[Inventory], Installer],
             dry_run: bool = False) -> dict[str, object]:
    """Undo a journal's apply: verify that the journal can restore the target (refuse, changing nothing,
    if it cannot), then reverse the actions that ran, last first. The target is read once, under its lock (what
    it has, and with it its installer: `installer_for(inventory)`); nothing is changed before that. `dry_run`: the
    same checks, no lock (as a plan takes none), then what it would do (`would_reverse`) instead of doing it."""
    record = journal.data["target"]
    key, label = target_key(record), target_label(record)
    sides = sides_of(target)
    with nullcontext() if dry_run else jr.target_lock(*lock_of(target, record)), children_die_with_parent():
        inventory = inv_mod.read(target, before_changes=True)
        roots, lands = refuse_stray_paths(journal, inventory, label, sides["target"])
        installer = installer_for(inventory)
        restorer = Restorer(target, journal, installer, sides, Boundaries("rollback"))
        problems = restorer.prepare()
        if problems:
            raise JournalError(f"journal {journal.id} cannot restore this target: {problems[0]}; nothing was changed")
        restorer.judge_outside()
        restorer.pin_writes(roots, lands)
        plan = Plan.from_dict(journal.data["plan"])
        if dry_run:
            return would_reverse(plan.steps[:_executed_count(journal, len(plan.steps))], restorer)
        actions = actions_of(plan, Context(journal, installer, inventory, sides, restorer))
        _marks(lambda: unsettled.mark(key, label, journal.id, "rollback"))
        verified = _reverse(target, journal, actions[:_executed_count(journal, len(actions))], restorer, sides)
        if verified.get("ok") and journal.has(jr.ROLLED_BACK):
            unsettled.clear(key, journal.id)
        return verified


def would_reverse(executed: list[Step], restorer: Restorer) -> dict[str, object]:
    """What a rollback would do, as `fix --rollback --dry-run` says it: the steps it would reverse (last first), where
    the packages would come from (the journal's saved wheels, else its byte copies) and the notes of that choice."""
    return {"restore_from": restorer.mode if restorer.data["touched_before"] else None, "notes": list(restorer.notes),
            "reverse": [{"op": st.op.value, "fix": st.fix, "path": st.path, "names": st.names or None,
                         "requirements": st.requirements or None} for st in reversed(executed)]}


def _executed_count(journal: jr.Journal, total: int) -> int:
    """How many actions ran: all for an applied journal; else up to the step the applying marker names."""
    if journal.has(jr.APPLIED):
        return total
    step = (journal.marker(jr.APPLYING) or {}).get("step")
    return min(step, total) if isinstance(step, int) and step >= 0 else total


def _reverse(target: Target, journal: jr.Journal, executed: list[StepAction], restorer: Restorer,
             sides: dict[str, FileTransport]) -> dict[str, Any]:
    step = restorer.boundary

    def mark(marker: str, detail: Mapping[str, object] | None = None) -> bool:
        """A state marker that cannot be written (the state dir's disk is full) never stops a reverse: the target
        is put back all the same, and the journal still reads as unsettled (its last marker stands)."""
        try:
            journal.mark(marker, detail)
            return True
        except OSError as exc:
            why = f"the journal's {marker} marker could not be written ({exc.strerror or exc})"
            if why not in restorer.notes:
                restorer.notes.append(why)
            return False

    def record(rows: list[dict]) -> None:
        mark(jr.ROLLING_BACK, {"reversed": rows})

    try:
        mark(jr.ROLLING_BACK)
        step("start")
        reversed_rows = reverse_all(executed, record)
        step("files")
        verified = verify_rolled_back(target, journal, sides, restorer.installer, restorer.outside_since)
    except LinkRefused as exc:
        raise JournalError(f"journal {journal.id}: {exc}: the rollback stopped at this write (what it put back before it "
                           f"stays, and the target stays marked as a rollback under way); remove the link, then run "
                           f"`sparkdoctor fix --rollback {journal.id}` again") from None
    except FileError as exc:
        raise FixError(str(exc)) from None
    verified["reversed"] = reversed_rows
    verified["restored_from"] = restorer.mode
    verified["notes"] = restorer.notes
    failed = [r for r in reversed_rows if not r["ok"]]
    if failed:
        verified["ok"] = False
        verified["reverse_errors"] = [f"step {r['step']} ({r['action']}): {r['error']}" for r in failed]
    if not mark(jr.ROLLED_BACK if verified["ok"] else jr.ROLLING_BACK, verified) and verified["ok"]:
        # put back, but the journal cannot say so: target and journal stay marked unsettled until a rollback settles them
        restorer.notes.append(f"run `sparkdoctor fix --rollback {journal.id}` once the disk has room: it finds the target "
                              "as the journal recorded and settles the journal")
    step("done")
    return verified
