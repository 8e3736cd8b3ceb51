"""`sparkdoctor audit MODEL`: the roofline of a checkpoint from its headers (pipeline: sparkdoctor/audit/).

Imports only typer and sparkdoctor.cli_support at module level: the pipeline loads when the command runs.
"""

from __future__ import annotations

from typing import Optional

import typer

from sparkdoctor.cli_support import Fatal


def register(app: typer.Typer) -> None:
    app.command(name="audit")(audit)


def audit(
    model: str = typer.Argument(..., help="Checkpoint folder, or a model in the Hugging Face cache: org/name, org/name@revision or a snapshot id (never downloaded)."),
    bandwidth: Optional[float] = typer.Option(None, "--bandwidth", help="Memory bandwidth in GB/s (default: the GPU's; GB10 = 273)."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Take bandwidth and memory from this GPU (gb10, h100-sxm, h100-pcie, h200, ...) instead of the detected one."),
    context: int = typer.Option(4096, "--context", help="Tokens of context each decoded token attends to (KV cache read per token)."),
    batch: int = typer.Option(1, "--batch", help="Sequences decoded together (aggregate ceiling; MoE experts touched grow with it)."),
    kv_cache_dtype: str = typer.Option("auto", "--kv-cache-dtype", help="auto (the model's dtype) | bfloat16 | float16 | fp8 | fp8_e4m3 | fp8_e5m2 | float32."),
    mtp: bool = typer.Option(False, "--mtp", help="Count the MTP / nextn heads as read every step (speculative decoding on)."),
    max_model_len: Optional[int] = typer.Option(None, "--max-model-len", help="For the fit: tokens per sequence (default: the config's max_position_embeddings)."),
    max_num_seqs: int = typer.Option(1, "--max-num-seqs", help="For the fit: sequences whose full KV cache must fit at once."),
    memory: Optional[float] = typer.Option(None, "--memory", help="For the fit: GPU memory in GiB (default: the GPU's; GB10 = 119.7)."),
    gpu_memory_utilization: float = typer.Option(0.9, "--gpu-memory-utilization", help="For the fit: the share of memory the server may use (vLLM's flag)."),
    fmt: str = typer.Option("console", "--format", "-f", help="console | json"),
) -> None:
    """Read a checkpoint's headers (never its weights): bytes per decoded token by module group, what stays
    unquantized, the tok/s ceiling at the memory bandwidth, and whether weights + KV cache fit."""
    if fmt not in ("console", "json"):
        raise Fatal(f"--format {fmt}: choose one of console, json")
    from sparkdoctor.audit import AuditError, AuditOptions, run_audit
    from sparkdoctor.exitcodes import EXIT_AUDIT_FINDINGS, EXIT_OK

    options = AuditOptions(model, context=context, batch=batch, kv_cache_dtype=kv_cache_dtype, bandwidth=bandwidth, gpu=gpu,
                           include_mtp=mtp, max_model_len=max_model_len, max_num_seqs=max_num_seqs, memory_gib=memory,
                           gpu_memory_utilization=gpu_memory_utilization)
    try:
        result = run_audit(options)
    except AuditError as exc:
        raise Fatal(str(exc)) from None
    if fmt == "json":
        import json
        import sys

        from sparkdoctor.audit.report import audit_to_dict

        sys.stdout.write(json.dumps(audit_to_dict(result), indent=2) + "\n")
    else:
        from rich.console import Console

        from sparkdoctor.audit.report import render_console

        render_console(result, Console(width=140))
    bad = not result.fit.fits or any(d.kind != "stale-ignore-entry" for d in result.disagreements)
    raise typer.Exit(EXIT_AUDIT_FINDINGS if bad else EXIT_OK)
