"""`sparkdoctor audit MODEL`: the roofline of a checkpoint from its headers (pipeline: sparkdoctor/audit/).

Imports only typer and sparkdoctor.cli_support at module level: the pipeline loads when the command runs.
"""

from __future__ import annotations

import typer

from sparkdoctor.cli_support import Fatal, time_limited, timeout_option
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format


def register(app: typer.Typer) -> None:
    app.command(name="audit")(audit)


def audit(
    model: str | None = typer.Argument(None, help="Checkpoint folder, or a model in the Hugging Face cache: org/name, org/name@revision or a snapshot id (never downloaded). Optional with --recipe: the recipe's model."),
    recipe: str | None = typer.Option(None, "--recipe", help="Size the fit as this recipe launches (its --max-model-len, --max-num-seqs, --gpu-memory-utilization, --kv-cache-dtype); options given here win."),
    sets: list[str] | None = typer.Option(None, "--set", help="--recipe parameter key=value or env.NAME=value (repeatable)."),
    bandwidth: float | None = typer.Option(None, "--bandwidth", help="Memory bandwidth in GB/s (default: the GPU's; GB10 = 273)."),
    gpu: str | None = typer.Option(None, "--gpu", help="Take bandwidth and memory from this GPU (gb10, h100-sxm, h100-pcie, h200, ...) instead of the detected one."),
    context: int = typer.Option(4096, "--context", help="Tokens of context each decoded token attends to (KV cache read per token)."),
    batch: int = typer.Option(1, "--batch", help="Sequences decoded together (aggregate ceiling; MoE experts touched grow with it)."),
    kv_cache_dtype: str | None = typer.Option(None, "--kv-cache-dtype", help="(default auto) auto (the model's dtype) | bfloat16 | float16 | fp8 | fp8_e4m3 | fp8_e5m2 | float32."),
    mtp: bool = typer.Option(False, "--mtp", help="Count the MTP / nextn heads as read every step (speculative decoding on)."),
    max_model_len: int | None = typer.Option(None, "--max-model-len", help="For the fit: tokens per sequence (default: the config's max_position_embeddings)."),
    max_num_seqs: int | None = typer.Option(None, "--max-num-seqs", help="For the fit: sequences whose full KV cache must fit at once (default 1; with --recipe, vLLM's own default for the GPU)."),
    memory: float | None = typer.Option(None, "--memory", help="For the fit: GPU memory in GiB (default: the GPU's; GB10 = 119.7)."),
    gpu_memory_utilization: float | None = typer.Option(None, "--gpu-memory-utilization", help="For the fit: the share of memory the server may use (vLLM's flag; default 0.9)."),
    fmt: str = format_option(Format.console, Format.json),
    timeout: float = timeout_option(),
) -> None:
    """Read a checkpoint's headers (never its weights): bytes per decoded token by module group, what stays
    unquantized, the tok/s ceiling at the memory bandwidth, and whether weights + KV cache fit."""
    if fmt not in ("console", "json"):
        raise Fatal(f"--format {fmt}: choose one of console, json")
    if sets and recipe is None:
        raise Fatal("--set needs --recipe: it sets the recipe's parameters")
    with time_limited(timeout, "audit"):  # an OutOfTime, like an AuditError, is exit 2 by itself
        from sparkdoctor.audit import AuditOptions, fromrecipe, run_audit
        from sparkdoctor.exitcodes import EXIT_AUDIT_FINDINGS, EXIT_OK

        explicit = {"max_model_len": max_model_len, "max_num_seqs": max_num_seqs, "gpu_memory_utilization": gpu_memory_utilization,
                    "kv_cache_dtype": kv_cache_dtype}
        if recipe is not None:
            from sparkdoctor.commands.recipe import parse_sets
            from sparkdoctor.recipes import load

            loaded = load(recipe, parse_sets(sets))
            values, sources = fromrecipe.recipe_settings(loaded, explicit)
            model = fromrecipe.recipe_model(loaded, model)
            from sparkdoctor.conclusions.served_model import model_facts

            note = fromrecipe.max_model_len_note(values["max_model_len"], model_facts(model).get("max_model_len"),
                                                 sources["max_model_len"])
            notes = [note] if note else []
        elif model is None:
            raise Fatal("give MODEL (a checkpoint folder), or --recipe RECIPE whose model is a local folder")
        else:
            values = {k: v if v is not None else fromrecipe.DEFAULTS[k] for k, v in explicit.items()}
            sources = {}
            notes = []
        options = AuditOptions(model, context=context, batch=batch, bandwidth=bandwidth, gpu=gpu, include_mtp=mtp,
                               memory_gib=memory, sources=sources, notes=notes, **values)
        result = run_audit(options)  # an AuditError or RecipeError is exit 2 by itself
    bad = not result.fit.fits or any(d.kind != "stale-ignore-entry" for d in result.disagreements)
    if fmt == "json":
        from sparkdoctor.audit.report import audit_to_dict
        from sparkdoctor.emit import emit_json

        emit_json("audit", "audit", audit_to_dict(result), EXIT_AUDIT_FINDINGS if bad else EXIT_OK)
    else:
        from rich.console import Console

        from sparkdoctor.audit.report import render_console
        from sparkdoctor.emit import emit_console

        emit_console(lambda console: render_console(result, console), Console(width=140))
    raise typer.Exit(EXIT_AUDIT_FINDINGS if bad else EXIT_OK)
