"""The memory verdict as findings (the {"kind", "id", "severity", "title", "evidence", "remedy"} records
`recipe check` and `bench` print, JSON and SARIF like every finding), and the one preflight both run.

  memory-fits          info   the share is free now and the launch fits inside it
  memory-fits-with     warn   it starts only with the settings named in the remedy
  memory-does-not-fit  error  by how much, and what holds the rest
  memory-unknown       info   the box's memory could not be read
"""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.memory.have import SERVER_PROCESSES, Have, read_have
from sparkdoctor.memory.need import launch_need
from sparkdoctor.memory.verdict import FITS, FITS_WITH, NO_FIT, Verdict, gib, judge
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.text import with_remedy

SEVERITY = {FITS: "info", FITS_WITH: "warn", NO_FIT: "error"}


def preflight(recipe: Recipe, model_folder: str | Path, have: Have | None = None) -> Verdict:
    """The verdict for launching `recipe` with the checkpoint in `model_folder` on this box now."""
    have = read_have() if have is None else have
    gpu = "NVIDIA GB10" if have.unified else "NVIDIA GPU"
    need = launch_need(recipe, model_folder, have.pool_bytes or 0, gpu)
    if recipe.container and have.limit_bytes is not None:
        # the server starts in its runtime's cgroup (docker's, podman's), not in this process's: its limit does not bind
        need.notes.append(f"the server runs in a container of image {recipe.container}, in its runtime's cgroup: the memory "
                          f"limit of the cgroup this runs in ({gib(have.limit_bytes)}) does not bound it")
        have.limit_bytes = have.limit_used_bytes = None
    return judge(need, have)


def evidence(verdict: Verdict) -> list[str]:
    need, have = verdict.need, verdict.have
    lines = [f"{p.name}: {gib(p.bytes)} ({p.how}: {p.source})" for p in need.parts if p.bytes]
    lines += [f"{name} = {s.value} ({s.source})" for name, s in need.settings.items()]
    if have.pool_bytes:
        server = (f" and {gib(have.server_processes_bytes)} kept for the server's own processes (Python, torch, vLLM's host side: "
                  "an estimate; on unified memory they take from the same pool)") if have.server_processes_bytes else ""
        lines.append(f"the box: {gib(have.pool_bytes)} in all, {gib(have.available_bytes or 0)} available, "
                     f"{gib(have.usable_bytes or 0)} usable after the OS reserve ({have.os_reserve_source}){server}; NVML: {have.nvml}")
    if have.limit_bytes is not None:
        lines.append(f"the memory cgroup this runs in (and a launch from here starts in) is limited to {gib(have.limit_bytes)}, "
                     f"{gib(have.limit_used_bytes or 0)} of it used, {gib(SERVER_PROCESSES)} kept for the server's own processes "
                     "(Python, torch, vLLM's host side: an estimate): at most "
                     f"{gib(max(0, have.limit_bytes - (have.limit_used_bytes or 0) - SERVER_PROCESSES))} is usable whatever the box has")
    lines += verdict.reasons
    lines += [f"held: {h.what}: {gib(h.bytes)}" for h in verdict.holding[:8]]
    lines += need.notes + have.errors
    return lines


def findings(verdict: Verdict) -> list[dict[str, object]]:
    """One finding for the verdict."""
    need = verdict.need
    length = verdict.max_model_len or need.setting("max_model_len")
    if verdict.outcome == FITS:
        title = (f"the launch fits now: {gib(verdict.share_bytes)} asked, {gib(verdict.usable_bytes or 0)} free; "
                 f"{verdict.full_length_seqs} sequence(s) of {length} tokens fit in the KV pool at once")
        remedy = "; ".join(verdict.remedies) or (f"nothing to change (the largest --gpu-memory-utilization that fits now is "
                                                 f"{verdict.largest_utilization})")
    elif verdict.outcome == FITS_WITH:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in verdict.settings.items())
        asked = (f"{gib(verdict.share_bytes)} asked, less than the {gib(verdict.least_bytes)} it needs"
                 if verdict.least_bytes > verdict.share_bytes else f"{gib(verdict.share_bytes)} asked")
        title = f"the launch does not fit as written ({asked}, {gib(verdict.usable_bytes or 0)} free): it fits with {flags}"
        remedy = "; ".join(verdict.remedies)
    elif verdict.outcome == NO_FIT:
        title = (f"the launch does not fit now: {gib(verdict.short_bytes)} short even at --max-num-seqs 1 "
                 f"(it needs {gib(need.fixed_bytes(1))} before its KV cache; {gib(verdict.usable_bytes or 0)} is free)")
        remedy = "; ".join(verdict.remedies) or "free memory first, or serve a smaller (more quantized) checkpoint"
    else:
        title = "the launch's memory could not be judged: " + "; ".join(verdict.reasons)[:300]
        remedy = "Run it on the box that launches it (it reads /proc/meminfo and the processes holding the GPU)."
    severity = SEVERITY.get(verdict.outcome, "info")
    return [{"kind": "memory", "id": f"memory-{verdict.outcome}", "severity": severity, "title": title,
             "evidence": evidence(verdict), "remedy": remedy}]


def unsized(why: str) -> list[dict[str, object]]:
    """The finding for a launch the verdict does not size (another server than vLLM, settings from a --config file)."""
    return [{"kind": "memory", "id": "memory-unknown", "severity": "info", "title": f"the launch's memory was not judged: {why}",
             "evidence": [why], "remedy": "Size it by hand, or write the sizing flags on the command line for vLLM."}]


def launch_refusal(verdict: Verdict) -> str | None:
    """One line saying why a launch is not started (it does not fit now as written), or None to go ahead."""
    if verdict.outcome not in (FITS_WITH, NO_FIT):
        return None
    (finding,) = findings(verdict)
    return f"memory preflight: {with_remedy(str(finding['title']), str(finding['remedy']))} (--force launches it anyway)"
