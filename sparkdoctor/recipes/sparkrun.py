"""spark-arena/sparkrun recipes (recipe_version "2"), resolved the way sparkrun's RECIPES.md describes.

Kept exactly: `model` is the one required field and is always injected as `{model}`; the config chain is
overrides -> recipe defaults; substitution is iterative and leaves an unresolved placeholder as written
(sparkdoctor warns about it); literal JSON braces need no escaping, and `{{`/`}}` collapse to one brace;
env values are passed literally (no `${VAR}` expansion). With no `command`, the vLLM runtime builds one
from `defaults` through its flag map; a default that map does not know is dropped, with a warning, as
sparkrun does. `metadata` is informational and kept for display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkdoctor.recipes import resolve
from sparkdoctor.recipes.model import Recipe, RecipeError, flag_value

# sparkrun's vLLM flag map (RECIPES.md "Common Defaults Keys"): key -> flag; booleans are bare flags.
VLLM_FLAGS = {
    "port": "--port", "host": "--host", "tensor_parallel": "-tp", "pipeline_parallel": "-pp",
    "gpu_memory_utilization": "--gpu-memory-utilization", "max_model_len": "--max-model-len",
    "served_model_name": "--served-model-name", "dtype": "--dtype", "quantization": "--quantization",
    "trust_remote_code": "--trust-remote-code", "kv_cache_dtype": "--kv-cache-dtype",
}
BOOL_FLAGS = {"trust_remote_code"}
VLLM_RUNTIMES = {"", "vllm", "vllm-distributed", "vllm-ray"}


def read(doc: dict[str, Any], path: Path, duplicates: list[str], overrides: dict[str, str] | None) -> Recipe:
    where = str(path)
    warnings = [f"{path.name}: {d}" for d in duplicates]
    model = doc.get("model")
    if not isinstance(model, str) or not model.strip():
        raise RecipeError(f"{where}: required field 'model' is missing (sparkrun recipes name the model they serve)")
    runtime = str(doc.get("runtime") or "")
    params = resolve.string_map(doc.get("defaults"), where, "defaults")
    sources = {f"param:{k}": "defaults" for k in params}
    env = resolve.string_map(doc.get("env"), where, "env")
    sources.update({f"env:{k}": "env" for k in env})
    command = doc.get("command")
    if command is not None and not isinstance(command, str):
        raise RecipeError(f"{where}: field 'command' must be text (a block scalar)")
    known = set(VLLM_FLAGS) | _placeholders(command)
    resolve.apply_overrides(params, env, sources, overrides, known, where)
    params["model"] = params.get("model", model)
    sources.setdefault("param:model", "model field (always injected)")

    for _ in range(resolve.ROUNDS):  # defaults may refer to each other ({short_name}-nvfp4): iterate
        new_params = {k: resolve.substitute_lenient(v, params)[0] for k, v in params.items()}
        if new_params == params:
            break
        params = new_params
    if command:
        text, unresolved = resolve.substitute_lenient(command, params)
        if unresolved:
            warnings.append(f"{path.name}: placeholders left as written (no value for them): "
                            + ", ".join("{" + u + "}" for u in sorted(unresolved)))
        argv = resolve.split_command(text, f"{where}: field 'command'")
    else:
        if runtime not in VLLM_RUNTIMES:
            raise RecipeError(f"{where}: field 'command' is missing and runtime {runtime!r} has no command sparkdoctor can build")
        argv, dropped = _generate(params)
        if dropped:
            warnings.append(f"{path.name}: defaults the vLLM runtime does not understand, dropped from the command "
                            f"as sparkrun does: {', '.join(sorted(dropped))}")
        sources["argv"] = "built from defaults by the vLLM flag map (no command in the recipe)"

    host, port = resolve.bind_of(argv, params, where)
    served = flag_value(argv, "--served-model-name") or params.get("served_model_name") or resolve.model_in(argv) or model
    needs = ["gb10", f"model:{model}"]
    nodes = _min_nodes(doc)
    if nodes > 1:
        needs.append(f"cluster:{nodes}")
    container = doc.get("container")
    extras = {k: doc[k] for k in ("runtime", "runtime_version", "metadata", "benchmark", "model_revision") if doc.get(k) is not None}
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = doc.get("name") or path.stem
    description = meta.get("description") or doc.get("description") or ""
    return Recipe(
        name=str(name), source_path=str(path), format="sparkrun-v2", argv=argv, env=env, host=host,
        port=port, model=resolve.model_in(argv) or model, served_model_name=served, workload=_workload(doc.get("benchmark")),
        container=str(container) if container else None, needs=needs, params=params, sources=sources,
        warnings=warnings, description=str(description), extras=extras,
    )


def _placeholders(command: Any) -> set[str]:
    if not isinstance(command, str):
        return set()
    return {m.group(1) for m in resolve.PLACEHOLDER.finditer(command)}


def _generate(params: dict[str, str]) -> tuple[list[str], set[str]]:
    """`vllm serve {model}` plus one flag per default the flag map knows; (argv, the keys it dropped)."""
    argv = ["vllm", "serve", params["model"]]
    for key, value in params.items():
        if key == "model":
            continue
        flag = VLLM_FLAGS.get(key)
        if flag is None:
            continue
        if key in BOOL_FLAGS:
            if value.strip().lower() in ("1", "true", "yes", "on"):
                argv.append(flag)
            continue
        argv += [flag, value]
    return argv, {k for k in params if k != "model" and k not in VLLM_FLAGS}


def _min_nodes(doc: dict[str, Any]) -> int:
    if doc.get("cluster_only"):
        return 2
    value = doc.get("min_nodes", 1)
    return value if isinstance(value, int) else 1


def _workload(benchmark: Any) -> dict[str, Any]:
    if not isinstance(benchmark, dict):
        return {}
    args = benchmark.get("args") if isinstance(benchmark.get("args"), dict) else {}
    out: dict[str, Any] = {"from": f"benchmark ({benchmark.get('framework', 'llama-benchy')})"} if args else {}
    for theirs, ours in (("tg", "max_tokens"), ("pp", "prompt_tokens"), ("concurrency", "concurrency"), ("depth", "depth")):
        if theirs in args:
            out[ours] = args[theirs]
    return out
