"""Apply a Plan (journal first, restore always) and roll a journal back, byte for byte and offline.

Each stage passes numbered step boundaries (`boundary(name)`). SPARKDOCTOR_FIX_KILL_AT=PHASE:N makes
the process SIGKILL itself at the Nth boundary of PHASE (apply or rollback): the fault-injection
tests kill it at every one and prove that either the apply completed or a rollback restores it.
Any error or interrupt after the journal is complete rolls back at once (pipx's preserve_venv).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.fix import inventory as inv_mod
from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.interface import FixError, Installer
from sparkdoctor.fix.inventory import Inventory, sha256_file, target_key, target_label, target_record
from sparkdoctor.fix.model import Plan
from sparkdoctor.target.local import Target
from sparkdoctor.target.files import FileError, FileTransport, LocalFiles, hashes, sha256_of, transport_of

KILL_ENV = "SPARKDOCTOR_FIX_KILL_AT"
TRACE_ENV = "SPARKDOCTOR_FIX_TRACE"
# Fault injection for the installer: SPARKDOCTOR_FIX_FAULT=bad-version:N asks the installer for a
# version that does not exist at step N; conflict:N adds a constraint no version satisfies (a
# resolver conflict). Only the tests set it: it proves a failing installer is rolled back.
FAULT_ENV = "SPARKDOCTOR_FIX_FAULT"


def _injected(index: int, s):
    spec = os.environ.get(FAULT_ENV, "")
    kind, _, at = spec.partition(":")
    if not at.isdigit() or int(at) != index or s.op not in ("install", "restore") or not s.requirements:
        return s
    import dataclasses

    from packaging.requirements import Requirement

    name = Requirement(s.requirements[0]).name
    if kind == "bad-version":
        return dataclasses.replace(s, requirements=[f"{name}==0.0.0.dev987654"])
    if kind == "drift":
        return dataclasses.replace(s, requirements=[name], op="install")
    if kind == "conflict":
        return dataclasses.replace(s, constraints=[*s.constraints, f"{name}<0.0.0.dev0"], op="install")
    return s


class Boundaries:
    """Counts the step boundaries of one phase; kills the process where SPARKDOCTOR_FIX_KILL_AT says."""

    def __init__(self, phase: str):
        self.phase, self.count = phase, 0
        spec = os.environ.get(KILL_ENV, "")
        self.kill_at = int(spec.split(":")[1]) if spec.startswith(phase + ":") else None

    def __call__(self, name: str) -> None:
        self.count += 1
        trace = os.environ.get(TRACE_ENV)
        if trace:
            with open(trace, "a", encoding="utf-8") as fh:
                fh.write(f"{self.phase}:{self.count}:{name}\n")
        if self.kill_at == self.count:
            os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class Outcome:
    journal: str
    done: list[str] = field(default_factory=list)
    rolled_back: bool = False
    error: str | None = None
    verified: dict[str, Any] = field(default_factory=dict)


def _dist_paths(inventory: Inventory, names: list[str]) -> dict[str, list[str]]:
    return {n: [str(p) for p in inventory.get(n).paths()] for n in names if inventory.get(n)}


def sides_of(target: Target) -> dict[str, FileTransport]:
    """Where a step's files live: "target" (a pin file check found, a dist's files) goes through the
    target's transport; "host" (the env file, the recipe named on the command line) is this machine's."""
    return {"target": transport_of(target), "host": LocalFiles()}


def _header(target: Target, plan: Plan, inventory: Inventory, installer: Installer) -> dict[str, Any]:
    touched = [n for n in plan.touched if inventory.get(n)]
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "target": target_record(target, inventory),
        "installer": installer.name,
        "plan": plan.to_dict(),
        "packages_before": [inventory.dists[k].to_dict() for k in sorted(inventory.dists)],
        "touched_before": {n: inventory.get(n).version for n in touched},
        "hashes_before": inv_mod.file_hashes(transport_of(target), inventory, set(touched)),
    }


def _save_wheels(plan: Plan, inventory: Inventory, installer: Installer):
    def save(folder: Path) -> dict[str, str | None]:
        # what the apply replaces or removes: its wheel, fetched BEFORE any change (none for a non-registry dist)
        dists = [inventory.get(n) for n in plan.touched if inventory.get(n) is not None]
        out: dict[str, str | None] = {d.key: None for d in dists}
        out.update(installer.download([f"{d.key}=={d.version}" for d in dists if d.from_registry()], str(folder)))
        return out
    return save


def apply(target: Target, plan: Plan, inventory: Inventory, installer: Installer) -> Outcome:
    if plan.refusals:
        raise FixError(plan.refusals[0])
    step = Boundaries("apply")
    sides = sides_of(target)
    header = _header(target, plan, inventory, installer)
    key = target_key(header["target"])
    with jr.target_lock(key, target_label(header["target"])):
        stuck = jr.unfinished_for(key, target_key)
        if stuck:
            raise FixError(f"journal {stuck.id} of this target stopped mid-apply: run `sparkdoctor fix --rollback {stuck.id}` first")
        step("locked")
        edited = [(s.path, s.side) for s in plan.steps if s.op == "edit" and s.path]
        journal = jr.create(header, edited, _dist_paths(inventory, plan.touched), _save_wheels(plan, inventory, installer), step, sides)
        step("journal-complete")
        outcome = Outcome(journal.id)
        journal.mark(jr.APPLYING)
        try:
            for i, s in enumerate(plan.steps):
                step(f"step-{i + 1}-{s.op}")
                _run_step(_injected(i + 1, s), journal, installer, inventory, sides)
                outcome.done.append(f"{s.op} {s.path or ' '.join(s.names or s.requirements)}")
            step("verify")
            _verify_applied(target, plan)
            journal.mark(jr.APPLIED, {"done": outcome.done})
            step("applied")
        except (Exception, KeyboardInterrupt, proc.Interrupted) as exc:
            outcome.error = str(exc) if isinstance(exc, FixError) else f"{type(exc).__name__}: {exc}"
            try:
                outcome.verified = _rollback_locked(target, journal, installer, Boundaries("auto-rollback"), sides)
                outcome.rolled_back = True
            except (Exception, KeyboardInterrupt, proc.Interrupted) as exc2:
                raise FixError(f"{outcome.error}; the automatic rollback failed too ({exc2}): run `sparkdoctor fix --rollback {journal.id}`") from None
        return outcome


def _run_step(s, journal: jr.Journal, installer: Installer, inventory: Inventory, sides: dict[str, FileTransport]) -> None:
    if s.op == "edit":
        files = sides[s.side]
        try:
            if sha256_of(files, s.path) != s.old_sha256:
                raise FixError(f"{s.path} changed since the plan was made; run the plan again")
            files.write(s.path, s.new_text.encode("utf-8"))
        except FileError as exc:
            raise FixError(str(exc)) from None
    elif s.op == "uninstall":
        installer.uninstall(s.names)
        _remove_leftovers(journal, s.names, inventory, sides["target"])
    elif s.op == "install":
        cfile = journal.path / f"constraints-{secrets_free_name(s)}.txt"
        jr.write_bytes(cfile, "".join(c + "\n" for c in s.constraints).encode())
        installer.install(s.requirements, constraints=[str(cfile)])
    elif s.op == "restore":
        installer.install(s.requirements, force_reinstall=True, no_deps=True)
    else:  # pragma: no cover (Plan.from_dict only makes these)
        raise FixError(f"unknown step {s.op!r}")


def secrets_free_name(s) -> str:
    return str(abs(hash(tuple(s.requirements))) % 10**8)


def _remove_leftovers(journal: jr.Journal, names: list[str], inventory: Inventory, files: FileTransport) -> None:
    """What the uninstall left on disk of those dists (a file another one overwrote, a folder):
    a clean reinstall starts from nothing. Files another installed dist owns are kept."""
    owned = {str(p) for d in inventory.dists.values() if d.key not in names for p in d.paths()}
    rows = [r for n in names for r in journal.data["dist_files"].get(n, [])]
    left = list(dict.fromkeys(r["path"] for r in rows if r["path"] not in owned))
    try:
        files.remove(left, prune=True)
    except FileError as exc:
        raise FixError(str(exc)) from None


def _verify_applied(target: Target, plan: Plan) -> None:
    """What is installed now must be what the plan said; otherwise the resolution differed: undo."""
    now = inv_mod.read(target)
    for name, (_before, after) in sorted(plan.changes.items()):
        dist = now.get(name)
        got = dist.version if dist else None
        if got != after:
            raise FixError(f"the installer's result differs from the plan: {name} is {got or 'not installed'}, the plan said {after or 'removed'}")


def rollback(target: Target, journal: jr.Journal, installer: Installer) -> dict[str, Any]:
    record = journal.data["target"]
    with jr.target_lock(target_key(record), target_label(record)):
        return _rollback_locked(target, journal, installer, Boundaries("rollback"), sides_of(target))


def _rollback_locked(target: Target, journal: jr.Journal, installer: Installer, step: Boundaries,
                     sides: dict[str, FileTransport]) -> dict[str, Any]:
    try:
        return _rollback_steps(target, journal, installer, step, sides)
    except FileError as exc:
        raise FixError(str(exc)) from None


def _rollback_steps(target: Target, journal: jr.Journal, installer: Installer, step: Boundaries,
                    sides: dict[str, FileTransport]) -> dict[str, Any]:
    data = journal.data
    files = sides["target"]
    before_keys = {inv_mod.canonicalize_name(p["name"]) for p in data["packages_before"]}
    journal.mark(jr.ROLLING_BACK)
    step("start")
    now = inv_mod.read(target)
    touched = list(data["touched_before"])
    plan_touched = data["plan"].get("touched", [])
    remove = sorted({n for n in set(touched) | set(plan_touched) if now.get(n)} | {k for k in now.dists if k not in before_keys})
    installer.uninstall(remove)
    step("uninstalled")
    wheels = {n: w for n, w in data["wheels"].items() if w and n in data["touched_before"]}
    if wheels:
        installer.install([f"{n}=={data['touched_before'][n]}" for n in sorted(wheels)], no_deps=True,
                          offline_from=str(journal.path / "wheels"))
        _drop_new_files(target, journal, sorted(wheels), files)
    step("reinstalled")
    rows = {row["path"]: row for dist_rows in data["dist_files"].values() for row in dist_rows if row.get("copy")}
    now_hashes = hashes(files, list(rows))
    files.import_files([(journal.copy_of(r["copy"]), p, r.get("mode")) for p, r in rows.items()
                        if now_hashes.get(p) != sha256_file(journal.copy_of(r["copy"]))])
    step("dist-files")
    for side in ("target", "host"):
        edited = [r for r in data["files"] if r.get("side", "target") == side]
        now_edited = hashes(sides[side], [r["path"] for r in edited])
        sides[side].import_files([(journal.copy_of(r["copy"]), r["path"], r.get("mode")) for r in edited
                                  if r["existed"] and now_edited.get(r["path"]) != r["sha256"]])
        sides[side].remove([r["path"] for r in edited if not r["existed"] and now_edited.get(r["path"]) is not None])
    step("files")
    verified = verify_rolled_back(target, journal, sides)
    journal.mark(jr.ROLLED_BACK, verified)
    step("done")
    return verified


def _drop_new_files(target: Target, journal: jr.Journal, names: list[str], files: FileTransport) -> None:
    """Files the offline reinstall wrote that the original install did not have (REQUESTED, .pyc)."""
    now = inv_mod.read(target)
    extra: list[str] = []
    for name in names:
        old = {r["path"] for r in journal.data["dist_files"].get(name, [])}
        dist = now.get(name)
        extra += [str(p) for p in (dist.paths() if dist else []) if str(p) not in old]
    files.remove(extra)


def verify_rolled_back(target: Target, journal: jr.Journal, sides: dict[str, FileTransport] | None = None) -> dict[str, Any]:
    """The package set and the bytes of every touched dist's files and every edited file, against the journal."""
    sides = sides or sides_of(target)
    data = journal.data
    now = inv_mod.read(target)
    want = {inv_mod.canonicalize_name(p["name"]): p["version"] for p in data["packages_before"]}
    got = now.package_set()
    package_diff = sorted(f"{k}: {want.get(k) or '-'} -> {got.get(k) or '-'}" for k in set(want) | set(got) if want.get(k) != got.get(k))
    have = inv_mod.file_hashes(sides["target"], now, set(data["touched_before"]))
    missing = [p for p in data["hashes_before"] if p not in have]
    have.update(hashes(sides["target"], missing))
    file_diff = sorted(p for p, h in data["hashes_before"].items() if have.get(p) != h)
    for side in ("target", "host"):
        edited = [r for r in data["files"] if r.get("side", "target") == side]
        now_edited = hashes(sides[side], [r["path"] for r in edited])
        file_diff += [r["path"] for r in edited if now_edited.get(r["path"]) != (r.get("sha256") if r["existed"] else None)]
    return {"packages_differ": package_diff, "files_differ": file_diff, "ok": not package_diff and not file_diff,
            "packages": len(want), "files": len(data["hashes_before"]) + len(data["files"])}
