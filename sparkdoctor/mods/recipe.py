"""The mods a recipe names, judged as recipe findings (for `recipe check`, and bench before it launches).

eugr/spark-vllm-docker recipes list mod folders under `mods:` (paths from the repository root, where
run-recipe.sh runs; the recipe itself sits in recipes/); sparkrun recipes list patch files under `patches:`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkdoctor.errors import TargetUnprobeable
from sparkdoctor.mods.images import image_tree
from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import FileVerdict, ModError, Verdict
from sparkdoctor.mods.trees import Tree, venv_tree
from sparkdoctor.recipes.model import Recipe


def locate(recipe: Recipe, written: str) -> Path | None:
    """Where a named mod is: beside the recipe, at the repository root above it, or in the working folder. A recipe
    is third-party data: a mod it names by an absolute path, `~` or `..` (`/`, `~/.ssh`, `../../..`), or by a link
    that leads out of the folder it was found in, is a ModError, never walked, copied into the sandbox or run."""
    path = Path(written)
    if path.is_absolute() or written.startswith("~") or ".." in path.parts:
        raise ModError(f"{written}: a recipe names its mods inside its repository (mods/NAME); an absolute path, ~ or .. "
                       "is not judged")
    base = Path(recipe.source_path).resolve().parent if getattr(recipe, "source_path", None) else Path.cwd()
    for root in (base, base.parent, Path.cwd()):
        if (root / path).exists():
            real = os.path.realpath(root / path)
            if not Path(real).is_relative_to(os.path.realpath(root)):  # `ln -s ~/x mods/x` in a cloned repository
                raise ModError(f"{written}: a link to a place outside the recipe's repository ({real}); a mod there is "
                               "not judged")
            return root / path
    return None


def _finding(fid: str, severity: str, title: str, evidence: list[str], remedy: str) -> dict[str, object]:
    return {"kind": "mod", "id": fid, "severity": severity, "title": title, "evidence": evidence, "remedy": remedy}


def mod_findings(recipe: Recipe, tree: Tree) -> list[dict[str, object]]:
    """One finding per mod that fails, is already upstream, or cannot be judged (a mod that applies says nothing)."""
    out = []
    for written in recipe.mods():
        try:
            path = locate(recipe, written)
        except ModError as exc:
            out.append(_finding(f"mod-unjudged:{written}", "info", f"mod {written}: cannot judge it", [str(exc)],
                                "Name the mod by its path in the recipe's repository, as run-recipe.sh does."))
            continue
        if path is None:
            out.append(_finding(f"mod-missing:{written}", "error", f"mod {written} is not there: the launch would stop",
                                [f"looked beside {recipe.source_path}, one folder up, and in {Path.cwd()}"],
                                "Fix the path in the recipe, or run from the repository the recipe belongs to."))
            continue
        try:
            result = judge_mod(path, tree)
        except ModError as exc:
            out.append(_finding(f"mod-unjudged:{written}", "info", f"mod {written}: cannot judge it", [str(exc)],
                                "Check the mod by hand (sparkdoctor mods check)."))
            continue
        evidence = [f"{f.path or f.source}: {f.verdict.value}: {f.detail}" for f in result.files] or [result.detail]
        if result.verdict is Verdict.FAILS:
            out.append(_finding(f"mod-fails:{result.name}", "error",
                                f"mod {result.name} does not apply to {tree.label}: the launch would fail",
                                [result.detail, *evidence],
                                "Update the mod for this release (its context moved or is gone), or drop it if the "
                                "release fixed what it worked around."))
        elif result.verdict in (Verdict.SUPERSEDED, Verdict.ALREADY_APPLIED):
            out.append(_finding(f"mod-superseded:{result.name}", "warn",
                                f"mod {result.name} is upstream already in {tree.label}: a stale workaround",
                                evidence, "Drop the mod from the recipe; then rerun to measure without it."))
        elif result.verdict is Verdict.CANNOT_TELL:
            out.append(_finding(f"mod-unjudged:{result.name}", "info", f"mod {result.name}: cannot judge it here",
                                [result.detail], "Run the mod against a copy of the image by hand, or make it a diff."))
    return out


def stale_mods(recipe: Recipe, tree: Tree) -> list[dict[str, Any]]:
    """The recipe's mods that upstream made already in `tree` (superseded, or already applied): stale workarounds,
    each with the files and lines that show it. A mod that is missing, fails or cannot be judged is not stale
    (recipe check says those); a target whose files cannot be read is a ModError."""
    out = []
    for written in recipe.mods():
        try:
            path = locate(recipe, written)
            result = judge_mod(path, tree) if path is not None else None
        except ModError:
            continue
        if result is None or result.verdict not in (Verdict.SUPERSEDED, Verdict.ALREADY_APPLIED):
            continue
        files = [f for f in result.files if f.verdict in (Verdict.SUPERSEDED, Verdict.ALREADY_APPLIED)]
        out.append({"name": result.name, "written": written, "path": str(path), "verdict": result.verdict.value,
                    "target": tree.label, "files": [f.to_dict() for f in files],
                    "evidence": [_cited(f) for f in files] or [result.detail]})
    return out


def _cited(f: FileVerdict) -> str:
    """`vllm/x.py, lines 12-14: superseded: ...`: the file and the lines that show the change upstream."""
    if not f.lines or f"lines {f.lines[0]}-{f.lines[1]}" in f.detail:
        return f"{f.path}: {f.verdict.value}: {f.detail}"
    lines = f"line {f.lines[0]}" if f.lines[0] == f.lines[1] else f"lines {f.lines[0]}-{f.lines[1]}"
    return f"{f.path}, {lines}: {f.verdict.value}: {f.detail}"


def launch_gate(recipe: Recipe, python: str | None, local: bool, progress: Callable[[str], None], runtime: str | None = None) -> str | None:
    """Before bench launches a recipe: why it must not (a mod that would fail on the target), or None. A container
    recipe's mods are judged against its image's files (sparkdoctor.mods.images), a --local one's against the
    interpreter's."""
    if not recipe.mods():
        return None
    image = getattr(recipe, "container", None) if not local else None
    progress(f"judging {recipe.name}'s mods against the {'image ' + image if image else 'target'}'s files")
    try:
        if image:
            with image_tree(str(image), runtime=runtime) as tree:
                found = mod_findings(recipe, tree)
        else:
            found = mod_findings(recipe, venv_tree(python or sys.executable))
    except (ModError, TargetUnprobeable) as exc:
        progress(f"the mods could not be judged: {exc}")
        return None
    failing: list[dict[str, Any]] = [f for f in found if f["severity"] == "error"]  # bench refuses to launch on these
    if failing:
        first = failing[0]
        return f"{recipe.name}: not launched: {first['title']} ({first['evidence'][0] if first['evidence'] else ''})"
    progress("note: sparkdoctor launches the recipe's command as it is; its mods are judged, not applied")
    return None
