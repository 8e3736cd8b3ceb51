"""The audit, end to end: checkpoint + config -> per-group bytes, bytes per token, the tok/s ceiling, the fit.

`run_audit(AuditOptions)` is what the command calls; `ceiling_for(model_dir, ...)` is the one number a
benchmark needs to say what share of the physical limit it achieved. Neither imports anything heavy and
neither reads a weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from sparkdoctor.audit import bytemodel, gpus
from sparkdoctor.audit.checkpoint import Checkpoint, load_checkpoint, read_json
from sparkdoctor.audit.crosscheck import Disagreement, cross_check
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.formats import UNQUANTIZED
from sparkdoctor.audit.locate import resolve_model
from sparkdoctor.audit.modelconfig import ModelShape, read_shape
from sparkdoctor.audit.quantconfig import QuantConfig, read_quant_configs

GB = 1e9


@dataclass
class AuditOptions:
    model: str
    context: int = 4096
    context_given: bool = True  # False: the CLI's default, capped at the sequence length without a note
    batch: int = 1
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"  # vLLM's --dtype (audit --recipe): the width unquantized weights and an `auto` KV cache are served in
    bandwidth: float | None = None  # GB/s; None: the GPU's (given, detected, else GB10)
    gpu: str | None = None  # a key or name from gpus.GPUS
    detect_gpu: bool = True
    include_mtp: bool = False
    max_model_len: int | None = None  # default: the config's max_position_embeddings, else --context
    max_num_seqs: int | None = 1  # None: vLLM's own default for the GPU (vllm_default_max_num_seqs)
    memory_gib: float | None = None  # default: the GPU's
    gpu_memory_utilization: float = 0.9
    sources: dict[str, str] = field(default_factory=dict)  # option -> where its value came from (audit --recipe)
    notes: list[str] = field(default_factory=list)  # what the reader must know about these settings (audit --recipe)


@dataclass
class Fit:
    weights: int
    kv_cache: float
    budget: float
    max_model_len: int
    max_num_seqs: int
    memory_gib: float
    utilization: float
    full_length_seqs: int = 0  # how many sequences of max_model_len tokens the memory left after the weights holds
    judged_seqs: int = 0  # the full-length sequences the fit asks room for (max_num_seqs, or 1 under vLLM's default)

    @property
    def fits(self) -> bool:
        return self.weights + self.kv_cache <= self.budget

    def to_dict(self) -> dict[str, object]:
        return {"fits": self.fits, "weights_bytes": self.weights, "kv_cache_bytes": round(self.kv_cache),
                "budget_bytes": round(self.budget), "headroom_bytes": round(self.budget - self.weights - self.kv_cache),
                "max_model_len": self.max_model_len, "max_num_seqs": self.max_num_seqs,
                "memory_gib": round(self.memory_gib, 2), "gpu_memory_utilization": self.utilization,
                "full_length_seqs": self.full_length_seqs, "judged_seqs": self.judged_seqs}


@dataclass
class Audit:
    folder: Path
    shape: ModelShape
    quant: list[QuantConfig]
    groups: list[bytemodel.GroupRow]
    weights_per_token: float
    kv_per_token: float
    state_per_token: float
    kv_dtype: str
    kv_dtype_bytes: float
    read_by_format: dict[str, float]
    bandwidth: float
    bandwidth_source: str
    gpu: str
    options: AuditOptions
    fit: Fit
    disagreements: list[Disagreement]
    bytes_read: int
    bytes_on_disk: int
    step_bytes: float = 0.0  # one decode step of --batch sequences
    notes: list[str] = field(default_factory=list)

    @property
    def bytes_per_token(self) -> float:
        return self.weights_per_token + self.kv_per_token + self.state_per_token

    @property
    def ceiling(self) -> float:
        """Single-stream decode tok/s at the bandwidth."""
        return self.bandwidth * GB / self.bytes_per_token

    @property
    def active_params(self) -> float:
        return sum(g.params_read for g in self.groups)

    @property
    def unquantized_share(self) -> float:
        unq = sum(v for k, v in self.read_by_format.items() if k in UNQUANTIZED)
        return unq / self.weights_per_token if self.weights_per_token else 0.0


def _bandwidth(options: AuditOptions) -> tuple[float, str, gpus.Gpu]:
    gpu = None
    if options.gpu:
        gpu = gpus.by_name(options.gpu)
        if gpu is None:
            raise AuditError(f"--gpu {options.gpu}: not a known GPU (known: {', '.join(g.key for g in gpus.GPUS)}); give --bandwidth GB/s instead")
        source = f"--gpu {options.gpu}"
    elif options.detect_gpu and options.bandwidth is None:
        name, _why = gpus.detect()
        gpu = gpus.by_name(name) if name else None
        source = f"detected {name}" if gpu else (f"detected {name}, not in the table: GB10 assumed" if name else "no GPU detected: GB10 assumed")
    else:
        source = "default (GB10)"
    gpu = gpu or gpus.DEFAULT
    if options.bandwidth is not None:
        if not options.bandwidth > 0:
            raise AuditError(f"--bandwidth {options.bandwidth}: must be a positive number of GB/s")
        return options.bandwidth, "--bandwidth", gpu
    return float(gpu.bandwidth_gbs), source, gpu


def _kv_dtype(options: AuditOptions, shape: ModelShape, quant: list[QuantConfig]) -> tuple[str, float]:
    name = options.kv_cache_dtype
    if name == "auto":  # the model's own dtype
        scaled = next((q.source for q in quant if q.kv_cache_dtype == "fp8"), None)
        hint = f"; {scaled} carries FP8 KV scales: --kv-cache-dtype fp8 uses them" if scaled else ""
        return f"auto (model dtype, {shape.dtype_bytes} bytes{hint})", float(shape.dtype_bytes)
    try:
        width, how = bytemodel.kv_width(name, shape, float(shape.dtype_bytes))
    except ValueError as exc:
        source = options.sources.get("kv_cache_dtype", "")
        given = f" ({source})" if source.startswith("recipe ") else ""  # a recipe's value: say whose it is
        raise AuditError(f"--kv-cache-dtype {options.kv_cache_dtype}{given}: {exc}") from None
    return how, width


def _check_options(options: AuditOptions) -> None:
    # Every number an option may hold: (flag, value, lowest, highest). The highest keep the arithmetic finite
    # (1e308 GiB times 2**30 is inf, and inf cannot become an int) and are far past any real machine or model.
    bounds: list[tuple[str, Any, float, float]] = [
        ("--context", options.context, 0, 2**40), ("--batch", options.batch, 1, 2**20),
        ("--max-num-seqs", options.max_num_seqs, 1, 2**20), ("--max-model-len", options.max_model_len, 1, 2**40),
        ("--gpu-memory-utilization", options.gpu_memory_utilization, 1e-9, 1),
        ("--memory", options.memory_gib, 1e-9, 2**30), ("--bandwidth", options.bandwidth, 1e-9, 1e9)]
    for flag, value, low, high in bounds:
        if value is None and flag in ("--max-model-len", "--memory", "--bandwidth", "--max-num-seqs"):
            continue  # not given: the config's or the GPU's (vLLM's max-num-seqs default is resolved in _fit)
        if value is None or not (isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high):
            unit = {"--memory": " GiB", "--bandwidth": " GB/s"}.get(flag, "")
            lowest = "above 0" if low == 1e-9 else f"at least {low:g}"
            highest = f"{int(high):,}" if float(high).is_integer() else f"{high:g}"
            raise AuditError(f"{flag} {value}: must be a number {lowest} and at most {highest}{unit}")


def run_audit(options: AuditOptions, checkpoint: Checkpoint | None = None) -> Audit:
    _check_options(options)
    if checkpoint is None:
        checkpoint = load_checkpoint(resolve_model(options.model))
    shape = read_shape(checkpoint.config, checkpoint.folder / "config.json", served=True, serve_dtype=options.dtype)
    if shape.cast_from and options.dtype == "auto":
        options.notes.append("config.json's torch_dtype is float32: vLLM's --dtype auto serves it in bfloat16, so its "
                             "float32 weights and the KV cache are counted at 2 bytes a value (--dtype float32 would double them)")
    quant = read_quant_configs(checkpoint.config, read_json(checkpoint.folder / "hf_quant_config.json", required=False))
    bits = next((q.bits for q in quant if q.method in ("gptq", "awq", "compressed-tensors")), 4)
    modules = bytemodel.modules_of(checkpoint, shape, bits)
    groups = bytemodel.group_rows(modules, shape, options.include_mtp)
    tied_read = next((g.bytes_read for g in groups if g.key == "lm_head" and g.bytes_stored == 0), 0.0)
    weights = sum(g.bytes_read for g in groups)
    kv_name, kv_bytes = _kv_dtype(options, shape, quant)
    _clamp_context(options, shape)
    kv = bytemodel.kv_bytes_per_token(shape, options.context, kv_bytes)
    state = float(bytemodel.state_bytes_per_token(shape))
    if weights + kv + state <= 0:
        raise AuditError(f"{checkpoint.folder}: a decoded token reads 0 bytes ({len(checkpoint.tensors)} tensors, none a decoder "
                         f"weight read per token; {shape.layers} layers in config.json): no ceiling to put on it")
    bandwidth, source, gpu = _bandwidth(options)
    disagreements = [d for q in quant for d in cross_check(modules, q)]
    audit = Audit(checkpoint.folder, shape, quant, groups, weights, kv, state, kv_name, kv_bytes,
                  bytemodel.read_by_format(modules, shape, options.include_mtp, tied_read), bandwidth, source, gpu.name,
                  options, _fit(options, shape, groups, kv_bytes, gpu), disagreements, checkpoint.bytes_read, checkpoint.bytes_on_disk)
    audit.step_bytes = _step_bytes(audit, groups, shape, options.batch)
    return audit


def _clamp_context(options: AuditOptions, shape: ModelShape) -> None:
    """A decoded token attends to at most max_model_len tokens (the server's length, else the model's): a longer
    --context would size a KV read no request can make, and a ceiling lower than the server can reach."""
    longest = options.max_model_len or shape.max_position
    if longest and options.context > longest:
        if not options.context_given:  # the user named no context: the default is no claim to correct
            options.context = longest
            return
        where = options.sources.get("max_model_len", "--max-model-len" if options.max_model_len else "the model's config")
        options.notes.append(f"--context {options.context} is longer than the {longest} tokens a sequence may hold ({where}): "
                             f"the KV cache read per token is sized at {longest}")
        options.context = longest


def _step_bytes(audit: Audit, groups: list[bytemodel.GroupRow], shape: ModelShape, batch: int) -> float:
    experts = next((g for g in groups if g.key == "experts"), None)
    dense = audit.weights_per_token - (experts.bytes_read if experts else 0.0)
    routed = experts.bytes_served * bytemodel.expert_fraction(shape, batch) if experts else 0.0
    return dense + routed + batch * (audit.kv_per_token + audit.state_per_token)


def _fit(options: AuditOptions, shape: ModelShape, groups: list[bytemodel.GroupRow], kv_bytes: float, gpu: gpus.Gpu) -> Fit:
    weights = sum(g.bytes_served for g in groups if options.include_mtp or g.key != "mtp")  # as vLLM holds them
    max_len = options.max_model_len or shape.max_position or options.context
    per_seq = bytemodel.kv_bytes_per_token(shape, max_len, kv_bytes) + bytemodel.state_bytes_per_token(shape)
    memory = options.memory_gib or gpu.memory_gib
    if options.max_num_seqs is not None:
        seqs = judged = options.max_num_seqs
    else:
        # Not set: vLLM admits up to its default and starts when ONE full-length sequence fits (its own check);
        # the fit asks that, and says how many full-length sequences the pool holds.
        seqs, judged = vllm_default_max_num_seqs(memory, gpu.name), 1
        options.sources["max_num_seqs"] = (f"vLLM's default on {gpu.name}: {seqs} (1024 on a GPU of 70 GiB or more that "
                                           "is not an A100, else 256; vllm/engine/arg_utils.py get_batch_defaults); the fit "
                                           "asks room for one full-length sequence, as vLLM's start does")
        options.max_num_seqs = seqs
    budget = memory * 2**30 * options.gpu_memory_utilization
    full = int(max(0.0, budget - weights) // per_seq) if per_seq > 0 else 0
    return Fit(weights, per_seq * judged, budget, max_len, seqs, memory, options.gpu_memory_utilization, full, judged)


def vllm_default_max_num_seqs(memory_gib: float, gpu_name: str) -> int:
    """vLLM's max_num_seqs for `vllm serve` when none is given (EngineArgs.get_batch_defaults, OPENAI_API_SERVER):
    1024 on a GPU with 70 GiB or more whose name has no "a100", else 256."""
    return 1024 if memory_gib >= 70 and "a100" not in gpu_name.lower() else 256


class Ceiling(TypedDict):
    """What a bench report takes from the audit (ceiling_for)."""

    ceiling_tok_s: float
    bytes_per_token: float
    bandwidth_gbs: float
    bandwidth_source: str
    context: int
    batch_ceiling_tok_s: float


def ceiling_for(model_dir: str | Path, bandwidth: float | None = None, context: int = 4096, kv_cache_dtype: str = "auto",
                batch: int = 1, gpu: str | None = None, dtype: str = "auto") -> Ceiling:
    """The roofline for a bench report: tok/s ceiling and the bytes behind it (AuditError if it cannot); `dtype`: the
    server's --dtype."""
    audit = run_audit(AuditOptions(str(model_dir), context=context, batch=batch, kv_cache_dtype=kv_cache_dtype,
                                   bandwidth=bandwidth, gpu=gpu, dtype=dtype))
    return {"ceiling_tok_s": audit.ceiling, "bytes_per_token": audit.bytes_per_token, "bandwidth_gbs": audit.bandwidth,
            "bandwidth_source": audit.bandwidth_source, "context": audit.options.context, "batch_ceiling_tok_s": batch * audit.bandwidth * GB / audit.step_bytes}


def roofline_line(ceiling: Ceiling, measured_tok_s: float) -> str:
    """The line a bench report prints under a measured decode speed, from `ceiling_for`'s answer."""
    share = measured_tok_s / ceiling["ceiling_tok_s"] if ceiling["ceiling_tok_s"] else 0.0
    return (f"roofline: {measured_tok_s:.1f} tok/s is {share:.0%} of the {ceiling['ceiling_tok_s']:.1f} tok/s ceiling "
            f"({ceiling['bytes_per_token'] / 1e9:.2f} GB per token at {ceiling['bandwidth_gbs']:g} GB/s, {ceiling['context']} tokens of context)")
