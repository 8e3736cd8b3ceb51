"""The whatif pipeline: today's Facts, the upgrade resolved by the target's pip, the Facts it would give, both
judged by the matrix; and, when asked, the recipe, the ledger's conclusions, the CuTe DSL probes and the PTX probes
(with each ptxas the upgrade moves), today and after. `judge_upgrade` is what `sparkdoctor whatif` (sparkdoctor/commands/whatif.py) calls once its options are
checked; it returns the WhatIf (sparkdoctor.whatif.judge) the renderers draw."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sparkdoctor.check import CheckRequest, apply_arch_override, collect
from sparkdoctor.conclusions.recipe_check import EnvTarget, box_env, vllm_flags
from sparkdoctor.errors import InputError, TargetUnprobeable, UsageError
from sparkdoctor.facts import Facts
from sparkdoctor.ledger import Ledger, default_path
from sparkdoctor.matrix import load
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.mods.model import ModError
from sparkdoctor.mods.recipe import mod_findings
from sparkdoctor.mods.trees import (
    ContainerTree,
    ReleaseTree,
    Tree,
    UpgradedTree,
    venv_tree,
)
from sparkdoctor.recipes import load as load_recipe
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.released import Reader
from sparkdoctor.targets.choose import refuse_bad_target_options, resolve_target
from sparkdoctor.targets.interface import Target
from sparkdoctor.whatif.hypothetical import hypothetical_facts, released_flags
from sparkdoctor.whatif.judge import (
    ModsDelta,
    ProbeComparison,
    RecipeWhatIf,
    WhatIf,
    compare,
    compare_recipe,
    stale_conclusions,
)
from sparkdoctor.whatif.probe import probe_cutedsl
from sparkdoctor.whatif.ptx import probe_ptx
from sparkdoctor.whatif.resolve import Change, Resolution, check_specs, resolve_upgrade


@dataclass
class UpgradeQuestion:
    """What to judge: the requirements, the target (or a snapshot of it), and what else to look at."""

    specs: list[str]
    python: str | None = None
    container: str | None = None
    container_python: str | None = None
    facts_file: Path | None = None
    matrix: Path | None = None
    arch: str | None = None
    read: bool = True  # read the new releases' files (capabilities, vLLM's flags)
    recipe: str | None = None
    ledger: Path | None = None
    probe: bool = False
    no_deps: bool = False  # resolve as `pip install --no-deps` would: only the named distributions change
    allow_url: bool = False  # a URL or path requirement is judged too (refused otherwise: resolve.check_specs)


def judge_upgrade(q: UpgradeQuestion, progress: Callable[[str], None] = lambda message: None) -> WhatIf:
    """The upgrade judged (`progress` hears of each stage). A MatrixError, FactsError, TargetError, TargetUnprobeable,
    ResolveError, RecipeError or LedgerFailure says itself (and its exit code)."""
    check_specs(q.specs, q.allow_url)  # before anything runs: no SPEC becomes a pip option
    matrix = load(q.matrix)
    refuse_bad_target_options(q.python, q.container, q.container_python, q.facts_file is not None)
    target = resolve_target(q.python, q.container, q.container_python)
    resolver = target  # pip's dry run never gets the recipe's env (a PIP_LOG or an index of its choosing)
    recipe = None
    recipe_env: dict[str, str] = {}
    if q.recipe is not None:
        recipe = load_recipe(q.recipe, {})  # a RecipeError says which file and field (exit 2)
        recipe_env = dict(recipe.env)
        target = EnvTarget(target, recipe_env)  # as `recipe check`: the capabilities probe reads the recipe's VLLM_* names
    interpreter = str((target.describe() or {}).get("python") or q.python or sys.executable)
    notes: list[str] = []
    if q.facts_file is not None:
        today = collect(CheckRequest(facts=Facts.load(q.facts_file), arch=q.arch))
        if q.python is None:
            _refuse_other_prefix(q.facts_file, today, interpreter)
    else:
        progress("probing the target")
        today = apply_arch_override(collect(CheckRequest(target=target, arch=q.arch, kernels=False)), q.arch)
        if not q.probe:
            notes.append("no kernel probe was compiled (the target is probed as `check --no-kernels`): a probe-* finding "
                         "of check is in none of these lists; --probe compiles the probes with the upgrade's files")
        if recipe_env:  # the box's own env stays the box's: the recipe's variables judge only its capabilities
            today.env = box_env(today.env, recipe_env)
        if today.packages is None:  # check's exit 3: no today to judge an upgrade against, and pip is not asked
            why = next((e.get("error") for e in today.errors if isinstance(e, dict) and e.get("collector") == "target"), None)
            raise TargetUnprobeable(f"the target could not be probed: {why or 'its packages could not be read'}")

    seen = Resolution()
    ledger = _ledger(q.ledger, notes)  # before pip's dry run (minutes for vLLM): a ledger that cannot be read says so now
    reader = None
    try:
        progress("resolving the upgrade (a dry run of the target's installer)")
        changes = resolve_upgrade(resolver, interpreter, q.specs, today, q.no_deps, seen)  # a ResolveError carries its exit code (2)
        if q.read:
            machine = str((today.host or {}).get("machine") or "aarch64")
            platform = "linux-x86_64" if machine in ("x86_64", "amd64") else "linux-aarch64"
            target_py = ".".join(str((today.target or {}).get("version") or "3.12").split(".")[:2])
            reader = Reader(platform, target_py)  # the wheels the target itself would install
        progress("reading the new releases' files" if reader is not None else "judging the upgrade")
        predicted = hypothetical_facts(today, changes, reader, notes, recipe_env)
        result = compare(today, predicted, matrix, q.specs, changes, notes)
        result.target, result.installer, result.pip_warnings = interpreter, seen.installer, seen.warnings
        if recipe is not None:
            result.recipe = _recipe(recipe, target, matrix, today, predicted, changes, reader, notes)
        result.stale = stale_conclusions(ledger, interpreter, today, predicted) if ledger is not None else None
        if q.probe:
            python = (getattr(target, "shares_files", True) and base_interpreter(today)) or sys.executable
            progress("compiling the probes with what the upgrade would put on disk")
            result.probe = _probe(today, predicted, changes, python)
    finally:
        if reader is not None:
            reader.close()
        if ledger is not None:
            ledger.close()
    return result


def _refuse_other_prefix(snapshot: Path, today: Facts, interpreter: str) -> None:
    """pip resolves in a real environment, today's versions come from the snapshot: a snapshot of another prefix than
    the default interpreter's (sparkdoctor's own, or $VIRTUAL_ENV) gave a prediction of the wrong environment
    ("nothing would change" where the snapshot's box would change). --python names the one to resolve in."""
    prefix = str((today.target or {}).get("prefix") or "")
    here = Path(interpreter).parent.parent
    if not prefix or Path(prefix).resolve() != here.resolve():
        raise UsageError(f"--facts {snapshot} is a snapshot of {prefix or 'an environment it does not name'}, and pip would resolve "
                         f"the upgrade in {here}: give --python, the interpreter of the environment to resolve in")


def _recipe(recipe: Recipe, target: Target, matrix: Matrix, today: Facts, predicted: Facts, changes: list[Change], reader: Reader | None,
            notes: list[str]) -> RecipeWhatIf:
    """The recipe's findings today and after: vLLM's flags today from the target, after from the new release's files;
    its env vars judged against the capabilities read with the recipe's env (today's probe, the new release's files)."""
    flags_today = vllm_flags(target)
    flags_after = flags_today
    vllm = next((c for c in changes if c.name == "vllm"), None)
    if vllm is not None:
        flags_after = released_flags(reader, vllm) if reader is not None else None
        if flags_after is None:
            notes.append(f"vllm {vllm.new}: its serve flags were not read; the recipe's flags are not judged after the upgrade")
    judged = compare_recipe(recipe, matrix, today, predicted, flags_today, flags_after)
    judged.mods = _mods(recipe, target, changes, notes)
    return judged


def _mods(recipe: Recipe, target: Target, changes: list[Change], notes: list[str]) -> ModsDelta | None:
    """The recipe's mods judged on today's files and on the files the upgrade would install (sparkdoctor.mods):
    which mods the upgrade breaks, and which it makes stale (upstream already)."""
    if not recipe.mods():
        return None
    python = getattr(target, "python", None)
    if not python:
        notes.append("the recipe's mods are not judged: the target names no interpreter")
        return None
    try:  # a container's files are read through the container CLI
        today_tree: Tree = venv_tree(str(python)) if getattr(target, "shares_files", True) else ContainerTree(getattr(target, "inner", target))
        tops = {c.name.replace("-", "_") for c in changes} | {c.name.split("-")[0] for c in changes}
        after_tree = UpgradedTree(ReleaseTree([(c.name, c.new) for c in changes]), today_tree, tops)
        before = {f["id"]: f for f in mod_findings(recipe, today_tree)}
        after = {f["id"]: f for f in mod_findings(recipe, after_tree)}
    except ModError as exc:
        notes.append(f"the recipe's mods could not be judged: {exc}")
        return None
    return ModsDelta([f for i, f in after.items() if i not in before], [f for i, f in before.items() if i not in after],
                     [f for i, f in after.items() if i in before])


def base_interpreter(facts: Facts) -> str | None:
    """The interpreter a venv target was made from, of the target's version, for --probe's throwaway venv: uv asks
    the interpreter it is given about itself with site, so the target's own would run its .pth lines and
    sitecustomize.py. None (sparkdoctor's own, whose startup code already ran here) when the target is no venv."""
    t = facts.target or {}
    major_minor = ".".join(str(t.get("version") or "").split(".")[:2])
    if not t.get("is_venv") or not t.get("base_prefix") or not major_minor:
        return None
    base = Path(str(t["base_prefix"])) / "bin" / f"python{major_minor}"
    return str(base) if base.is_file() and os.access(base, os.X_OK) else None


def _probe(today: Facts, predicted: Facts, changes: list[Change], python: str) -> ProbeComparison:
    """--probe: the CuTe DSL probes compiled in a throwaway venv with today's and the proposed cutlass-dsl set;
    the PTX probes compiled by each ptxas the upgrade moves (whatif/ptx.py)."""
    value = str((predicted.arch or {}).get("value") or "")
    arch = value if value.startswith("sm_") else "sm_121a"  # no GPU and no --arch: the Spark's arch, the DSL needs one
    if any(c.name.startswith("nvidia-cutlass-dsl") for c in changes):
        out = ProbeComparison(arch, probe_cutedsl(today, arch, python), probe_cutedsl(predicted, arch, python))
    else:
        out = ProbeComparison(arch, note="the upgrade does not change cutlass-dsl: no CuTe DSL kernel to compile anew")
    py = ".".join(str((today.target or {}).get("version") or "").split(".")[:2]) or None
    out.ptx = probe_ptx(changes, arch, py)
    return out


def _ledger(ledger_path: Path | None, notes: list[str]) -> Ledger | None:
    """The ledger whose conclusions the upgrade may make stale, opened read-only (a LedgerError says itself, exit 5);
    None (said) when there is none."""
    path = ledger_path or default_path()
    if not path.exists():
        if ledger_path is not None:
            raise InputError(f"ledger {path}: no such file")
        notes.append(f"no ledger at {path}: no stored conclusion to judge")
        return None
    return Ledger(path, read_only=True)
