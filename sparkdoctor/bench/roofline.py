"""The achieved share of the physical ceiling: a bench run's headline decode tok/s per stream at
concurrency 1 against the audit's bandwidth roofline for the model folder it served.

Optional by design: when the model folder is unknown or its audit fails (no safetensors, a corrupt
header), the run keeps every number it measured and the roofline says why it is missing. The context
the ceiling assumes is the measured prompt (the server's usage counts) plus half the output: the
average history each decoded token reads.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.fromrecipe import flag_values, vllm_dtype
from sparkdoctor.audit.roofline import ceiling_for, roofline_line
from sparkdoctor.bench.measure import Measurement
from sparkdoctor.recipes.model import Recipe


def _context(m: Measurement) -> tuple[int, str]:
    level = next((lvl for lvl in m.levels if lvl.concurrency == 1), None)
    samples = level.samples if level else []
    prompts = [s.prompt_tokens for s in samples if isinstance(s.prompt_tokens, int)]
    outputs = [s.output_tokens for s in samples if s.output_tokens]
    half_out = int(statistics.median(outputs) // 2) if outputs else m.workload.max_tokens // 2
    if prompts:
        prompt = int(statistics.median(prompts))
        return prompt + half_out, f"{prompt} prompt tokens (server usage) + {half_out} (half the output)"
    prompt = m.workload.prompt_words * 4 // 3
    return prompt + half_out, f"~{prompt} prompt tokens (estimated from {m.workload.prompt_words} words) + {half_out} (half the output)"


def _missing(model_dir: str | None, why: str) -> dict[str, object]:
    return {"model_dir": model_dir, "ceiling_tok_s": None, "share": None, "missing": why}


def recipe_model_dir(recipe: Recipe) -> tuple[str | None, str | None]:
    """(the recipe's model folder, None) when it is a local folder, else (None, why not)."""
    model = recipe.model
    if not model:
        return None, "the recipe names no model folder"
    if not Path(model).expanduser().is_dir():
        return None, f"the recipe's model {model} is not a local folder (bench --model-dir DIR names one)"
    return str(Path(model).expanduser()), None


def achieved(model_dir: str | None, why_none: str | None, m: Measurement, headline: dict[str, Any] | None,
             argv: list[str], dtype_assumed: str | None = None) -> dict[str, object]:
    """The roofline block of a run: ceiling, achieved share and the assumptions, or why it is missing. `argv`: the
    server's flags (a recipe's, or what a --url server says): its --kv-cache-dtype sizes the KV cache, its --dtype the
    unquantized weights and an auto cache, as the audit reads them; `dtype_assumed`: why --dtype is not known (a --url
    server that does not say it), None when it is (a recipe without one serves at vLLM's default)."""
    if model_dir is None:
        return _missing(None, why_none or "no model folder known")
    if not headline or headline.get("concurrency") != 1 or not headline.get("decode_tps_per_stream"):
        return _missing(model_dir, "no decode speed measured at concurrency 1 (add 1 to --concurrency)")

    context, context_note = _context(m)
    flags = flag_values(argv)
    kv_cache_dtype, dtype = flags.get("kv_cache_dtype", "auto"), flags.get("dtype", "auto")
    try:
        vllm_dtype(dtype)
    except ValueError:
        return _missing(model_dir, f"--dtype {dtype!r} is not a dtype vLLM takes: the ceiling is not sized")
    try:
        ceiling = ceiling_for(model_dir, context=context, kv_cache_dtype=kv_cache_dtype, dtype=dtype)
    except AuditError as exc:
        return _missing(model_dir, f"audit of {model_dir} failed: {exc}")
    tps = float(headline["decode_tps_per_stream"])
    above = ("above the ceiling: the folder is not the model served, or the bandwidth assumed is not this machine's"
             if tps > ceiling["ceiling_tok_s"] else None)
    return {"model_dir": model_dir, "ceiling_tok_s": round(ceiling["ceiling_tok_s"], 2), "achieved_tok_s": round(tps, 2),
            "share": round(tps / ceiling["ceiling_tok_s"], 4) if ceiling["ceiling_tok_s"] else None,
            "bytes_per_token": round(ceiling["bytes_per_token"]), "bandwidth_gbs": ceiling["bandwidth_gbs"],
            "bandwidth_source": ceiling["bandwidth_source"], "context": context, "context_note": context_note,
            "kv_cache_dtype": kv_cache_dtype, "dtype": dtype, "dtype_assumed": dtype_assumed,
            "headline_source": headline.get("source"),
            "line": roofline_line(ceiling, tps) + f"; bandwidth: {ceiling['bandwidth_source']}", "warning": above, "missing": None}
