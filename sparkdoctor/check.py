"""The check service: Facts of a target (probed, or a snapshot) judged against the matrix.

Every verb that checks calls it (check, fix, fleet, report; bench, whatif, recipe check and the conclusions take
its first stage, the Facts, alone): `check(CheckRequest) -> CheckOutcome`, `collect(CheckRequest) -> Facts`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sparkdoctor import __version__
from sparkdoctor.arch import assumed
from sparkdoctor.collect import Collector, Context, run_collectors
from sparkdoctor.facts import Facts
from sparkdoctor.locations import cache_dir
from sparkdoctor.text import clip

if TYPE_CHECKING:
    from sparkdoctor.config import Config
    from sparkdoctor.findings import Report
    from sparkdoctor.matrix import Matrix
    from sparkdoctor.targets.interface import Target


@dataclass
class CheckRequest:
    """What one check judges, and how. Exactly one of `target` (probed now), `facts` (judged as they are, a fleet
    node's or a loaded snapshot's; --arch applies) and `snapshot` (a saved file: --arch applies, host health is
    another moment's and is not judged)."""

    target: Target | None = None
    facts: Facts | None = None
    snapshot: Path | None = None
    matrix: Path | Matrix | None = None  # a folder or file, or one already loaded (a fleet judges many nodes)
    fixes: Path | None = None  # the fix definitions whose ids the matrix may name (default: the bundled ones)
    strict_fixes: bool = False  # fix: every fix id the matrix names must be one of `fixes` (check only shows them)
    arch: str | None = None
    constraint_files: list[Path] = field(default_factory=list)
    kernels: bool = True
    use_cache: bool = True
    timeout: float = 20.0  # per collector that names no limit of its own
    deadline: float | None = None  # time.monotonic() by which collection must end (--timeout)
    progress: Callable[[str], None] | None = None  # told each collector's name as it finishes
    prestarted: Mapping[str, object] = field(default_factory=dict)  # probes started early, by scratch key
    fail_on: str | None = None  # default: the config's, else "error"
    ignore: Sequence[str] = ()
    config: Config | None = None  # its ignores and fail_on join the request's; its silenced findings are named
    save_facts: Path | None = None  # the probed Facts written here (check --save-facts), before they are judged


@dataclass
class CheckOutcome:
    facts: Facts
    matrix: Matrix
    report: Report
    notes: list[str]


def check(request: CheckRequest) -> CheckOutcome:
    """The report on the request's target (or Facts). A bad matrix or config fails before anything is probed."""
    from sparkdoctor.config import Config, refuse_bare_errors
    from sparkdoctor.errors import UsageError
    from sparkdoctor.findings import build_report
    from sparkdoctor.matrix import Matrix, load

    matrix = request.matrix if isinstance(request.matrix, Matrix) else load(request.matrix, request.fixes, request.strict_fixes)
    cfg = request.config or Config()
    refuse_bare_errors(cfg, matrix)
    facts = collect(request)
    if request.save_facts is not None and request.target is not None:
        try:
            facts.save(request.save_facts)
        except OSError as exc:
            raise UsageError(f"--save-facts {request.save_facts}: {exc.strerror or exc}") from None
    notes = _unknown_ignores(matrix, request.ignore, cfg)
    notes += matrix.notes()  # `matrix update` installed one and it cannot be used
    notes += target_notes(request.target, facts)
    report = build_report(facts, matrix, fail_on=request.fail_on or cfg.fail_on or "error", ignore={*request.ignore, *cfg.ignore})
    by_config = [i for i in report.ignored if i in cfg.ignore]
    if by_config:  # the file that silenced findings, named wherever the count is shown
        notes.append(f"{cfg.path} ignored {len(by_config)}: "
                     + ", ".join(f"{i} ({clip(cfg.ignore[i], 200)})" if cfg.ignore[i] else i for i in by_config))
    return CheckOutcome(facts, matrix, report, notes)


def collect(request: CheckRequest) -> Facts:
    """The request's Facts: its target probed, its snapshot read, or its Facts; --arch applied to the last two."""
    if request.target is not None:
        return _collect(request.target, request)
    if request.snapshot is not None:
        return mark_not_live(apply_arch_override(Facts.load(request.snapshot), request.arch))
    assert request.facts is not None, "a CheckRequest names a target, Facts or a snapshot"
    return apply_arch_override(request.facts, request.arch)


SHOWN_UNKNOWN = 5  # unknown ignore ids named one per line, per source; the rest counted


def _unknown_ignores(matrix: Matrix, ignore: Sequence[str], cfg: Config) -> list[str]:
    """An ignore that names no entry ignores nothing: say so (a warning, not an error, so a config shared by
    boxes on different matrix versions keeps working). probe-<id>, requires-<component>-..., files-missing-<dist>,
    no-metadata-<dist>, no-record-<dist>, no-serving-stack and fix-unfinished come from the engine, not the matrix, and are always accepted."""
    from sparkdoctor.findings import ENGINE_FINDING_PREFIXES

    known = {e.id for e in matrix.entries}
    notes = []
    for source, ids in (("--ignore", ignore), (f"{cfg.path}: ignore", cfg.ignore)):
        unknown = [i for i in ids if i not in known and not i.startswith(ENGINE_FINDING_PREFIXES)]
        notes += [f"{source} {clip(entry_id, 100)!r}: no matrix entry has this id; it ignores nothing (see `sparkdoctor "
                  "matrix list`)" for entry_id in unknown[:SHOWN_UNKNOWN]]
        if len(unknown) > SHOWN_UNKNOWN:  # a file that names thousands must not bury the log
            notes.append(f"{source}: {len(unknown) - SHOWN_UNKNOWN:,} more ids that no matrix entry has; they ignore nothing")
    return notes


def target_notes(target: Target | None, facts: Facts) -> list[str]:
    """The warnings about the target itself that check prints on stderr (and fix, planning for the same target)."""
    target = getattr(target, "inner", target)  # fix --env-file wraps the target it names
    return _copied_venv(target) + own_environment(target, facts)


def _copied_venv(target: Target | None) -> list[str]:
    """A venv copied or moved keeps its scripts' first lines: `vllm serve` there runs the old place's interpreter
    and packages, not the ones this check judged. Said for a local target whose bin/ has such scripts."""
    from sparkdoctor.targets.local import PythonTarget, scripts_elsewhere

    if not isinstance(target, PythonTarget):
        return []
    found = scripts_elsewhere(target.python)
    if not found:
        return []
    names = sorted(found, key=lambda n: (n not in ("vllm", "pip", "pip3", "ray", "sparkrun"), n))
    other = found[names[0]]
    return [f"{len(found)} script(s) in {Path(target.python).parent} run another interpreter ({other}), "
            f"e.g. {', '.join(names[:4])}: this venv was copied or moved, so they run that environment's packages, "
            "not the ones judged here; run them as `python -m ...`, reinstall the packages that installed them "
            "(`python -m pip install --force-reinstall --no-deps PACKAGE`), or make the venv anew"]


def own_environment(target: Target | None, facts: Facts) -> list[str]:
    """No --python and no active venv: the target is the interpreter sparkdoctor runs in. Installed as the README says
    (pipx, uv tool), that is sparkdoctor's own environment, which serves nothing: said when it holds none of the stack."""
    from sparkdoctor.findings import no_stack_finding
    from sparkdoctor.requires import COMPONENTS
    from sparkdoctor.targets.local import PythonTarget

    if not isinstance(target, PythonTarget) or target.chosen_by != "current interpreter" or not no_stack_finding(facts):
        return []
    return [f"the target is the interpreter sparkdoctor runs in ({target.python}), as no --python was given and no "
            f"virtual environment is active; it holds none of {', '.join(COMPONENTS)}: to judge the environment that "
            "serves, pass --python with its interpreter or folder, or activate it"]


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

        kit = toolkits.COLLECTOR
    else:
        from sparkdoctor.collect import toolkits_container

        kit = toolkits_container.COLLECTOR
    found = [targetenv.COLLECTOR, gpu.COLLECTOR, kit, constraints.COLLECTOR, capabilities.COLLECTOR, host_health.COLLECTOR]
    if kernels:  # compile probes: seconds cold, cached warm
        from sparkdoctor import kernels as ptx_kernels
        from sparkdoctor.collect import cutedsl

        found += [ptx_kernels.COLLECTOR if shares_files else toolkits_container.KERNELS_COLLECTOR, cutedsl.COLLECTOR]
    return found


def _collect(target: Target, request: CheckRequest) -> Facts:
    facts = Facts(tool={"name": "sparkdoctor", "version": __version__, "host_python": sys.version.split()[0]})
    facts.target = target.describe()
    shares_files = getattr(target, "shares_files", True)
    if not shares_files:
        facts.container = dict(getattr(target, "info", None) or {}) or None
    # Until the GPU collector says otherwise (and if it fails): the GB10 arch, marked as assumed.
    facts.arch = {"value": request.arch, "source": "given"} if request.arch else assumed("GPU detection did not finish")
    ctx = Context(
        target=target,
        facts=facts,
        arch_override=request.arch,
        constraint_files=list(request.constraint_files),
        # a container's probe caches live in a folder of its own, carried in and out (target_container)
        cache_dir=cache_dir() if shares_files else getattr(target, "cache_root", None),
        use_cache=request.use_cache,
        kernels=request.kernels,
        timeout=request.timeout,
        deadline=request.deadline,
        progress=request.progress,
    )
    ctx.scratch.update(request.prestarted)
    run_collectors(ctx, collectors(request.kernels, shares_files))
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
