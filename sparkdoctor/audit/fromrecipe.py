"""The fit a recipe asks for: `audit --recipe` reads the server flags that size the KV cache from the
recipe's resolved argv, so the fit answers "does THIS launch fit", not a default guess.

Explicit audit options win over the recipe, the recipe over the audit's defaults; every value says
where it came from (the `sources` an Audit carries and both renderers print).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.locate import resolve_model
from sparkdoctor.audit.modelconfig import SERVED_BYTES, served_bytes
from sparkdoctor.recipes.model import Recipe, flag_value, vllm_spelling
from sparkdoctor.recipes.vllm_config import serve_config, served_argv

_SIZED = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def vllm_int(text: str) -> int:
    """An integer flag as vLLM reads it (vllm/utils/argparse_utils.py human_readable_int, 0.32): 1k = 1,000, 1K =
    1,024, 25.6k = 25,600 (a binary suffix takes no decimals), else a plain number. ValueError otherwise."""
    text = text.strip()
    match = _SIZED.fullmatch(text)
    if match is None:
        return int(text)
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
    return int(number) * 2 ** (10 * "KMGT".index(suffix) + 10)


def vllm_model_len(text: str) -> int | None:
    """--max-model-len as vLLM reads it (human_readable_int_or_auto): -1 and auto (vLLM fits the length to the
    memory) are None, the length not given."""
    return None if text.strip() == "-1" or text.strip().lower() == "auto" else vllm_int(text)


def vllm_share(text: str) -> float:
    """--gpu-memory-utilization as vLLM accepts it (CacheConfig: gt=0, le=1); ValueError otherwise (nan, 1.5, 0)."""
    value = float(text)
    if not 0 < value <= 1:  # also false for nan
        raise ValueError(text)
    return value


def vllm_dtype(text: str) -> str:
    """--dtype as vLLM's parser takes it (modelconfig.served_bytes, the one rule: auto or one of its ModelDType choices,
    exactly); ValueError otherwise."""
    try:
        served_bytes(text)
    except AuditError:
        raise ValueError(text) from None
    return text


# option name in AuditOptions -> the vLLM flag a recipe spells it with, and how to read its value
FLAGS: dict[str, tuple[str, Callable[[str], object]]] = {
    "max_model_len": ("--max-model-len", vllm_model_len),
    "max_num_seqs": ("--max-num-seqs", int),
    "gpu_memory_utilization": ("--gpu-memory-utilization", vllm_share),
    "kv_cache_dtype": ("--kv-cache-dtype", str),
    "dtype": ("--dtype", vllm_dtype),
}
_KINDS = {vllm_model_len: "whole number (or vLLM's 32k / 32K forms, auto)", int: "whole number",
          vllm_share: "fraction above 0 and at most 1 (vLLM refuses any other)", str: "text",
          vllm_dtype: f"dtype vLLM takes (auto, {', '.join(SERVED_BYTES)}; it refuses any other)"}
DEFAULTS: dict[str, Any] = {"max_model_len": None, "max_num_seqs": 1, "gpu_memory_utilization": 0.9, "kv_cache_dtype": "auto",
                            "dtype": "auto"}
# A recipe launches vLLM: what vLLM itself uses when the recipe does not say (max_num_seqs None: its per-GPU
# default, resolved by the audit once the GPU is known; 0.9 and auto are vLLM's own defaults too).
RECIPE_DEFAULTS: dict[str, Any] = {**DEFAULTS, "max_num_seqs": None}


def flag_values(argv: list[str]) -> dict[str, str]:
    """The last value of each sizing flag in argv (`--flag value` or `--flag=value`), by option name."""
    values = {name: flag_value(argv, flag) for name, (flag, _) in FLAGS.items()}
    return {name: value for name, value in values.items() if value is not None}


def recipe_settings(recipe: Recipe, explicit: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, str]]:
    """(values, sources) for the sizing options (FLAGS): explicit (not None) > the recipe's argv > its `--config` file
    (vLLM puts the file's options before the command line's, so the command line wins) > default. AuditError (one
    line) for a config file vLLM would not start with."""
    config = serve_config(recipe)
    if config is not None and config.problem is not None and config.fatal:
        raise AuditError(f"{recipe.source_path}: {config.problem}")
    label = f"recipe {recipe.name}"
    # option name -> (its value, the file it is in, where it came from)
    given: dict[str, tuple[str, str, str]] = {}
    if config is not None:
        given = {name: (value, str(config.path), f"{label} (--config {config.written}: {FLAGS[name][0][2:]} {value})")
                 for name, value in flag_values(list(config.args)).items()}
    given.update({name: (value, recipe.source_path, f"{label} ({FLAGS[name][0]} {value})")
                  for name, value in flag_values([str(a) for a in recipe.argv]).items()})
    unread = f"; its --config {config.written} was not read" if config is not None and config.problem else ""
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for name, (flag, kind) in FLAGS.items():
        if explicit.get(name) is not None:
            values[name], sources[name] = explicit[name], f"{flag} (command line)"
        elif name in given:
            value, where, sources[name] = given[name]
            try:
                values[name] = kind(value)
            except ValueError:
                raise AuditError(f"{where}: {flag} {value!r} is not a {_KINDS[kind]}") from None
            if values[name] is None:  # --max-model-len auto: vLLM fits it to the memory
                sources[name] += ": vLLM fits the length to the memory"
        else:
            values[name], sources[name] = RECIPE_DEFAULTS[name], f"vLLM default (the recipe does not set it{unread})"
    return values, sources


def max_model_len_note(recipe_len: int | None, accepted: int | None, source: str) -> str | None:
    """A note when the recipe's --max-model-len is longer than the model accepts (vLLM refuses to start unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set), so the fit is sized at a length the server never runs."""
    if recipe_len is None or accepted is None or recipe_len <= accepted:
        return None
    return (f"--max-model-len {recipe_len} ({source}) is longer than the model accepts ({accepted}, from its config): "
            "vLLM refuses to start with it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; the fit below is sized at it anyway")


def tensor_parallel_note(recipe: Recipe) -> str | None:
    """A note when the recipe splits the model over several GPUs (`--tensor-parallel-size N`/`-tp N`, the last one):
    the fit below is one GPU holding all of it, not 1/N of the weights and KV cache on each."""
    size = None
    args = [vllm_spelling(a) for a in served_argv(recipe)]
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in ("--tensor-parallel-size", "-tp"):
            size = value if eq else (args[i + 1] if i + 1 < len(args) else None)
    if size is None or not size.strip().isdigit() or int(size) <= 1:
        return None
    return (f"recipe {recipe.name} runs tensor parallel {int(size)} (--tensor-parallel-size {size.strip()}): each of its "
            f"{int(size)} GPUs holds about 1/{int(size)} of the weights and KV cache; the fit is one GPU holding all of it")


def recipe_model(recipe: Recipe, given: str | None, option: str = "MODEL") -> str:
    """The checkpoint to audit: MODEL when given, else the recipe's model (a local folder or a cached one); `option`:
    how the command that asks takes a model, as its errors name it."""
    if given:
        return given
    model = recipe.model
    if not model:
        raise AuditError(f"{recipe.source_path}: the recipe names no model; give {option}")
    try:
        return str(resolve_model(model))
    except AuditError as exc:
        raise AuditError(f"recipe {recipe.name}: its model {model} is not on this machine ({exc}); give {option} (a local folder)") from None

