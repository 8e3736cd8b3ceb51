"""spark-arena/sparkrun recipes (recipe_version "2" and later), resolved the way sparkrun resolves them.

Source of truth: sparkrun's own code at commit 0041b8f8fc1320ffa2e85d2d0ac760ee6be19de7 (v0.2.40, 2026-07-02):
src/sparkrun/core/recipe.py (runtime resolution, the config chain, render_command),
src/sparkrun/runtimes/_vllm_common.py (VLLM_FLAG_MAP, VLLM_BOOL_FLAGS), runtimes/base.py (build_flags_from_map,
_augment_served_model_name), runtimes/vllm_distributed.py and vllm_ray.py (_build_command).

Kept exactly: `model` is the one required field and is always injected as `{model}`; the config chain is
overrides -> recipe defaults; substitution is iterative and leaves an unresolved placeholder as written
(sparkdoctor warns about it); literal JSON braces need no escaping, and `{{`/`}}` collapse to one brace.
With no `command`, the vLLM runtime builds `vllm serve MODEL [-tp N]` plus one flag per key of VLLM_FLAG_MAP
the config has, in the map's order, booleans as bare flags when true (ext_parse_bool), values unsubstituted,
and runs the joined string through a shell (so it is split as a shell splits it). A bare `vllm` runtime is
vllm-distributed (which never emits --distributed-executor-backend) unless the backend is `ray`
(vllm-ray, which emits it). A default the map does not know never reaches the command (sparkdoctor says
so). With a `command`, a `served_model_name` default the command lacks is appended as
--served-model-name. `metadata`, `patches`, `variants` and `mods` are kept for display.
Not followed: sparkrun expands `${VAR}` in env values from its own environment at launch; sparkdoctor keeps
them as written (a warning says so), so that no secret of this shell lands in the ledger.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkdoctor.recipes import resolve
from sparkdoctor.recipes.model import Recipe, RecipeError, flag_value

SPARKRUN_COMMIT = "0041b8f8fc1320ffa2e85d2d0ac760ee6be19de7"
# VLLM_FLAG_MAP, copied from src/sparkrun/runtimes/_vllm_common.py at SPARKRUN_COMMIT; its order is the
# order of the generated flags (build_flags_from_map iterates the map).
VLLM_FLAGS = {
    "port": "--port", "host": "--host", "tensor_parallel": "-tp",
    "gpu_memory_utilization": "--gpu-memory-utilization", "max_model_len": "--max-model-len",
    "max_num_batched_tokens": "--max-num-batched-tokens", "max_num_seqs": "--max-num-seqs",
    "served_model_name": "--served-model-name", "dtype": "--dtype", "quantization": "--quantization",
    "enforce_eager": "--enforce-eager", "enable_prefix_caching": "--enable-prefix-caching",
    "trust_remote_code": "--trust-remote-code", "distributed_executor_backend": "--distributed-executor-backend",
    "pipeline_parallel": "-pp", "data_parallel": "--data-parallel-size", "kv_cache_dtype": "--kv-cache-dtype",
    "otlp_traces_endpoint": "--otlp-traces-endpoint", "api_key": "--api-key",
}
# VLLM_BOOL_FLAGS at SPARKRUN_COMMIT. enable_auto_tool_choice is listed there but is not a key of the map,
# so sparkrun never emits it from defaults; sparkdoctor does the same and says so.
BOOL_FLAGS = {"enforce_eager", "enable_prefix_caching", "trust_remote_code", "enable_auto_tool_choice"}
# What sparkrun's other runtimes build when a recipe has no command, and why sparkdoctor does not copy it.
# runtimes/sglang.py _build_base_command: at SPARKRUN_COMMIT `python3 -m sglang.launch_server --model-path MODEL` plus
# its 16-key _SGLANG_FLAG_MAP; later releases `sglang serve --model-path MODEL`, a map of over 40 keys and --dp-size by
# launch topology. One recipe file, two commands, and sparkdoctor's checks know vLLM's flags only.
_OTHER_RUNTIME = "sparkrun's runtime for it builds that runtime's own command, which sparkdoctor does not copy;"
_BUILT_ELSEWHERE = {
    "sglang": ("sparkrun builds SGLang's from its own flag map, which changes between its releases (`python3 -m "
               "sglang.launch_server --model-path MODEL ...` in 0.2.40, `sglang serve --model-path MODEL ...` later), so "
               "the same recipe launches different commands;"),
}
_RAY_BACKEND = re.compile(r"--distributed-executor-backend\s+ray\b")  # core/recipe.py _RAY_BACKEND_RE


def parse_bool(value: object) -> bool:
    """scitrera_app_framework.ext_parse_bool, as sparkrun calls it: a bool is itself; empty is False; else
    true when the lower-cased text contains "1", "t" or "y" ("true", "yes", "1"; "false" and also "on" are false)."""
    if isinstance(value, bool):
        return value
    if not value:
        return False
    text = str(value).lower()
    return "1" in text or "t" in text or "y" in text


def runtime_variant(runtime: str, config: Mapping[str, object], command: str | None) -> str:
    """core/recipe.py _resolve_vllm_variant: a bare `vllm` (or none) is vllm-ray when the effective
    distributed_executor_backend is `ray` or the command passes `--distributed-executor-backend ray`,
    else vllm-distributed; any other runtime is itself (eugr-vllm is a vllm-ray subclass)."""
    if runtime not in ("", "vllm"):
        return "vllm-ray" if runtime == "eugr-vllm" else runtime
    if str(config.get("distributed_executor_backend") or "").lower() == "ray":
        return "vllm-ray"
    if command and _RAY_BACKEND.search(command):
        return "vllm-ray"
    return "vllm-distributed"


def read(doc: dict[str, Any], path: Path, duplicates: list[str], overrides: dict[str, str] | None) -> Recipe:
    where = str(path)
    warnings = [f"{path.name}: {d}" for d in duplicates]
    model = doc.get("model")
    if not isinstance(model, str) or not model.strip():
        if other := _not_a_recipe(doc):
            raise RecipeError(f"{where}: {other}, not a recipe; name a recipe file (a YAML file with `model:`)")
        raise RecipeError(f"{where}: required field 'model' is missing (sparkrun recipes name the model they serve)")
    runtime = str(doc.get("runtime") or "")
    params = resolve.string_map(doc.get("defaults"), where, "defaults")
    sources = {f"param:{k}": "defaults" for k in params}
    env = resolve.string_map(doc.get("env"), where, "env")
    sources.update({f"env:{k}": "env" for k in env})
    command = doc.get("command")
    if command is not None and not isinstance(command, str):
        raise RecipeError(f"{where}: field 'command' must be text (a block scalar)")
    known = set(VLLM_FLAGS) | {"enable_auto_tool_choice"} | _placeholders(command)
    resolve.apply_overrides(params, env, sources, overrides, known, where)
    params["model"] = params.get("model", model)
    sources.setdefault("param:model", "model field (always injected)")

    for _ in range(resolve.ROUNDS):  # defaults may refer to each other ({short_name}-nvfp4): iterate
        new_params = {k: resolve.substitute_lenient(v, params, f"{where}: defaults.{k}")[0] for k, v in params.items()}
        if new_params == params:
            break
        params = new_params
    raw_defaults: dict[str, object] = doc["defaults"] if isinstance(doc.get("defaults"), dict) else {}
    config: dict[str, object] = {**raw_defaults, **{k: v for k, v in (overrides or {}).items() if not k.startswith("env.")}}
    config = {resolve.ALIASES.get(k, k): v for k, v in config.items()}
    variant = runtime_variant(runtime, config, command)
    if command:
        text, unresolved = resolve.substitute_lenient(command, params, f"{where}: field 'command'")
        unresolved = {u for u in unresolved if re.search(r"(?<!\$)\{" + u + r"\}", text)}  # `${NAME}`: its shell's to fill
        if unresolved:
            warnings.append(f"{path.name}: placeholders left as written (no value for them): "
                            + ", ".join("{" + u + "}" for u in sorted(unresolved)))
        argv, shell = resolve.split_command(text, f"{where}: field 'command'")
        if shell:
            warnings.append(resolve.shell_line_warning(path.name, "field 'command'", shell))
        served_default = config.get("served_model_name")
        if variant in ("vllm-distributed", "vllm-ray") and served_default is not None and "--served-model-name" not in text:
            # base.py _augment_served_model_name: the default is appended when the command does not pass it
            argv += ["--served-model-name", str(served_default)]
            sources["argv:--served-model-name"] = "served_model_name default appended, as sparkrun does"
    else:
        if variant not in ("vllm-distributed", "vllm-ray"):
            raise RecipeError(f"{where}: field 'command' is missing and runtime {runtime!r} has no command sparkdoctor "
                              f"can build: {_BUILT_ELSEWHERE.get(variant, _OTHER_RUNTIME)} sparkdoctor builds vLLM's only "
                              "(sparkrun's vLLM runtimes); write the server's command in the recipe's `command:` field")
        argv, dropped, shell = _generate(model, config, variant, where)
        if shell:
            warnings.append(resolve.shell_line_warning(path.name, "the command sparkrun builds from defaults", shell))
        if dropped:
            warnings.append(f"{path.name}: defaults sparkrun's vLLM flag map does not know, so they are not in the "
                            f"command it generates (nor here): {', '.join(sorted(dropped))}")
        sources["argv"] = (f"built from defaults by sparkrun's {variant} runtime (VLLM_FLAG_MAP at sparkrun "
                           f"{SPARKRUN_COMMIT[:7]}; no command in the recipe)")
    if split := resolve.split_model_warning(path.name, [str(params.get("model") or "")], argv):
        warnings.append(split)
    if any("$" in v for v in env.values()):
        warnings.append(f"{path.name}: env values with $VARS are kept as written; sparkrun expands them from its own "
                        "environment at launch")
    if doc.get("mods") or doc.get("patches"):
        names = [str(x) for key in ("mods", "patches") for x in (doc.get(key) or [])]
        warnings.append(f"{path.name}: the recipe changes files inside its container ({', '.join(names)}); the "
                        "command shown runs on the patched image, which sparkdoctor does not build")
    if isinstance(doc.get("variants"), dict) and doc["variants"]:
        warnings.append(f"{path.name}: {len(doc['variants'])} variants ({', '.join(map(str, doc['variants']))}) are "
                        "alternatives to this base configuration; none is applied here")

    host, port = resolve.bind_of(argv, params, where)
    served = flag_value(argv, "--served-model-name") or params.get("served_model_name") or resolve.model_in(argv) or model
    needs = ["gb10", f"model:{model}"]
    nodes = _min_nodes(doc)
    if nodes > 1:
        needs.append(f"cluster:{nodes}")
    container = doc.get("container")
    extras = {k: doc[k] for k in ("runtime", "runtime_version", "metadata", "benchmark", "model_revision", "patches",
                                  "variants", "mods") if doc.get(k) is not None}
    extras["resolved_runtime"] = variant
    meta: dict[str, object] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    name = doc.get("name") or path.stem
    description = meta.get("description") or doc.get("description") or ""
    return Recipe(
        name=str(name), source_path=str(path), format="sparkrun-v2", argv=argv, env=env, host=host,
        port=port, model=resolve.model_in(argv) or model, served_model_name=served, workload=resolve.benchy_workload(doc.get("benchmark")),
        container=str(container) if container else None, needs=needs, params=params, sources=sources,
        warnings=warnings, description=str(description), extras=extras, shell=shell,
    )


def _not_a_recipe(doc: Mapping[str, object]) -> str | None:
    """What else of a recipe repository a YAML file without a model is: its registry index, a benchmark profile."""
    if "registries" in doc:
        return "a sparkrun registry index (its `registries:` list the folders that hold recipes)"
    if "framework" in doc and "args" in doc:
        return f"a sparkrun benchmark profile (`framework: {str(doc['framework'])[:40]}`)"
    return None


def _placeholders(command: object) -> set[str]:
    if not isinstance(command, str):
        return set()
    return {m.group(1) for m in resolve.PLACEHOLDER.finditer(command)}


def _generate(model: str, config: Mapping[str, object], variant: str, where: str) -> tuple[list[str], set[str], str | None]:
    """vllm_distributed.py _build_base_command / vllm_ray.py _build_command (one node): `vllm serve MODEL`,
    `-tp N` when tensor_parallel is truthy, then build_flags_from_map over VLLM_FLAGS in its order (skipping
    tensor_parallel; vllm-distributed also skips distributed_executor_backend); None values are skipped, booleans
    are bare flags when true, other values are str()-ed. sparkrun joins the parts with spaces and a shell runs
    the line, so it is split here as a shell splits it. (argv, the keys that never reach the command, what makes the
    line a shell line: a default holding `;` runs a second command there)."""
    parts = ["vllm", "serve", model]
    tp = config.get("tensor_parallel")
    if tp:
        parts += ["-tp", str(tp)]
    skip = {"tensor_parallel"} | ({"distributed_executor_backend"} if variant == "vllm-distributed" else set())
    for key, flag in VLLM_FLAGS.items():
        value = config.get(key)
        if key in skip or value is None:
            continue
        if key in BOOL_FLAGS:
            if parse_bool(value):
                parts.append(flag)
        else:
            parts += [flag, str(value)]
    line = " ".join(parts)
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise RecipeError(f"{where}: the command generated from defaults cannot be split as a shell would: {exc}") from None
    dropped = {k for k in config if k not in VLLM_FLAGS and k != "model"}
    if variant == "vllm-distributed" and config.get("distributed_executor_backend") is not None:
        dropped.add("distributed_executor_backend")
    return argv, dropped, resolve.shell_operator(line)


def _min_nodes(doc: Mapping[str, object]) -> int:
    if doc.get("cluster_only"):
        return 2
    value = doc.get("min_nodes", 1)
    return value if isinstance(value, int) else 1
