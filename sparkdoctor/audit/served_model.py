"""What `recipe check` knows about the model a recipe serves: the facts the matrix's `serving` condition
judges flag values against (is it hybrid, how long a context vLLM will accept for it).

Read only from local files: the recipe's model as a folder or a snapshot in the Hugging Face cache,
through the audit's own readers (config.json parsed once). A hub id with no local
files gives no facts and says so: the values that need them are reported as not judged, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkdoctor.audit.checkpoint import read_json
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.locate import resolve_model
from sparkdoctor.audit.modelconfig import read_shape
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.recipes.vllm_config import served_argv

# RoPE types whose max_position_embeddings is already the scaled length (vLLM's _get_and_verify_max_len).
_PRESCALED_ROPE = {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling", "default"}
_HUGE = 10**12  # tokenizers say "no limit" with 1e30; anything this large is no limit


def recipe_facts(recipe: Recipe, model: str | None = None) -> dict[str, object]:
    """Facts.recipe for this recipe: its name, argv (with its `--config` file's options, as vLLM reads them) and the facts of its model (`model`: the checkpoint the user
    named for it, `recipe check --model`, read instead of the recipe's hub id)."""
    return {"name": recipe.name, "argv": served_argv(recipe), "model": model_facts(model or recipe.model)}


def model_facts(ref: str | None) -> dict[str, Any]:
    """{"ref", "folder", "hybrid", "linear_layers", "mamba_layers", "max_position_embeddings", "max_model_len",
    "type", "architecture", "quant", "head_dim", "error"}: every fact None (and `error` saying why) when the model has no readable local config.json."""
    out: dict[str, object] = {"ref": ref, "folder": None, "hybrid": None, "linear_layers": None, "mamba_layers": None,
                           "max_position_embeddings": None, "max_model_len": None, "type": None, "architecture": None,
                           "quant": None, "head_dim": None, "error": None}
    if not ref:
        out["error"] = "the recipe names no model"
        return out
    try:
        folder = resolve_model(ref)
    except AuditError:
        path = ref.startswith(("/", ".", "~"))  # a folder that is not there, not a hub id
        why = "no such folder" if path else "a hub id not in the Hugging Face cache"
        out["error"] = f"model {ref} has no local files ({why}): its config.json cannot be read"
        return out
    out["folder"] = str(folder)
    try:
        config = read_json(Path(folder) / "config.json") or {}
        shape = read_shape(config, Path(folder) / "config.json")
        tokenizer = read_json(Path(folder) / "tokenizer_config.json", required=False) or {}
    except AuditError as exc:
        out["error"] = str(exc)
        return out
    linear, mamba = shape.count("linear"), shape.count("mamba")
    out.update(hybrid=bool(linear or mamba), linear_layers=linear, mamba_layers=mamba, max_position_embeddings=shape.max_position)
    out.update(_identity(config, Path(folder)), head_dim=shape.head_dim or None)
    out["max_model_len"] = _max_model_len(config, shape.max_position, tokenizer)
    if out["max_model_len"] is None:
        out["error"] = f"{folder}/config.json names no max_position_embeddings: the longest accepted --max-model-len is not known"
    return out


def _identity(config: dict[str, Any], folder: Path) -> dict[str, object]:
    """type, architecture and quant as vLLM reads them: model_type and architectures[0] of config.json (or of its
    text_config), the quant_method of its quantization_config, ModelOpt's quant_algo (config.json or
    hf_quant_config.json) in lower case ("nvfp4", "fp8"), "none" for an unquantized checkpoint."""
    text = config.get("text_config")
    text = text if isinstance(text, dict) else {}
    archs = config.get("architectures") or text.get("architectures")
    kind = config.get("model_type") or text.get("model_type")
    quant_cfg = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else None
    if quant_cfg is None:
        try:
            hf_quant = read_json(folder / "hf_quant_config.json", required=False) or {}
        except AuditError:
            hf_quant = {}
        quant_cfg = hf_quant.get("quantization") if isinstance(hf_quant.get("quantization"), dict) else None
        if quant_cfg is not None:
            quant_cfg = {"quant_method": "modelopt", **quant_cfg}
    quant = "none"
    if quant_cfg is not None:
        method = str(quant_cfg.get("quant_method") or "unknown").lower()
        algo = quant_cfg.get("quant_algo")
        quant = str(algo).lower() if method.startswith("modelopt") and isinstance(algo, str) else method
    return {"type": kind if isinstance(kind, str) else None,
            "architecture": archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None,
            "quant": quant}


def _rope(config: Mapping[str, object]) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    text = config.get("text_config")
    for cfg in (config, text if isinstance(text, dict) else {}):
        for key in ("rope_scaling", "rope_parameters"):
            value = cfg.get(key)
            if isinstance(value, dict):
                found.append(value)
    return found


def _max_model_len(config: Mapping[str, object], max_position: int | None, tokenizer: Mapping[str, object]) -> int | None:
    """The longest --max-model-len vLLM starts with, as its _get_and_verify_max_len derives it: the config's
    length, times a RoPE scaling factor whose type does not already include it, capped by the tokenizer's
    model_max_length; a config model_max_length above that is allowed too."""
    if not max_position:
        return None
    derived: float = max_position
    for rope in _rope(config):
        kind = str(rope.get("rope_type") or rope.get("type") or "default")
        factor = rope.get("factor")
        if kind not in _PRESCALED_ROPE and isinstance(factor, (int, float)) and not isinstance(factor, bool) and 0 < factor < 1e6:
            derived *= factor
    limit = tokenizer.get("model_max_length")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and 0 < limit < _HUGE:
        derived = min(derived, limit)
    override = config.get("model_max_length")
    if isinstance(override, int) and not isinstance(override, bool) and derived < override < _HUGE:
        derived = override
    return int(derived)
