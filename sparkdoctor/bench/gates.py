"""The gates a recipe passes before bench launches it (sparkdoctor/bench/flow.py runs them in this order): its model
folder must be there, its mods must apply on the target, and a vLLM launch must fit in the memory free now. A gate that refuses raises RunFailed
(exit 4) with what judged it as finding records; one that passes hands back its verdict for the run's record."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from sparkdoctor.bench.failures import RunFailed
from sparkdoctor.recipes import Recipe

Progress = Callable[[str], None]


def at(recipe: Recipe, findings: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Finding records that name the recipe file they are about (SARIF locates them there)."""
    return [{**f, "path": str(recipe.source_path)} for f in findings]


def model_gate(recipe: Recipe, local: bool) -> None:
    """A model named by a path (`/`, `./`, `../`, `~`) that is not on this machine is not launched: vLLM takes it for a
    hub id and dies after its imports ("Repo id must be in the form ..."). A container's paths are the image's."""
    from sparkdoctor.memory.need import launches_vllm

    model = recipe.model
    if not model or (recipe.container and not local) or not launches_vllm(recipe.argv) or \
            model not in [str(a) for a in recipe.argv] or not model.startswith(("/", "./", "../", "~")):
        return
    try:
        there = Path(model).expanduser().exists()
    except (OSError, ValueError, RuntimeError):  # a name too long; `~user` with no such user
        there = False
    if not there:
        raise RunFailed(f"{recipe.name}: the model folder {model} is not on this machine; nothing was launched "
                        "(--set model=PATH names another)")


def mods_gate(recipe: Recipe, python: str | None, local: bool, runtime: str | None, progress: Progress) -> None:
    """A recipe whose mods would fail on the target is not launched (sparkdoctor.mods.recipe.launch_gate)."""
    from sparkdoctor.mods.recipe import launch_gate

    refusal = launch_gate(recipe, python, local, progress, runtime)
    if refusal:
        raise RunFailed(refusal)


def memory_gate(recipe: Recipe, model_dir: Path | None, force: bool, progress: Progress) -> list[dict[str, object]]:
    """A vLLM launch that does not fit in the memory free now is not started unless `force` (sparkdoctor/memory/);
    one whose checkpoint cannot be read (no local folder, no safetensors) is launched unjudged, and a server that is
    not vLLM is not sized by vLLM's rules. The verdict as a finding record ([] when not judged)."""
    from sparkdoctor.audit.errors import AuditError
    from sparkdoctor.bench.roofline import recipe_model_dir
    from sparkdoctor.memory.findings import findings, launch_refusal, preflight
    from sparkdoctor.memory.need import launches_vllm

    folder = str(model_dir) if model_dir is not None else recipe_model_dir(recipe)[0]
    if folder is None or not launches_vllm(recipe.argv):
        return []
    progress(f"memory preflight: sizing {recipe.name} against the memory free now")
    try:
        verdict = preflight(recipe, folder)
    except AuditError as exc:
        progress(f"memory preflight skipped: {exc}")
        return []
    refusal, judged = launch_refusal(verdict), findings(verdict)
    if refusal and not force:
        raise RunFailed(f"{recipe.name}: {refusal}", at(recipe, judged))
    if refusal:
        progress(f"{recipe.name}: launched with --force: {refusal}")
    return judged
