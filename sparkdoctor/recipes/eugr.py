"""eugr/spark-vllm-docker `recipes/*.yaml` (recipe_version "1"), resolved the way its run-recipe.py does.

What is kept exactly (see recipes/README.md for the sources): `command` is a Python str.format template
over `defaults` plus overrides (a missing key is an error naming it; `{{`/`}}` are literal braces);
overrides may set any default (run-recipe.py's five override flags are port, host, tensor_parallel,
gpu_memory_utilization, max_model_len); a solo run (one box, which is what sparkdoctor launches) forces
tensor_parallel to 1 unless it was overridden and drops `--distributed-executor-backend X`; env values
are rendered with str() (YAML 1 -> "1"); `env:` holding only a comment is empty. A cluster_only recipe
is not changed into a solo one: it needs "cluster".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sparkdoctor.recipes import resolve
from sparkdoctor.recipes.model import Recipe, RecipeError, flag_value, strip_flags

REQUIRED = ("name", "container", "command")
KNOWN = {"recipe_version", "name", "description", "model", "container", "command", "defaults", "env", "mods",
         "build_args", "cluster_only", "solo_only", "benchmark"}
OVERRIDES = {"port", "host", "tensor_parallel", "gpu_memory_utilization", "max_model_len"}


def read(doc: Mapping[str, object], path: Path, duplicates: list[str], overrides: dict[str, str] | None) -> Recipe:
    where = str(path)
    warnings = [f"{path.name}: {d}" for d in duplicates]
    version = doc.get("recipe_version")
    if version is None:
        raise RecipeError(f"{where}: field 'recipe_version' is missing (run-recipe.py requires it; this reader knows \"1\")")
    if str(version) != "1":
        warnings.append(f"{path.name}: recipe_version {version!r} is not \"1\"; read as version 1, as run-recipe.py does")
    for name in REQUIRED:
        if name not in doc or doc[name] in (None, ""):
            raise RecipeError(f"{where}: required field {name!r} is missing")
    command = doc["command"]
    if not isinstance(command, str):
        raise RecipeError(f"{where}: field 'command' must be text (a block scalar)")
    unknown = sorted(set(doc) - KNOWN)
    if unknown:
        warnings.append(f"{path.name}: fields run-recipe.py does not read: {', '.join(unknown)}")

    params = resolve.string_map(doc.get("defaults"), where, "defaults")
    sources = {f"param:{k}": "defaults" for k in params}
    env = resolve.string_map(doc.get("env"), where, "env")
    sources.update({f"env:{k}": "env" for k in env})
    cluster_only = bool(doc.get("cluster_only"))
    resolve.apply_overrides(params, env, sources, overrides, OVERRIDES | resolve.placeholders_strict(command), where)

    solo = not cluster_only
    if solo and params.get("tensor_parallel", "1") != "1" and sources.get("param:tensor_parallel") != "--set":
        params["tensor_parallel"] = "1"
        sources["param:tensor_parallel"] = "solo launch (run-recipe.py --solo forces 1 unless --tp is given)"
    text = resolve.format_strict(command, params, f"{where}: field 'command'")
    argv, shell = resolve.split_command(text, f"{where}: field 'command'")
    if shell:
        warnings.append(resolve.shell_line_warning(path.name, "field 'command'", shell))
    if solo:
        argv = strip_flags(argv, ("--distributed-executor-backend",))

    model_field = doc.get("model")
    if split := resolve.split_model_warning(path.name, [str(v) for v in (model_field, params.get("model"), params.get("model_path")) if v], argv):
        warnings.append(split)
    model = resolve.model_in(argv) or (str(model_field) if model_field else None)
    host, port = resolve.bind_of(argv, params, where)
    needs = ["gb10"]
    if model_field or model:
        needs.append(f"model:{model_field or model}")
    if cluster_only:
        needs.append("cluster:2")
    served = flag_value(argv, "--served-model-name") or model
    extras = {k: doc[k] for k in ("mods", "build_args", "benchmark", "solo_only", "cluster_only") if doc.get(k) is not None}
    return Recipe(
        name=str(doc["name"]), source_path=str(path), format="eugr-v1", argv=argv, env=env, host=host, port=port,
        model=model, served_model_name=served, workload=resolve.benchy_workload(doc.get("benchmark")), container=str(doc["container"]),
        needs=needs, params=params, sources=sources, warnings=warnings, description=str(doc.get("description") or ""),
        extras=extras, shell=shell,
    )
