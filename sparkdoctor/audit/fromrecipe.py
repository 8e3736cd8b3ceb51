"""The fit a recipe asks for: `audit --recipe` reads the server flags that size the KV cache from the
recipe's resolved argv, so the fit answers "does THIS launch fit", not a default guess.

Explicit audit options win over the recipe, the recipe over the audit's defaults; every value says
where it came from (the `sources` an Audit carries and both renderers print).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.locate import resolve_model
from sparkdoctor.recipes.model import Recipe

# option name in AuditOptions -> the vLLM flag a recipe spells it with, and how to read its value
FLAGS = {
    "max_model_len": ("--max-model-len", int),
    "max_num_seqs": ("--max-num-seqs", int),
    "gpu_memory_utilization": ("--gpu-memory-utilization", float),
    "kv_cache_dtype": ("--kv-cache-dtype", str),
}
DEFAULTS: dict[str, Any] = {"max_model_len": None, "max_num_seqs": 1, "gpu_memory_utilization": 0.9, "kv_cache_dtype": "auto"}
# A recipe launches vLLM: what vLLM itself uses when the recipe does not say (max_num_seqs None: its per-GPU
# default, resolved by the audit once the GPU is known; 0.9 and auto are vLLM's own defaults too).
RECIPE_DEFAULTS: dict[str, Any] = {**DEFAULTS, "max_num_seqs": None}


def flag_values(argv: list[str]) -> dict[str, str]:
    """The last value of each sizing flag in argv (`--flag value` or `--flag=value`), by option name."""
    by_flag = {flag: name for name, (flag, _) in FLAGS.items()}
    found: dict[str, str] = {}
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag not in by_flag:
            continue
        if not eq:
            if i + 1 >= len(argv):
                continue
            value = argv[i + 1]
        found[by_flag[flag]] = value
    return found


def recipe_settings(recipe: Recipe, explicit: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, str]]:
    """(values, sources) for the four sizing options: explicit (not None) > the recipe's argv > default."""
    from_argv = flag_values([str(a) for a in recipe.argv])
    label = f"recipe {recipe.name}"
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for name, (flag, kind) in FLAGS.items():
        if explicit.get(name) is not None:
            values[name], sources[name] = explicit[name], f"{flag} (command line)"
        elif name in from_argv:
            try:
                values[name] = kind(from_argv[name])
            except ValueError:
                raise AuditError(f"{recipe.source_path}: {flag} {from_argv[name]!r} is not a {kind.__name__}") from None
            sources[name] = f"{label} ({flag} {from_argv[name]})"
        else:
            values[name], sources[name] = RECIPE_DEFAULTS[name], "vLLM default (the recipe does not set it)"
    return values, sources


def max_model_len_note(recipe_len: int | None, accepted: int | None, source: str) -> str | None:
    """A note when the recipe's --max-model-len is longer than the model accepts (vLLM refuses to start unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set), so the fit is sized at a length the server never runs."""
    if recipe_len is None or accepted is None or recipe_len <= accepted:
        return None
    return (f"--max-model-len {recipe_len} ({source}) is longer than the model accepts ({accepted}, from its config): "
            "vLLM refuses to start with it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; the fit below is sized at it anyway")


def recipe_model(recipe: Recipe, given: str | None) -> str:
    """The checkpoint to audit: MODEL when given, else the recipe's model (a local folder or a cached one)."""
    if given:
        return given
    model = recipe.model
    if not model:
        raise AuditError(f"{recipe.source_path}: the recipe names no model; give MODEL")

    try:
        return str(resolve_model(model))
    except AuditError as exc:
        raise AuditError(f"recipe {recipe.name}: its model {model} is not on this machine ({exc}); give MODEL (a local folder)") from None


