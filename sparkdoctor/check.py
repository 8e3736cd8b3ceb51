"""`sparkdoctor check`: collect Facts (or load a snapshot), judge them against the matrix."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import __version__
from sparkdoctor.arch import assumed
from sparkdoctor.collect import Collector, Context, run_collectors
from sparkdoctor.facts import Facts
from sparkdoctor.locations import cache_dir
from sparkdoctor.targets.local import Target


@dataclass
class CheckOptions:
    arch: str | None = None
    constraint_files: list[Path] = field(default_factory=list)
    kernels: bool = True
    use_cache: bool = True
    timeout: float = 20.0  # per collector that names no limit of its own
    deadline: float | None = None  # time.monotonic() by which collection must end (--timeout)
    progress: Callable[[str], None] | None = None
    prestarted: dict[str, Any] = field(default_factory=dict)  # probes started early, by scratch key


def collectors(kernels: bool, shares_files: bool = True) -> list[Collector]:
    """The collectors of a check. A target whose files are not the host's (a container) has its ptxas
    found and compiled with inside it (toolkits_container); the GPU, driver and host health are the host's."""
    # Imported here so `sparkdoctor matrix ...` and `--facts` never pay for collector imports.
    from sparkdoctor.collect import (
        capabilities,
        constraints,
        gpu,
        host_health,
        targetenv,
    )

    if shares_files:
        from sparkdoctor.collect import toolkits
    else:
        from sparkdoctor.collect import toolkits_container as toolkits
    found = [targetenv.COLLECTOR, gpu.COLLECTOR, toolkits.COLLECTOR, constraints.COLLECTOR, capabilities.COLLECTOR,
             host_health.COLLECTOR]
    if kernels:  # compile probes: seconds cold, cached warm
        from sparkdoctor import kernels as ptx_kernels
        from sparkdoctor.collect import cutedsl

        found += [ptx_kernels.COLLECTOR if shares_files else toolkits.KERNELS_COLLECTOR, cutedsl.COLLECTOR]
    return found


def collect_facts(target: Target, options: CheckOptions) -> Facts:
    facts = Facts(tool={"name": "sparkdoctor", "version": __version__, "host_python": sys.version.split()[0]})
    facts.target = target.describe()
    shares_files = getattr(target, "shares_files", True)
    if not shares_files:
        facts.container = dict(getattr(target, "info", None) or {}) or None
    # Until the GPU collector says otherwise (and if it fails): the GB10 arch, marked as assumed.
    facts.arch = {"value": options.arch, "source": "given"} if options.arch else assumed("GPU detection did not finish")
    ctx = Context(
        target=target,
        facts=facts,
        arch_override=options.arch,
        constraint_files=list(options.constraint_files),
        # a container's probe caches live in a folder of its own, carried in and out (target_container)
        cache_dir=cache_dir() if shares_files else getattr(target, "cache_root", None),
        use_cache=options.use_cache,
        kernels=options.kernels,
        timeout=options.timeout,
        deadline=options.deadline,
        progress=options.progress,
    )
    ctx.scratch.update(options.prestarted)
    run_collectors(ctx, collectors(options.kernels, shares_files))
    _note_unfinished_fix(facts)
    return facts


def _note_unfinished_fix(facts: Facts) -> None:
    """A `fix` of this target that was killed half-way leaves one small state file (sparkdoctor/unsettled.py):
    reading it is all check does (no journal is opened), and it becomes an error finding."""
    from sparkdoctor import unsettled

    found = unsettled.for_target(facts.target or {})
    if found is not None:
        facts.target = {**(facts.target or {}), "fix_unsettled": unsettled.message(found)}


def apply_arch_override(facts: Facts, arch: str | None) -> Facts:
    """--arch on a saved snapshot: evaluate it as if it ran on that GPU; keep what was detected.
    Without --arch, a snapshot with no arch (an older one) gets the assumption in build_report."""
    if arch:
        detected = facts.arch.get("value") if facts.arch.get("source") == "detected" else facts.arch.get("detected")
        facts.arch = {"value": arch, "source": "given", **({"detected": detected} if detected else {})}
    return facts


def mark_not_live(facts: Facts) -> Facts:
    """A snapshot's host health is another moment (often another box): kept for reading, never judged."""
    if isinstance(facts.host_health, dict):
        facts.host_health = {**facts.host_health, "live": False}
    return facts
