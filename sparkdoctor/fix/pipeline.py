"""The `fix` verbs end to end, callable without typer: plan, apply (+ re-check), rollback, history.

The same target abstraction as check (sparkdoctor.target), the same collection (collect_facts)
and the same judgement (build_report), so what fix plans from is exactly what check reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sparkdoctor.fix import apply as apply_mod
from sparkdoctor.fix import inventory as inv_mod
from sparkdoctor.fix import journal as jr
from sparkdoctor.fix.definitions import load_all
from sparkdoctor.fix.installers import for_target
from sparkdoctor.fix.interface import FixError
from sparkdoctor.fix.model import Plan
from sparkdoctor.fix.plan import FixOptions, build_plan, hash_names
from sparkdoctor.target.files import transport_of

RESULT_VERSION = 1


@dataclass
class CheckSettings:
    matrix: Path | None = None
    fixes: Path | None = None
    arch: str | None = None
    constraint_files: list[Path] = field(default_factory=list)
    kernels: bool = True
    fail_on: str = "error"
    progress: Callable[[str], None] | None = None


def run_check(target, settings: CheckSettings):
    from sparkdoctor.check import CheckOptions, collect_facts
    from sparkdoctor.findings import build_report
    from sparkdoctor.matrix.loader import load

    matrix = load(settings.matrix, settings.fixes)
    if settings.progress:
        settings.progress("checking the target")
    facts = collect_facts(target, CheckOptions(arch=settings.arch, constraint_files=list(settings.constraint_files), kernels=settings.kernels))
    return build_report(facts, matrix, fail_on=settings.fail_on)


@dataclass
class Planned:
    plan: Plan
    report: Any
    inventory: inv_mod.Inventory
    installer: Any


def make_plan(target, settings: CheckSettings, options: FixOptions) -> Planned:
    definitions = load_all(settings.fixes)
    report = run_check(target, settings)
    inventory = inv_mod.read(target, hash_names(report.findings, definitions))
    installer = for_target(target, inventory)
    if settings.progress:
        settings.progress(f"planning with {installer.name} (dry-run resolution)")
    plan = build_plan(report.findings, definitions, inventory, installer, report.facts, options, transport_of(target))
    record = inv_mod.target_record(target, inventory)
    if record["kind"] == "container":
        plan.target.update(kind="container", container=record["container"], image_id=record.get("image_id"))
    return Planned(plan, report, inventory, installer)


def finding_ids(report) -> set[str]:
    return {f.id for f in report.findings}


def apply_and_recheck(target, planned: Planned, settings: CheckSettings) -> dict[str, Any]:
    outcome = apply_mod.apply(target, planned.plan, planned.inventory, planned.installer)
    if settings.progress:
        settings.progress("checking the target again")
    after = run_check(target, settings)
    before_ids, after_ids = finding_ids(planned.report), finding_ids(after)
    return {
        "journal": outcome.journal,
        "done": outcome.done,
        "error": outcome.error,
        "rolled_back": outcome.rolled_back,
        "rollback_verified": outcome.verified or None,
        "gone": sorted(before_ids - after_ids),
        "remaining": sorted(before_ids & after_ids),
        "new": sorted(after_ids - before_ids),
        "expected_gone": planned.plan.checks_after,
        "report_after": after,
    }


def rollback(target_for: Callable[[dict[str, Any]], Any], ident: str | None) -> dict[str, Any]:
    """`target_for(journal's target record)` finds that target again (or refuses, in one line)."""
    journal = jr.load(ident)
    status = journal.status()
    if status == "half-written":
        return {"journal": journal.id, "status": status, "message":
                f"journal {journal.id} is half-written (no COMPLETE marker): not trusted; its apply never started, so nothing was changed"}
    if status == "planned":
        return {"journal": journal.id, "status": status, "message": f"journal {journal.id} is complete but its apply never started: nothing was changed"}
    if status == "rolled back":
        return {"journal": journal.id, "status": "already rolled back", "message": f"journal {journal.id} was already rolled back",
                "verified": journal.marker(jr.ROLLED_BACK)}
    target = target_for(journal.data["target"])
    inventory = inv_mod.read(target)
    installer = for_target(target, inventory)
    verified = apply_mod.rollback(target, journal, installer)
    return {"journal": journal.id, "status": "rolled back", "verified": verified,
            "restored_packages": journal.data["touched_before"], "restored_files": [r["path"] for r in journal.data["files"]],
            "message": f"journal {journal.id} rolled back"}


def history() -> list[dict[str, Any]]:
    out = []
    for j in jr.history():
        plan = j.data.get("plan") or {}
        out.append({"journal": j.id, "status": j.status(), "created": j.data.get("created"),
                    "target": inv_mod.target_label(j.data["target"]) if j.data.get("target") else None,
                    "fixes": [f["id"] for f in plan.get("fixes", [])]})
    return out


__all__ = ["CheckSettings", "FixError", "FixOptions", "make_plan", "apply_and_recheck", "rollback", "history", "RESULT_VERSION"]
