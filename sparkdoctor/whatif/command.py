"""What `sparkdoctor whatif` does once its options are parsed."""

from __future__ import annotations

import sys
from pathlib import Path

from sparkdoctor.cli_support import Fatal
from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK


def run_whatif(specs: list[str], python: str | None, facts_file: Path | None, matrix_path: Path | None, arch: str | None,
               fail_on: str, read: bool, fmt: str, recipe_ref: str | None = None, ledger_path: Path | None = None,
               container: str | None = None, container_python: str | None = None, probe: bool = False,
               no_deps: bool = False) -> int:
    from sparkdoctor.check import CheckOptions, apply_arch_override, collect_facts
    from sparkdoctor.facts import Facts
    from sparkdoctor.matrix import load
    from sparkdoctor.target.choose import resolve_target
    from sparkdoctor.whatif import (
        compare,
        hypothetical_facts,
        resolve_upgrade,
    )

    matrix = load(matrix_path)  # a MatrixError (2), FactsError (2) or ResolveError (2) says how the command ends
    from sparkdoctor.target.choose import refuse_bad_target_options

    refuse_bad_target_options(python, container, container_python, facts_file is not None)
    target = resolve_target(python, container, container_python)
    interpreter = str((target.describe() or {}).get("python") or python or sys.executable)
    if facts_file is not None:
        today = Facts.load(facts_file)
    else:
        today = collect_facts(target, CheckOptions(arch=arch, kernels=False))
    today = apply_arch_override(today, arch)
    changes = resolve_upgrade(target, interpreter, specs, today, no_deps)  # a ResolveError carries its exit code (2)
    notes: list[str] = []
    reader = None
    if read:
        from sparkdoctor.released import Reader

        machine = str((today.host or {}).get("machine") or "aarch64")
        platform = "linux-x86_64" if machine in ("x86_64", "amd64") else "linux-aarch64"
        target_py = ".".join(str((today.target or {}).get("version") or "3.12").split(".")[:2])
        reader = Reader(platform, target_py)  # the wheels the target itself would install
    try:
        predicted = hypothetical_facts(today, changes, reader, notes)
        result = compare(today, predicted, matrix, specs, changes, notes)
        if recipe_ref is not None:
            result.recipe = _recipe(recipe_ref, target, matrix, today, predicted, changes, reader, notes)
        result.stale = _stale(ledger_path, interpreter, today, predicted, notes)
        if probe:
            result.probe = _probe(today, predicted, changes, interpreter if getattr(target, "shares_files", True) else sys.executable)
    finally:
        if reader is not None:
            reader.close()
    code = EXIT_FINDINGS if result.gate(fail_on) else EXIT_OK
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        return emit_json("whatif", "whatif", result.to_dict(), code)
    from sparkdoctor.emit import emit_console

    emit_console(lambda console: _render(result, console))
    return code


def _recipe(recipe_ref: str, target, matrix, today, predicted, changes, reader, notes: list[str]) -> dict:
    """The recipe's findings today and after: vLLM's flags today from the target, after from the new release's files."""
    from sparkdoctor.conclusions.recipe_check import vllm_flags
    from sparkdoctor.recipes import load as load_recipe
    from sparkdoctor.whatif.hypothetical import released_flags
    from sparkdoctor.whatif.judge import compare_recipe

    recipe = load_recipe(recipe_ref, {})  # a RecipeError says which file and field (exit 2)
    flags_today = vllm_flags(target)
    flags_after = flags_today
    vllm = next((c for c in changes if c.name == "vllm"), None)
    if vllm is not None:
        flags_after = released_flags(reader, vllm) if reader is not None else None
        if flags_after is None:
            notes.append(f"vllm {vllm.new}: its serve flags were not read; the recipe's flags are not judged after the upgrade")
    judged = compare_recipe(recipe, matrix, today, predicted, flags_today, flags_after)
    judged["mods"] = _mods(recipe, target, changes, notes)
    return judged


def _mods(recipe, target, changes, notes: list[str]) -> dict | None:
    """The recipe's mods judged on today's files and on the files the upgrade would install (sparkdoctor.mods):
    which mods the upgrade breaks, and which it makes stale (upstream already)."""
    from sparkdoctor.mods import ModError
    from sparkdoctor.mods.recipe import mod_findings, named_mods
    from sparkdoctor.mods.trees import (
        ContainerTree,
        ReleaseTree,
        UpgradedTree,
        venv_tree,
    )

    if not named_mods(recipe):
        return None
    python = getattr(target, "python", None)
    if not python:
        notes.append("the recipe's mods are not judged: the target names no interpreter")
        return None
    try:  # a container's files are read through the container CLI
        today_tree = venv_tree(str(python)) if getattr(target, "shares_files", True) else ContainerTree(target)
        tops = {c.name.replace("-", "_") for c in changes} | {c.name.split("-")[0] for c in changes}
        after_tree = UpgradedTree(ReleaseTree([(c.name, c.new) for c in changes]), today_tree, tops)
        before = {f["id"]: f for f in mod_findings(recipe, today_tree)}
        after = {f["id"]: f for f in mod_findings(recipe, after_tree)}
    except ModError as exc:
        notes.append(f"the recipe's mods could not be judged: {exc}")
        return None
    return {"introduced": [f for i, f in after.items() if i not in before],
            "fixed": [f for i, f in before.items() if i not in after],
            "unchanged": [f for i, f in after.items() if i in before]}


def _probe(today, predicted, changes, python: str) -> dict:
    """--probe: the CuTe DSL probes compiled in a throwaway venv with today's and the proposed cutlass-dsl set;
    the PTX probes compiled by each ptxas the upgrade moves (whatif/ptx.py)."""
    from sparkdoctor.whatif.probe import probe_cutedsl
    from sparkdoctor.whatif.ptx import probe_ptx

    value = str((predicted.arch or {}).get("value") or "")
    arch = value if value.startswith("sm_") else "sm_121a"  # no GPU and no --arch: the Spark's arch, the DSL needs one
    out: dict = {"arch": arch}
    if any(c.name.startswith("nvidia-cutlass-dsl") for c in changes):
        out.update(today=probe_cutedsl(today, arch, python), after=probe_cutedsl(predicted, arch, python))
    else:
        out["note"] = "the upgrade does not change cutlass-dsl: no CuTe DSL kernel to compile anew"
    py = ".".join(str((today.target or {}).get("version") or "").split(".")[:2]) or None
    out["ptx"] = probe_ptx(changes, arch, py)
    return out


def _stale(ledger_path: Path | None, python: str, today, predicted, notes: list[str]) -> list | None:
    """Conclusions the upgrade would make stale; None (said) when there is no ledger to read."""
    from sparkdoctor.ledger import Ledger, default_path
    from sparkdoctor.whatif.judge import stale_conclusions

    path = ledger_path or default_path()
    if not path.exists():
        if ledger_path is not None:
            raise Fatal(f"ledger {path}: no such file")
        notes.append(f"no ledger at {path}: no stored conclusion to judge")
        return None
    return stale_conclusions(Ledger(path), python, today, predicted)  # a LedgerError says itself (exit 5)


def _render(result, console) -> None:
    if not result.changes:
        console.print(f"nothing would change: {' '.join(result.specs)} is already satisfied")
    for c in result.changes:
        console.print(f"  {c.name}: {c.old or '(new)'} -> {c.new}")
    for label, rows in (("introduced", result.introduced), ("fixed", result.fixed), ("unchanged", result.unchanged)):
        for f in rows:
            console.print(f"{label:>10}  [{f['severity']}] {f['id']}: {f['title']}")
    for f in result.cannot_tell:
        console.print(f"cannot tell  [{f['severity']}] {f['id']}: unknown after the upgrade ({'; '.join(f['unknown'])})")
    if result.recipe is not None:
        r = result.recipe
        for label in ("introduced", "fixed"):
            for f in r[label]:
                console.print(f"recipe {r['name']}: {label} [{f['severity']}] {f['id']}: {f['title']}")
        console.print(f"recipe {r['name']}: {len(r['introduced'])} introduced, {len(r['fixed'])} fixed, {len(r['unchanged'])} unchanged")
        mods = r.get("mods") or {}
        for label, words in (("introduced", "the upgrade breaks or makes stale"), ("fixed", "the upgrade settles")):
            for f in mods.get(label) or []:
                console.print(f"mods: {words} [{f['severity']}] {f['id']}: {f['title']}", markup=False, highlight=False)
    for s in result.stale or []:
        what = "; ".join(str(c.get("text") or c.get("what")) for c in s["changes"][:3])
        console.print(f"would become stale: conclusion {s['conclusion']} ({what}): plan `sparkdoctor rerun {s['conclusion']}` after the upgrade")
    for when in ("today", "after"):
        p = (result.probe or {}).get(when) or {}
        for k in p.get("kernels", []):
            console.print(f"probe {when:>5}  {k['kernel']} for {result.probe['arch']}: {k['verdict']} ({k['detail']})")
        if p.get("error"):
            console.print(f"probe {when:>5}  {p['error']}")
    if (result.probe or {}).get("note"):
        console.print(f"probe  {result.probe['note']}")
    ptx = (result.probe or {}).get("ptx") or {}
    for when in ("today", "after"):
        for row in ptx.get(when) or []:
            which = f"{row['dist']} {row.get('version') or '(none)'}" + (f" {row['member']} (ptxas {row.get('ptxas_version')})" if row.get("member") else "")
            if row.get("error") or row.get("note"):
                console.print(f"ptx {when:>5}  {which}: {row.get('error') or row.get('note')}", markup=False, highlight=False)
            for k in row.get("kernels") or []:
                console.print(f"ptx {when:>5}  {k['probe']} for {k['arch']} by {which}: {k['verdict']} ({k['detail']})",
                              markup=False, highlight=False)
    if ptx.get("note"):
        console.print(f"ptx  {ptx['note']}", markup=False, highlight=False)
    for note in result.notes:
        console.print(f"[dim]note: {note}[/]")
    console.print(f"{len(result.introduced)} introduced, {len(result.fixed)} fixed, {len(result.unchanged)} unchanged, "
                  f"{len(result.cannot_tell)} cannot tell · matrix: {result.matrix}")
