"""What a launch needs: from the recipe as its reader resolved it (the exact argv) and the checkpoint's headers.

Parts, each with how it is known:
- weights: exact, the bytes of every tensor in the safetensors headers that the server loads (the audit's
  own reader and grouping: MTP/nextn layers only when --speculative-config asks for them), converted when
  --dtype casts the floating-point tensors to another width;
- KV cache: computed from config.json (layers, KV heads, head size or the MLA latent, sliding windows) at
  --max-model-len, in --kv-cache-dtype; vLLM starts only when ONE sequence of --max-model-len fits in its KV
  pool, and the pool then takes the rest of the share (--kv-cache-memory-bytes fixes it instead);
- the reserve vLLM keeps beside them: activations of its profiling run (--max-num-batched-tokens tokens
  through one layer), the sampler's warm-up over --max-num-seqs rows of the vocabulary, CUDA graphs (none
  under --enforce-eager) and the CUDA context. These are estimates and each says what it was derived from;
- a speculative-decoding drafter's weights when --speculative-config names a local checkpoint.
Unset flags take vLLM's own defaults and say so. Nothing here reads a weight or imports vLLM.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor.audit import bytemodel
from sparkdoctor.audit.checkpoint import Checkpoint, load_checkpoint
from sparkdoctor.audit.errors import AuditError
from sparkdoctor.audit.fromrecipe import recipe_settings, vllm_int
from sparkdoctor.audit.modelconfig import ModelShape, read_shape, served_bytes
from sparkdoctor.audit.roofline import vllm_default_max_num_seqs
from sparkdoctor.audit.served_model import model_facts
from sparkdoctor.inputs import NotJSON, NumberTooLong, json_answer
from sparkdoctor.recipes.model import Recipe, flag_value, vllm_spelling
from sparkdoctor.recipes.vllm_config import serve_config, served_argv

GIB = 2**30
BLOCK = 16  # vLLM's default KV block size in tokens (CacheConfig.DEFAULT_BLOCK_SIZE): a sequence holds whole blocks
FLOAT_DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
# Stated estimates (not measured on GB10): vLLM logs the real figures at start ("Graph capturing finished in
# N secs, took X GiB", "Memory profiling takes ... non_torch_memory ..."); the post-mortem reads those lines.
CUDA_GRAPHS_ESTIMATE = 1 * GIB
CUDA_CONTEXT_ESTIMATE = GIB // 2
OUTSIDE = ("cpu-offload", "kv-offload")  # parts in host memory, outside the share
SAMPLER_COPIES = 2  # the warm-up's float32 logits and the probabilities computed from them


class NeedError(AuditError):
    """The launch cannot be sized: a flag value that is not a number, a model with no readable headers."""

    code = "memory-need"


class Unsized(NeedError):
    """The launch is not sized by design (its settings come from where the verdict does not read): not an error of
    the input, `memory-unknown`."""


@dataclass(frozen=True)
class Setting:
    value: Any
    source: str  # "recipe X (--flag V)", "vLLM default ...", "command line"


@dataclass(frozen=True)
class Part:
    name: str  # weights | kv-cache | activations | sampler | cuda-graphs | cuda-context | drafter
    bytes: int
    how: str  # exact | computed | estimate
    source: str


@dataclass
class Need:
    """What one launch takes. The KV and sampler terms are kept per token and per sequence, so the verdict
    can size the same launch at another --max-model-len or --max-num-seqs."""

    recipe: str
    model: str
    settings: dict[str, Setting]
    parts: list[Part]
    kv_bytes_per_token: float  # full-attention layers, all of them, one token (one sequence)
    sliding_bytes_per_token: float = 0.0  # sliding-window layers: at most `sliding_window` tokens
    sliding_window: int | None = None
    state_bytes_per_seq: int = 0  # recurrent state of linear-attention / Mamba layers
    sampler_bytes_per_seq: int = 0
    fixed_kv_bytes: int | None = None  # --kv-cache-memory-bytes: the pool is this, not the share's rest
    block_size: int = BLOCK  # tokens a KV block holds
    notes: list[str] = field(default_factory=list)
    auto_length: bool = False  # --max-model-len auto / -1: vLLM fits the length to its KV pool (max_model_len: the model's)
    ranks: int = 1  # --tensor-parallel-size x --pipeline-parallel-size: the GPUs the launch takes

    def setting(self, name: str) -> Any:
        return self.settings[name].value

    def part(self, name: str) -> int:
        return sum(p.bytes for p in self.parts if p.name == name)

    @property
    def block_bytes(self) -> int:
        """One KV block over all layers: vLLM's block pool keeps one back (its null block) from the start."""
        sliding = self.sliding_bytes_per_token if self.sliding_window else 0.0
        return int((self.kv_bytes_per_token + sliding) * self.block_size)

    def kv_per_seq(self, max_model_len: int) -> int:
        """KV bytes one sequence of `max_model_len` tokens holds, in whole blocks, plus its recurrent state."""
        tokens = math.ceil(max_model_len / self.block_size) * self.block_size
        sliding = tokens
        if self.sliding_window:
            # vLLM's SlidingWindowSpec.max_memory_usage_bytes: a prefill chunk of --max-num-batched-tokens is attended
            # to beside the window, and one block more for a window that does not start on a block's edge
            chunk = int(self.settings["max_num_batched_tokens"].value) if "max_num_batched_tokens" in self.settings else 1
            window = min(self.sliding_window - 1 + chunk, max_model_len)
            sliding = (math.ceil(window / self.block_size) + 1) * self.block_size
        return int(self.kv_bytes_per_token * tokens + self.sliding_bytes_per_token * sliding) + self.state_bytes_per_seq

    def fixed_bytes(self, max_num_seqs: int) -> int:
        """Weights and the reserve, at `max_num_seqs` (the sampler's warm-up grows with it)."""
        others = sum(p.bytes for p in self.parts if p.name not in ("kv-cache", "sampler", *OUTSIDE))
        return others + self.sampler_bytes_per_seq * max_num_seqs

    @property
    def outside_bytes(self) -> int:
        """Host memory the launch takes outside its share (offloaded weights, the KV offloading buffer): on unified
        memory it comes from the same pool."""
        return sum(p.bytes for p in self.parts if p.name in OUTSIDE)

    def least(self, max_model_len: int | None = None, max_num_seqs: int | None = None) -> int:
        """The smallest memory vLLM starts in: weights, reserve and one full-length sequence (or the fixed pool)."""
        seqs = self.setting("max_num_seqs") if max_num_seqs is None else max_num_seqs
        length = self.setting("max_model_len") if max_model_len is None else max_model_len
        kv = self.fixed_kv_bytes if self.fixed_kv_bytes is not None else self.kv_per_seq(length) + self.block_bytes
        return self.fixed_bytes(seqs) + kv

    def to_dict(self) -> dict[str, object]:
        doc = asdict(self)
        doc["settings"] = {k: asdict(v) for k, v in self.settings.items()}
        doc["least_bytes"] = self.least()
        return doc


def launches_vllm(argv: list[str]) -> bool:
    """Whether the command starts a vLLM server (`.../vllm serve`, `python -m vllm.entrypoints.openai.api_server`):
    the sizes here are vLLM's; another server's launch is not judged by them."""
    args = [str(a) for a in argv]
    return any(Path(a).name == "vllm" and args[i + 1:i + 2] == ["serve"] for i, a in enumerate(args)) or \
        any(a.startswith("vllm.entrypoints") for a in args)


def launch_need(recipe: Recipe, model_folder: str | Path, total_bytes: int, gpu_name: str = "NVIDIA GB10") -> Need:
    """The launch `recipe` describes, sized for the checkpoint in `model_folder`; `total_bytes` and
    `gpu_name` choose vLLM's defaults (max_num_seqs, max_num_batched_tokens) as vLLM would on that GPU."""

    config = serve_config(recipe)
    if config is not None and config.problem is not None:
        raise Unsized(f"{recipe.source_path}: {config.problem}")
    argv = [vllm_spelling(a) for a in served_argv(recipe, config)]  # its --config file's options read as vLLM reads them
    checkpoint = load_checkpoint(Path(model_folder))
    shape = read_shape(checkpoint.config, checkpoint.folder / "config.json")
    values, sources = recipe_settings(recipe, {})
    settings = {name: Setting(values[name], sources[name]) for name in values}
    memory_gib = total_bytes / GIB
    if values["max_num_seqs"] is None:
        seqs = vllm_default_max_num_seqs(memory_gib, gpu_name)
        settings["max_num_seqs"] = Setting(seqs, f"vLLM default on {gpu_name} ({seqs}: vllm/engine/arg_utils.py get_batch_defaults)")
    if values["max_model_len"] is None:
        accepted = model_facts(str(checkpoint.folder)).get("max_model_len") or shape.max_position
        if not accepted:
            raise NeedError(f"{checkpoint.folder}/config.json names no max_position_embeddings and the recipe sets no "
                            "--max-model-len: the KV cache cannot be sized")
        auto = sources["max_model_len"] if sources["max_model_len"].startswith("recipe ") else None
        settings["max_model_len"] = Setting(accepted, f"{auto}; judged at the model's own length (config.json)" if auto
                                            else "vLLM default: the model's own length (config.json)")
    big = memory_gib >= 70 and "a100" not in gpu_name.lower()
    settings["max_num_batched_tokens"] = _int_flag(recipe, argv, "--max-num-batched-tokens", 8192 if big else 2048,
                                                   f"vLLM default on {gpu_name} (get_batch_defaults)")
    eager = "--enforce-eager" in argv
    settings["enforce_eager"] = Setting(eager, f"recipe {recipe.name} (--enforce-eager)" if eager else "vLLM default (CUDA graphs on)")
    dtype = str(values["dtype"])  # recipe_settings: as vLLM's parser takes it (its choices), command over --config file
    if dtype == "auto":
        settings["dtype"] = Setting(dtype, "vLLM default (the checkpoint's dtype)")
    if dtype == "auto" and shape.dtype_bytes == 4:
        # vLLM's auto downcasts a float32 checkpoint to the platform's first 16-bit type (config/model.py
        # _resolve_auto_dtype: bfloat16 on CUDA): weights and KV cache are 2 bytes a value
        dtype = "bfloat16"
        settings["dtype"] = Setting("auto", "vLLM default: the float32 checkpoint is cast to bfloat16 (_resolve_auto_dtype)")
    spec = _speculative(recipe, argv)
    act_bytes = served_bytes(dtype) or shape.dtype_bytes  # the audit's one --dtype rule: auto is the checkpoint's width
    kv_bytes = _kv_dtype_bytes(str(settings["kv_cache_dtype"].value), act_bytes, shape)
    per_position = (shape.kv_latent or 2 * shape.kv_heads * shape.head_dim) * kv_bytes
    full, sliding = shape.count("attention"), shape.count("sliding")
    if (full or sliding) and per_position <= 0:
        raise NeedError(f"{checkpoint.folder}/config.json: attention layers with no KV heads or a head size of 0: the KV cache "
                        "cannot be sized")
    for name in ("max_model_len", "max_num_seqs"):
        value = settings[name].value
        if not isinstance(value, int) or value < 1:
            raise NeedError(f"{recipe.source_path}: --{name.replace('_', '-')} {value!r} must be a whole number of at least 1")
    block = _int_flag(recipe, argv, "--block-size", BLOCK, "vLLM default (16; an attention backend may choose larger "
                      "and logs 'Setting kv cache block size to N')")
    settings["block_size"] = block
    need = Need(recipe.name, str(checkpoint.folder), settings, [], per_position * full,
                per_position * sliding if shape.sliding_window else 0.0, shape.sliding_window,
                int(bytemodel.state_bytes_per_token(shape)), block_size=int(block.value))
    if not shape.sliding_window and sliding:
        need.kv_bytes_per_token += per_position * sliding
    need.auto_length = values["max_model_len"] is None and sources["max_model_len"].startswith("recipe ")
    need.parts.append(_weights(checkpoint, shape, dtype, spec.mtp))
    _offload(need, recipe, argv)
    need.ranks = parallel_size(recipe, argv, ("--tensor-parallel-size", "-tp")) * parallel_size(recipe, argv, ("--pipeline-parallel-size", "-pp"))
    fixed = _int_flag(recipe, argv, "--kv-cache-memory-bytes", None, "")
    length, seqs = need.setting("max_model_len"), need.setting("max_num_seqs")
    if fixed.value is not None:
        need.fixed_kv_bytes = int(fixed.value)
        need.parts.append(Part("kv-cache", need.fixed_kv_bytes, "exact", f"--kv-cache-memory-bytes {fixed.value}: the pool, whatever the share"))
    else:
        need.parts.append(Part("kv-cache", need.kv_per_seq(length) + need.block_bytes, "computed",
                               f"one sequence of --max-model-len {length} tokens ({need.kv_bytes_per_token + need.sliding_bytes_per_token:,.0f} "
                               f"bytes a token: {full + sliding} attention layers x {shape.kv_latent or 2 * shape.kv_heads * shape.head_dim} values "
                               f"x {kv_bytes:g} bytes) in blocks of {need.block_size}, and the one block vLLM keeps back; vLLM starts "
                               "when one sequence fits and gives the pool the rest of the share"))
    _reserve(need, shape, checkpoint.config, act_bytes, eager, seqs)
    if spec.folder:
        drafter = load_checkpoint(Path(spec.folder))
        need.parts.append(Part("drafter", sum(t.nbytes for t in drafter.tensors.values()), "exact",
                               f"--speculative-config model {spec.folder} (its safetensors headers)"))
    need.notes += spec.notes
    return need


def _int_flag(recipe: Recipe, argv: list[str], flag: str, default: int | None, default_source: str) -> Setting:
    raw = flag_value(argv, flag)
    if raw is None:
        return Setting(default, default_source)
    try:
        value = vllm_int(raw)
    except ValueError:
        raise NeedError(f"{recipe.source_path}: {flag} {raw!r} is not a whole number (or vLLM's 4G / 4g forms)") from None
    if value < 1:
        raise NeedError(f"{recipe.source_path}: {flag} {raw!r} must be at least 1")
    return Setting(value, f"recipe {recipe.name} ({flag} {raw})")


def parallel_size(recipe: Recipe, argv: list[str], flags: tuple[str, ...]) -> int:
    """The last of `flags` in argv (vLLM's argparse: the last one wins), 1 when unset."""
    raw = None
    for i, arg in enumerate(vllm_spelling(a) for a in argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                raw = argv[i + 1]
            elif arg.startswith(flag + "="):
                raw = arg[len(flag) + 1:]
    if raw is None:
        return 1
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 4) or not 1 <= int(raw) <= 1024:  # "²".isdigit() is True
        raise NeedError(f"{recipe.source_path}: {flags[0]} {raw[:40]!r} is not a whole number from 1 to 1024")
    return int(raw)


def _offload(need: Need, recipe: Recipe, argv: list[str]) -> None:
    """--cpu-offload-gb (weights kept in pinned host memory, up to that many GiB: vllm/model_executor/offloader) and
    --kv-offloading-size (a host buffer for KV blocks, GiB): outside the share, the weights inside it that much less."""
    for flag, name, what in (("--cpu-offload-gb", "cpu-offload", "weights kept in host memory"),
                             ("--kv-offloading-size", "kv-offload", "the KV offloading buffer in host memory")):
        raw = flag_value(argv, flag)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0:
            raise NeedError(f"{recipe.source_path}: {flag} {raw[:40]!r} is not a number of GiB of at least 0")
        size = int(value * GIB)
        if name == "cpu-offload":
            weights = next(p for p in need.parts if p.name == "weights")
            size = min(size, weights.bytes)
            need.parts[need.parts.index(weights)] = Part("weights", weights.bytes - size, weights.how,
                                                         f"{weights.source}; {size / GIB:.1f} GiB of it offloaded ({flag} {raw})")
        if size:
            need.parts.append(Part(name, size, "exact", f"{flag} {raw}: {what}, outside the share"))


def _kv_dtype_bytes(name: str, act_bytes: int, shape: ModelShape) -> float:
    try:
        return bytemodel.kv_width(name, shape, float(act_bytes))[0]
    except ValueError as exc:
        raise NeedError(f"--kv-cache-dtype {name}: {exc}") from None


def _weights(checkpoint: Checkpoint, shape: ModelShape, dtype: str, with_mtp: bool) -> Part:
    """The headers' bytes of every tensor loaded; floating-point tensors at --dtype's width when it casts them."""
    modules = bytemodel.modules_of(checkpoint, shape, 4)
    width = served_bytes(dtype)
    total = 0
    for module in modules:
        if module.group == "mtp" and not with_mtp:
            continue
        for tensor in module.tensors.values():
            cast = width is not None and tensor.dtype in FLOAT_DTYPES and not module.format.quantized
            total += tensor.numel * width if cast and width else tensor.nbytes
    how = f", floating-point tensors cast to --dtype {dtype}" if width else ""
    mtp = "" if with_mtp or not any(m.group == "mtp" for m in modules) else "; MTP layers left out (no --speculative-config asks for them)"
    return Part("weights", total, "exact", f"safetensors headers of {len(checkpoint.shards)} shard(s){how}{mtp}")


def _reserve(need: Need, shape: ModelShape, config: Mapping[str, object], act_bytes: int, eager: bool, seqs: int) -> None:
    text = inner if isinstance(inner := config.get("text_config"), dict) else config
    inter = text.get("moe_intermediate_size") if shape.experts else text.get("intermediate_size")
    inter = inter if isinstance(inter, int) and not isinstance(inter, bool) and inter > 0 else 4 * shape.hidden
    width = inter * max(shape.experts_per_token, 1) if shape.experts else inter
    tokens = need.setting("max_num_batched_tokens")
    activations = tokens * (4 * shape.hidden + 2 * width) * act_bytes
    need.parts.append(Part("activations", activations, "estimate",
                           f"profiling run of --max-num-batched-tokens {tokens} tokens: hidden states, residual, attention "
                           f"and MLP inputs of one layer ({4 * shape.hidden} + 2 x {width} values x {act_bytes} bytes a token)"))
    vocab = shape.vocab or 0
    need.sampler_bytes_per_seq = vocab * 4 * SAMPLER_COPIES
    need.parts.append(Part("sampler", need.sampler_bytes_per_seq * seqs, "estimate",
                           f"the sampler's warm-up: --max-num-seqs {seqs} rows of the {vocab:,}-token vocabulary in float32, "
                           f"logits and probabilities ({SAMPLER_COPIES} copies)"))
    if not eager:
        need.parts.append(Part("cuda-graphs", CUDA_GRAPHS_ESTIMATE, "estimate",
                               "a stated 1 GiB for the captured CUDA graphs (vLLM logs the real size: "
                               "'Graph capturing finished ... took X GiB'); --enforce-eager captures none"))
    need.parts.append(Part("cuda-context", CUDA_CONTEXT_ESTIMATE, "estimate",
                           "a stated 0.5 GiB for the CUDA context and the allocations outside torch's pool"))


@dataclass
class _Speculative:
    """What --speculative-config adds to the need: the checkpoint's MTP layers, or a local drafter's folder."""

    mtp: bool = False
    folder: str | None = None
    notes: list[str] = field(default_factory=list)


def _speculative(recipe: Recipe, argv: list[str]) -> _Speculative:
    raw = flag_value(argv, "--speculative-config")
    if raw is None:
        return _Speculative()
    try:
        spec = json_answer(raw)
    except NotJSON as exc:
        raise NeedError(f"{recipe.source_path}: --speculative-config {exc if isinstance(exc, NumberTooLong) else f'is not JSON: {raw[:80]!r}'}") from None
    if not isinstance(spec, dict):
        raise NeedError(f"{recipe.source_path}: --speculative-config must be a JSON object")
    method, model = str(spec.get("method") or ""), spec.get("model")
    out = _Speculative("mtp" in method.lower() or method in ("deepseek_mtp", "qwen3_next_mtp"))
    if isinstance(model, str) and model and Path(model).is_dir():
        out.folder = model
    elif isinstance(model, str) and model:
        out.notes = [f"--speculative-config names drafter {model}, which is not a local folder: its weights are not counted"]
    return out
