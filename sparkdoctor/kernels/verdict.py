"""One probe's verdict from its runs: ok only with proof (a cubin for the arch, the instruction in its
SASS where a disassembler could read it, the right outputs where a GPU ran it); otherwise fail,
error, timeout or skipped, with the reason in one detail line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sparkdoctor.kernels.probes import Probe


def skipped(probe: Probe, arch: str, why: str) -> dict[str, object]:
    return {"kind": "ptx", "title": probe.title, "instruction": probe.instruction, "status": "skipped", "detail": why, "arch": arch, "runs": []}


def entry(probe: Probe, runs: list[dict[str, Any]], arch_note: str | None, arch_source: str) -> dict[str, object]:
    target_runs = [r for r in runs if r["purpose"] == "target"]
    primary = target_runs[0]  # jobs were queued in preference order
    status, detail = judge(primary, target_runs)
    for r in target_runs[1:]:
        if r.get("used_by") and not r["compiled"] and r["outcome"] != primary["outcome"]:
            detail += f"; the ptxas {', '.join(r['used_by'])} uses, {who(r)}, does not: {r['explanation'] or r['error']}"
    for r in runs:
        if r["purpose"] == "diagnosis" and not r["compiled"]:
            verb = "target" if " and " in r["setting"] else "targets"  # the settings that share one plain arch
            detail += f"; {r['setting']} {verb} plain {r['arch']}: {r['explanation'] or r['error']}"
    if arch_note:
        detail = f"{arch_note}; {detail}"
    return {
        "kind": "ptx", "title": probe.title, "instruction": probe.instruction, "status": status, "detail": detail,
        "arch": primary["arch"], "arch_source": arch_source, "runs": runs,
    }


def who(rec: Mapping[str, object]) -> str:
    return f"ptxas {rec['ptxas_version'] or '?'} ({rec['ptxas_source']})"


def judge(primary: dict[str, Any], target_runs: Sequence[Mapping[str, object]]) -> tuple[str, str]:
    compiled = sum(1 for r in target_runs if r["compiled"])
    tally = f" ({compiled}/{len(target_runs)} ptxas compiled it)" if len(target_runs) > 1 else ""
    outcome = primary["outcome"]
    if outcome == "timeout":
        return "timeout", f"{who(primary)}: {primary['error']}{tally}"
    if outcome == "error":
        return "error", f"{who(primary)}: {primary['error']}{tally}"
    if outcome == "rejected":
        why = f" ({primary['explanation']})" if primary["explanation"] else ""
        return "fail", f"{who(primary)} rejected it for {primary['arch']}: {primary['error']}{why}{tally}"
    parts = [f"compiled for {primary['arch']} by {who(primary)}{tally}"]
    if primary["sass_ok"] is False:
        return "fail", "; ".join(parts + [f"but its SASS lacks the instruction, so the probe did not really compile ({primary['sass']})"])
    if primary["sass_ok"]:
        parts.append(f"SASS has the instruction ({primary['sass']})")
    if primary["ran"] is False:
        return "error", "; ".join(parts + [primary["run_note"]])
    if primary["ran"] and not primary["verified"]:
        return "fail", "; ".join(parts + [f"WRONG RESULTS: {primary['run_note']}"])
    parts.append(primary["run_note"] if primary["ran"] else (primary["run_note"] or "not run"))
    return "ok", "; ".join(parts)
