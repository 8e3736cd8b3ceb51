"""`sparkdoctor audit MODEL`: the roofline of a checkpoint from its headers (pipeline: sparkdoctor/audit/).

The pipeline loads when the command runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import typer

from sparkdoctor.cli_support import DEFAULT_TIMEOUT
from sparkdoctor.commands.options import (
    EMPTY,
    NAMES_A_FILE,
    Fmt,
    Output,
    Timeout,
    format_option,
    parse_sets,
    verb,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.views.audit import VIEW

if TYPE_CHECKING:
    from sparkdoctor.audit.roofline import Audit

FORMATS = VIEW.formats


@dataclass
class AuditCommand:
    model: Annotated[str | None, typer.Argument(help="Checkpoint folder, or a model in the Hugging Face cache: org/name, org/name@revision or a snapshot id (never downloaded). Optional with --recipe: the recipe's model.")] = None
    recipe: Annotated[str | None, typer.Option("--recipe", help="Size the fit as this recipe launches (its --max-model-len, --max-num-seqs, --gpu-memory-utilization, --kv-cache-dtype, --dtype); options given here win."), NAMES_A_FILE] = None
    sets: Annotated[list[str], typer.Option("--set", help="--recipe parameter key=value or env.NAME=value (repeatable)."), EMPTY] = field(default_factory=list)
    bandwidth: Annotated[float | None, typer.Option("--bandwidth", help="Memory bandwidth in GB/s (default: the GPU's; GB10 = 273).")] = None
    gpu: Annotated[str | None, typer.Option("--gpu", help="Take bandwidth and memory from this GPU (gb10, h100-sxm, h100-pcie, h200, ...) instead of the detected one.")] = None
    context: Annotated[int | None, typer.Option("--context", help="Tokens of context each decoded token attends to (KV cache read per token; default 4096, or the tokens a sequence may hold when fewer).")] = None
    batch: Annotated[int, typer.Option("--batch", help="Sequences decoded together (aggregate ceiling; MoE experts touched grow with it).")] = 1
    kv_cache_dtype: Annotated[str | None, typer.Option("--kv-cache-dtype", help="(default auto) auto (the model's dtype) | bfloat16 | float16 | fp8 | fp8_e4m3 | fp8_e5m2 | fp8_inc | fp8_ds_mla | nvfp4_ds_mla (DeepSeek V3.2 MLA) | turboquant_k8v4 | turboquant_4bit_nc | turboquant_k3v4_nc | turboquant_3bit_nc; spelled as vLLM takes them (case too).")] = None
    mtp: Annotated[bool, typer.Option("--mtp", help="Count the MTP / nextn heads as read every step (speculative decoding on).")] = False
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", help="For the fit: tokens per sequence (default: the config's max_position_embeddings).")] = None
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", help="For the fit: sequences whose full KV cache must fit at once (default 1; with --recipe, vLLM's own default for the GPU).")] = None
    memory: Annotated[float | None, typer.Option("--memory", help="For the fit: GPU memory in GiB (default: the GPU's; GB10 = 119.7).")] = None
    gpu_memory_utilization: Annotated[float | None, typer.Option("--gpu-memory-utilization", help="For the fit: the share of memory the server may use (vLLM's flag; default 0.9).")] = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    timeout: Timeout = DEFAULT_TIMEOUT

    def refuse_bad_options(self) -> None:
        """Every usage error of `audit` that needs no file read (exit 2, one line)."""
        from sparkdoctor.runlimit import refuse_bad_timeout

        Format.parse(self.fmt, FORMATS)
        refuse_bad_timeout(self.timeout)
        if self.sets and self.recipe is None:
            raise UsageError("--set needs --recipe: it sets the recipe's parameters")
        if self.model is None and self.recipe is None:
            raise UsageError("give MODEL (a checkpoint folder), or --recipe RECIPE whose model is a local folder")


def run(options: AuditCommand) -> Result[Audit]:
    """The audit of the checkpoint; exit 1 when it does not fit or its config disagrees with its tensors. An
    AuditError, RecipeError or OutOfTime is exit 2 by itself."""
    from sparkdoctor.runlimit import run_limit

    options.refuse_bad_options()
    with run_limit(options.timeout, "audit"):
        audit = _audit(options)
    bad = not audit.fit.fits or any(d.kind != "stale-ignore-entry" for d in audit.disagreements)
    from sparkdoctor.exitcodes import EXIT_AUDIT_FINDINGS, EXIT_OK

    return Result("audit", "audit", audit, exit_code=EXIT_AUDIT_FINDINGS if bad else EXIT_OK)


def _audit(options: AuditCommand) -> Audit:
    from sparkdoctor.audit import fromrecipe
    from sparkdoctor.audit.roofline import AuditOptions, run_audit

    explicit = {"max_model_len": options.max_model_len, "max_num_seqs": options.max_num_seqs,
                "gpu_memory_utilization": options.gpu_memory_utilization, "kv_cache_dtype": options.kv_cache_dtype}
    model = options.model
    notes: list[str] = []
    sources: dict[str, str] = {}
    if options.recipe is not None:
        from sparkdoctor.audit.served_model import model_facts
        from sparkdoctor.recipes import load

        loaded = load(options.recipe, parse_sets(options.sets))
        values, sources = fromrecipe.recipe_settings(loaded, explicit)
        model = fromrecipe.recipe_model(loaded, model)
        note = fromrecipe.max_model_len_note(values["max_model_len"], model_facts(model).get("max_model_len"),
                                             sources["max_model_len"])
        notes = [n for n in (note, fromrecipe.tensor_parallel_note(loaded)) if n]
    else:
        values = {k: v if v is not None else fromrecipe.DEFAULTS[k] for k, v in explicit.items()}
    assert model is not None  # refuse_bad_options: MODEL or --recipe
    return run_audit(AuditOptions(model, context=4096 if options.context is None else options.context,
                                  context_given=options.context is not None, batch=options.batch, bandwidth=options.bandwidth,
                                  gpu=options.gpu, include_mtp=options.mtp, memory_gib=options.memory, sources=sources,
                                  notes=notes, **values))


def register(app: typer.Typer) -> None:
    app.command(name="audit")(verb(AuditCommand, run, """
        Read a checkpoint's headers (never its weights): bytes per decoded token by module group, what stays unquantized, the tok/s ceiling at the memory bandwidth, and whether weights + KV cache fit."""))
