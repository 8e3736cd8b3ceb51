"""Bytes per decoded token, per module group, from the headers (what is stored) and the config (what is read).

The rules, for one decode step of one sequence (single-stream decode is bandwidth-bound, so these bytes over
the memory bandwidth bound tokens/s from above):
- every linear weight and its scales is read once: attention, dense MLP, SSM/GDN mixers, routers, shared
  experts, norms, lm_head (a tied lm_head reads the whole embedding matrix);
- the embedding: one row;
- routed MoE experts: top-k of E, i.e. k/E of the expert bytes. That is the EXPECTED value under uniform
  routing; a real router is not uniform, and a batch of B sequences touches 1 - (1 - k/E)^B of the experts;
- MTP / nextn heads: not read unless asked (they run only with speculative decoding);
- vision/audio encoders: not read while decoding text;
- KV cache: every attention layer reads the keys and values of the whole context (sliding-window layers:
  at most the window; MLA: the latent); linear-attention / Mamba layers read their recurrent state instead.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sparkdoctor.audit.checkpoint import Checkpoint
from sparkdoctor.audit.formats import UNQUANTIZED, Format, classify
from sparkdoctor.audit.modelconfig import ModelShape
from sparkdoctor.audit.modules import GROUPS, group_of, split_name
from sparkdoctor.audit.safetensors import TensorInfo

NOT_READ = {"vision"}


@dataclass
class Module:
    name: str
    group: str
    tensors: dict[str, TensorInfo]
    format: Format  # as stored in the file
    nbytes: int = 0  # all its tensors as vLLM holds them (a cast tensor at the served width), computed once (a MoE has 100,000 modules)
    disk_bytes: int = 0  # all its tensors as the file stores them
    served: str = ""  # the format vLLM holds it in: format.name, or the --dtype's (F32, BF16, F16) where it casts the module


@dataclass
class GroupRow:
    key: str
    label: str
    modules: int = 0
    params: int = 0
    bytes_stored: int = 0  # as the files hold them
    bytes_read: float = 0.0  # per decoded token, one sequence
    params_read: float = 0.0  # parameters behind bytes_read (the "active" parameters)
    formats: dict[str, int] = field(default_factory=dict)  # stored format -> bytes stored
    note: str = ""
    bytes_served: int = 0  # as vLLM holds them: a module --dtype casts at the served width (what the fit and reads count)
    formats_served: dict[str, int] = field(default_factory=dict)  # served format -> bytes served

    @property
    def cast(self) -> bool:
        """Whether vLLM holds this group in another format or size than the files store it."""
        return self.bytes_served != self.bytes_stored or self.formats_served.keys() != self.formats.keys()

    def to_dict(self) -> dict:
        return {"group": self.key, "label": self.label, "modules": self.modules, "params": self.params,
                "bytes_stored": self.bytes_stored, "bytes_read_per_token": round(self.bytes_read),
                "params_read_per_token": round(self.params_read),
                "formats": dict(sorted(self.formats.items(), key=lambda kv: -kv[1])), "note": self.note,
                "bytes_served": self.bytes_served,
                "formats_served": dict(sorted(self.formats_served.items(), key=lambda kv: -kv[1]))}


def modules_of(checkpoint: Checkpoint, shape: ModelShape, bits: int) -> list[Module]:
    """The checkpoint's modules; with `shape.cast_from` (a float32 checkpoint served in 16 bits, or --dtype), an unquantized
    module's floating-point tensors count at the served width (`nbytes`) in the served format (`served`), as vLLM loads
    them; `format` and `disk_bytes` stay what the file stores."""
    grouped: dict[str, dict[str, TensorInfo]] = defaultdict(dict)
    for tensor in checkpoint.tensors.values():
        module, role = split_name(tensor.name, len(tensor.shape))
        grouped[module][role] = tensor
    modules = []
    for name, tensors in sorted(grouped.items()):
        fmt = classify(tensors, bits)
        cast = shape.cast_from is not None and not fmt.quantized
        served = shape.served_format if cast and fmt.name in UNQUANTIZED and shape.served_format else fmt.name
        nbytes = sum(t.numel * shape.dtype_bytes if cast and t.dtype in UNQUANTIZED else t.nbytes for t in tensors.values())
        disk = sum(t.nbytes for t in tensors.values())
        modules.append(Module(name, group_of(name, shape.layers), tensors, fmt, nbytes, disk, served))
    return modules


def expert_fraction(shape: ModelShape, batch: int = 1) -> float:
    """Expected share of the routed experts one decode step reads, for uniform routing."""
    if not shape.experts or not shape.experts_per_token:
        return 1.0
    k_over_e = min(shape.experts_per_token / shape.experts, 1.0)
    return 1.0 - (1.0 - k_over_e) ** max(batch, 1)


def group_rows(modules: list[Module], shape: ModelShape, include_mtp: bool) -> list[GroupRow]:
    rows: dict[str, GroupRow] = {}
    fraction = expert_fraction(shape)
    for module in modules:
        row = rows.setdefault(module.group, GroupRow(module.group, GROUPS[module.group]))
        row.modules += 1
        row.params += module.format.params
        row.bytes_stored += module.disk_bytes
        row.formats[module.format.name] = row.formats.get(module.format.name, 0) + module.disk_bytes
        row.bytes_served += module.nbytes
        row.formats_served[module.served] = row.formats_served.get(module.served, 0) + module.nbytes
        read = _read(module, fraction, include_mtp)
        row.bytes_read += read
        row.params_read += module.format.params * read / module.nbytes if module.nbytes else 0.0
    _notes(rows, shape, fraction, include_mtp)
    if shape.tied_embeddings and "lm_head" not in rows and "embeddings" in rows:
        emb = rows["embeddings"]
        rows["lm_head"] = GroupRow("lm_head", "lm_head (tied to the embeddings)", bytes_read=float(emb.bytes_served), params_read=float(emb.params),
                                   note="tied: stored once (in embeddings), the whole matrix is read per token")
    order = list(GROUPS)
    return sorted(rows.values(), key=lambda r: order.index(r.key))


def _read(module: Module, fraction: float, include_mtp: bool) -> float:
    if module.group in NOT_READ or (module.group == "mtp" and not include_mtp):
        return 0.0
    if module.group == "experts":
        return module.nbytes * fraction
    if module.group == "embeddings":
        weight = module.tensors.get("weight") or max(module.tensors.values(), key=lambda t: t.nbytes)
        rows = weight.shape[0] if weight.shape else 1
        return module.nbytes / max(rows, 1)
    return float(module.nbytes)


def _notes(rows: dict[str, GroupRow], shape: ModelShape, fraction: float, include_mtp: bool) -> None:
    if "experts" in rows:
        rows["experts"].note = f"top-{shape.experts_per_token} of {shape.experts}: expected value for uniform routing ({fraction:.2%})"
    if "embeddings" in rows:
        rows["embeddings"].note = "one row per token"
    if "mtp" in rows and not include_mtp:
        rows["mtp"].note = "not read (speculative decoding off; --mtp counts it)"
    if "vision" in rows:
        rows["vision"].note = "not read while decoding text"


def read_by_format(modules: list[Module], shape: ModelShape, include_mtp: bool, tied_embedding_read: float) -> dict[str, float]:
    """Bytes read per token, by the format vLLM holds them in (for the unquantized share)."""
    fraction = expert_fraction(shape)
    out: dict[str, float] = defaultdict(float)
    for module in modules:
        out[module.served] += _read(module, fraction, include_mtp)
    if tied_embedding_read:
        for module in modules:
            if module.group == "embeddings":
                out[module.served] += module.nbytes
    return dict(out)


# vllm serve --kv-cache-dtype's choices (vllm/config/cache.py `CacheDType`, read at vllm-project/vllm 002f10e0, the
# source with the turboquant presets below): a Literal its argparse takes exactly, case and all, so `FP8`, `half` and
# `float32` stop the server (none of them was ever a choice: the older c1d86421 lists auto, bfloat16 and fp8* only)
VLLM_KV_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
                  "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "int4_per_token_head",
                  "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6")
KV_BYTES: dict[str, float | None] = {"auto": None, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
                                     "fp8_inc": 1}
# Cache formats with no one width a value; their layouts as vLLM 0.32 writes them (read from its source):
# - DeepSeek's sparse-MLA records: one opaque record a token a layer, laid out for DeepSeek V3.2's latent (512 NoPE values
#   + 64 RoPE values = 576): model_executor/layers/attention/mla_attention.py `state_content_bytes={"fp8_ds_mla": 656,
#   "nvfp4_ds_mla": 352}`; v1/attention/backends/mla/flashmla_sparse.py: nvfp4 = 512 e2m1 values 2 a byte (256) + 64 fp8
#   RoPE values (64) + 32 fp8 scales, one per 16 values (32); fp8 = 512 fp8 values + 4 float32 scales + 64 bf16 RoPE values.
DS_MLA_RECORD = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}
DS_MLA_VALUES = 576
# - TurboQuant: one slot a KV head a token holding its key and value (v1/attention/backends/turboquant_attn.py
#   customize_spec: slot_size_aligned), from model_executor/layers/quantization/turboquant/config.py: TQ_PRESETS
#   (key bits, value bits); key_packed_size = head_dim bytes for 8-bit (FP8) keys, else ceil(head_dim x bits / 8) + 2
#   (an fp16 norm); value_packed_size = ceil(head_dim x bits / 8) + 4 (fp16 scale and zero); the sum rounded up to
#   even. engine/arg_utils.py keeps the boundary layers at the model's dtype (get_boundary_skip_layers: the first and
#   last 2 layers of a model with no linear-attention or Mamba layers, none of a hybrid one).
TURBOQUANT_BITS = {"turboquant_k8v4": (8, 4), "turboquant_4bit_nc": (4, 4), "turboquant_k3v4_nc": (3, 4),
                   "turboquant_3bit_nc": (3, 3)}
TURBOQUANT_EDGE = 2
# - NVFP4 (nvfp4, and nvfp4_4over6: "uses the NVFP4 layout", config/cache.py at 002f10e0): each key and each value head
#   packs head_size // 2 bytes of e2m1 values (2 a byte) + head_size // 16 fp8 block scales (1 a 16 values), in uint8
#   (utils/torch_utils.py at 0024350b: STR_DTYPE_TO_TORCH_DTYPE, nvfp4_kv_cache_full_dim; v1/kv_cache_interface.py at
#   001cabc1: FullAttentionSpec.real_page_size_bytes = block x KV heads x (full_dim(K) + full_dim(V)) x 1 byte).
# - int8_per_token_head, fp8_per_token_head: one byte a value (torch.int8 / torch.uint8, torch_utils.py at 0024350b) and
#   one float32 scale a token a KV head for K and one for V, carved from the same allocation (kv_cache_interface.py at
#   001cabc1: AttentionSpec.page_size_bytes adds 2 x block x KV heads x 4 bytes).
# - int4_per_token_head: two int4 values a byte (head_size // 2 bytes, uint8) and one float32 scale a token a KV head for
#   K and one for V, inline after each half (v1/attention/backends/triton_attn.py TritonAttentionBackend.customize_spec,
#   read at e32eae27 of MatthewBonanni/vllm, a fork of vllm-project/vllm: content = (head_size // 2 + head_size_v // 2)
#   x 1 byte + 2 x 4; v1/kv_cache_interface.py read at 7955a5f9 of LucasWilkinson/vllm: INT4_PER_TOKEN_HEAD "packed
#   2xint4/byte", a per-token-head mode). The Triton backend is the only one that takes it.
NVFP4_KV = ("nvfp4", "nvfp4_4over6")
# name -> (values a byte, scale bytes a token a head, K and V each)
PER_TOKEN_HEAD_KV = {"int8_per_token_head": (1, 4), "fp8_per_token_head": (1, 4), "int4_per_token_head": (2, 4)}
KV_DTYPES = (*KV_BYTES, *DS_MLA_RECORD, *TURBOQUANT_BITS, *NVFP4_KV, *PER_TOKEN_HEAD_KV)  # every --kv-cache-dtype the audit sizes


def nvfp4_head_bytes(head_dim: int) -> int:
    """Bytes of one key (or value) head at one position in vLLM's NVFP4 cache: e2m1 values 2 a byte + 1 fp8 scale a 16."""
    return head_dim // 2 + head_dim // 16


def turboquant_slot(name: str, head_dim: int) -> int:
    """Bytes of one TurboQuant slot (one KV head's key and value at one position), as vLLM 0.32 lays it out."""
    key_bits, value_bits = TURBOQUANT_BITS[name]
    key = head_dim if key_bits == 8 else -(-head_dim * key_bits // 8) + 2
    size = key + -(-head_dim * value_bits // 8) + 4
    return size + size % 2


def kv_width(name: str, shape: ModelShape, model_bytes: float) -> tuple[float, str]:
    """(bytes a cached value, how they were found) for --kv-cache-dtype `name` (as written) on this model; the mean
    over its attention layers where vLLM keeps some at the model's dtype. ValueError (why, one line) when vLLM refuses
    `name`, its layout does not fit the model, or it is none the audit knows."""
    if name not in VLLM_KV_DTYPES:
        raise ValueError(f"vLLM refuses it (its choices, case and all: {', '.join(VLLM_KV_DTYPES)})")
    if name in KV_BYTES:
        width = KV_BYTES[name]
        return (model_bytes if width is None else float(width)), name
    if name in DS_MLA_RECORD:
        if shape.kv_latent != DS_MLA_VALUES:
            cached = f"an MLA latent of {shape.kv_latent} values" if shape.kv_latent else "keys and values per head, not an MLA latent"
            raise ValueError(f"vLLM's {name} record ({DS_MLA_RECORD[name]} bytes) is laid out for DeepSeek V3.2's {DS_MLA_VALUES} "
                             f"latent values a token; this model caches {cached}")
        return DS_MLA_RECORD[name] / DS_MLA_VALUES, f"{name} ({DS_MLA_RECORD[name]} bytes a token a layer)"
    if name in TURBOQUANT_BITS:
        if shape.kv_latent or shape.head_dim <= 0:
            raise ValueError(f"vLLM's {name} packs each key/value head into one slot; this model caches an MLA latent")
        slot = turboquant_slot(name, shape.head_dim)
        attention = [i for i, kind in enumerate(shape.layer_kinds) if kind in ("attention", "sliding")]
        hybrid = any(kind in ("linear", "mamba") for kind in shape.layer_kinds)
        layers = len(shape.layer_kinds)
        edge = 0 if hybrid else min(TURBOQUANT_EDGE, layers // 2)
        kept = sum(1 for i in attention if i < edge or i >= layers - edge)
        packed = slot / (2 * shape.head_dim)
        width = (kept * model_bytes + (len(attention) - kept) * packed) / len(attention) if attention else packed
        how = f"{name} ({slot} bytes a head a token" + (f"; {kept} boundary layers at the model's {model_bytes:g} bytes)" if kept else ")")
        return width, how
    if name in NVFP4_KV or name in PER_TOKEN_HEAD_KV:
        if shape.kv_latent or shape.head_dim <= 0:
            raise ValueError(f"vLLM's {name} layout packs each key/value head; this model caches an MLA latent, whose {name} "
                             "layout the audit does not size")
        if name in NVFP4_KV:
            head = nvfp4_head_bytes(shape.head_dim)
            return head / shape.head_dim, f"{name} ({head} bytes a key or value head a token: fp4 values + fp8 scale a 16)"
        per_byte, scale = PER_TOKEN_HEAD_KV[name]
        head = shape.head_dim // per_byte + scale
        values = "1 byte a value" if per_byte == 1 else f"{per_byte} values a byte"
        return head / shape.head_dim, f"{name} ({head} bytes a key or value head a token: {values} + a float32 scale)"
    raise ValueError(f"vLLM takes it; the audit does not size its layout (it sizes {', '.join(KV_DTYPES)})")


def kv_bytes_per_token(shape: ModelShape, context: int, kv_dtype_bytes: float) -> float:
    """Bytes of KV cache one decoded token reads at `context` tokens of history, one sequence."""
    per_position = (shape.kv_latent or 2 * shape.kv_heads * shape.head_dim) * kv_dtype_bytes
    total = 0.0
    for kind in shape.layer_kinds:
        if kind == "attention":
            total += context * per_position
        elif kind == "sliding":
            total += min(context, shape.sliding_window or context) * per_position
    return total


def state_bytes_per_token(shape: ModelShape) -> int:
    return shape.state_bytes_per_layer * sum(1 for k in shape.layer_kinds if k in ("linear", "mamba"))
