"""The architecture numbers the byte model needs, read from config.json.

What each field means follows the Hugging Face `transformers` config classes of the families that serve on
GB10 (Llama/Qwen3 dense, Qwen3-MoE, Qwen3-Next and Qwen3.5/3.6 hybrids with Gated DeltaNet `linear_attention`
layers, gpt-oss with sliding-window layers, DeepSeek-style MLA and `num_nextn_predict_layers`, Nemotron-H's
`hybrid_override_pattern`). A multimodal config keeps the text model under `text_config`; that is what is
read. Names differ between families, so every number is looked up under its known aliases; the ones the
audit cannot do without (layers, hidden size, heads) are a one-line error naming config.json and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sparkdoctor.audit.errors import AuditError

# torch dtype names in configs -> bytes per element
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "fp8": 1, "float8_e4m3fn": 1}
# vllm serve --dtype's choices other than auto (vllm/config/model.py ModelDType) -> bytes a value
SERVED_BYTES = {"half": 2, "float16": 2, "bfloat16": 2, "float": 4, "float32": 4}
SERVED_FORMAT = {"half": "F16", "float16": "F16", "bfloat16": "BF16", "float": "F32", "float32": "F32"}  # safetensors' names


def served_bytes(dtype: str) -> int | None:
    """The one rule for vllm serve --dtype, taken exactly as its parser takes it (ModelDType: case and all): None for
    auto (the checkpoint's own width), else bytes a value; AuditError (one line) for a name vLLM refuses."""
    if dtype == "auto":
        return None
    if dtype not in SERVED_BYTES:
        raise AuditError(f"--dtype {dtype!r} is not a dtype vLLM takes (auto, {', '.join(SERVED_BYTES)}; it refuses any other)")
    return SERVED_BYTES[dtype]


@dataclass
class ModelShape:
    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int | None
    tied_embeddings: bool
    dtype_bytes: int  # the model's own dtype (what "auto" KV cache means; with served=True, the width vLLM serves it in)
    max_position: int | None
    experts: int = 0  # routed experts per MoE layer (E)
    experts_per_token: int = 0  # top-k
    shared_experts: int = 0
    mtp_layers: int = 0  # MTP / nextn layers shipped with the checkpoint
    layer_kinds: list[str] = field(default_factory=list)  # per layer: attention | sliding | linear | mamba | mlp
    sliding_window: int | None = None
    kv_latent: int | None = None  # MLA: kv_lora_rank + qk_rope_head_dim cached per token per layer
    state_bytes_per_layer: int = 0  # recurrent state a linear/mamba layer reads per decoded token
    cast_from: int | None = None  # served=True: the config's width, cast to dtype_bytes (--dtype auto: float32 to 2 bytes)
    served_format: str = ""  # with cast_from: the format the cast tensors are served in (F32, BF16, F16)

    def count(self, kind: str) -> int:
        return self.layer_kinds.count(kind)


def _first(cfg: Mapping[str, object], *names: str) -> object:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return None


MAX_INT = 2**53  # past this no size is real, and products of such numbers stop being printable
MAX_LAYERS = 100_000  # a list of layer kinds is built with this many entries


def _count(cfg: Mapping[str, object], where: str, *names: str, default: int | None = None, maximum: int = MAX_INT) -> int:
    """_int for a number the shape needs: `default` where the config has none; without a default, an AuditError."""
    value = _int(cfg, where, *names, maximum=maximum)
    if value is not None:
        return value
    if default is None:
        raise AuditError(f"{where}: no {names[0]} (looked for {', '.join(names)}): cannot size the model without it")
    return default


def _int(cfg: Mapping[str, object], where: str, *names: str, maximum: int = MAX_INT) -> int | None:
    value = _first(cfg, *names)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AuditError(f"{where}: {names[0]} must be a non-negative integer, got {value!r:.60}")
    if value > maximum:
        shown = f"{value:,}" if value.bit_length() < 200 else f"a {value.bit_length()}-bit number"
        raise AuditError(f"{where}: {names[0]} is {shown}, over {maximum:,}: not a real model's size")
    return value


def read_shape(config: Mapping[str, object], path: Path, served: bool = False, serve_dtype: str = "auto") -> ModelShape:
    """The shape config.json describes; `served`: at the dtype `vllm serve --dtype SERVE_DTYPE` runs it in (auto: a float32
    checkpoint in bfloat16, vllm/config/model.py _resolve_auto_dtype; else every unquantized floating-point weight cast
    to its width), which is what a decoded token reads."""
    where = str(path)
    text = config.get("text_config")
    cfg = {**config, **text} if isinstance(text, dict) and text else config
    layers = _count(cfg, where, "num_hidden_layers", "n_layer", "num_layers", maximum=MAX_LAYERS)
    hidden = _count(cfg, where, "hidden_size", "n_embd", "d_model")
    heads = _count(cfg, where, "num_attention_heads", "n_head")
    kv_heads = _count(cfg, where, "num_key_value_heads", "num_kv_heads", default=heads)
    head_dim = _count(cfg, where, "head_dim", "attention_head_dim", default=(hidden // heads if heads else 0))
    dtype = _first(cfg, "torch_dtype", "dtype") or "bfloat16"
    tied = _first(config, "tie_word_embeddings")
    if tied is None:
        tied = bool(cfg.get("tie_word_embeddings", False))
    shape = ModelShape(
        model_type=str(_first(config, "model_type") or cfg.get("model_type") or "unknown"),
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
        vocab=_int(cfg, where, "vocab_size"), tied_embeddings=bool(tied),
        dtype_bytes=DTYPE_BYTES.get(str(dtype), 2),
        max_position=_int(cfg, where, "max_position_embeddings", "max_seq_len", "n_positions"),
        experts=_count(cfg, where, "num_experts", "num_local_experts", "n_routed_experts", default=0),
        experts_per_token=_count(cfg, where, "num_experts_per_tok", "experts_per_token", "moe_topk", default=0),
        shared_experts=_count(cfg, where, "n_shared_experts", "num_shared_experts", default=0),
        mtp_layers=_count(cfg, where, "num_nextn_predict_layers", "mtp_num_hidden_layers", default=0),
        sliding_window=_int(cfg, where, "sliding_window"),
    )
    width = served_bytes(serve_dtype) if served else None
    if width is not None:  # vLLM casts the floating-point weights to --dtype (bfloat16 to float16 too)
        shape.cast_from, shape.dtype_bytes, shape.served_format = shape.dtype_bytes, width, SERVED_FORMAT[serve_dtype]
    elif served and shape.dtype_bytes == 4:
        shape.cast_from, shape.dtype_bytes, shape.served_format = 4, 2, "BF16"
    if shape.experts and not shape.experts_per_token:
        raise AuditError(f"{where}: {shape.experts} experts but no num_experts_per_tok: cannot say how many a token reads")
    if cfg.get("shared_expert_intermediate_size") and not shape.shared_experts:
        shape.shared_experts = 1
    shape.layer_kinds = _layer_kinds(cfg, layers, where)
    if cfg.get("kv_lora_rank"):
        shape.kv_latent = _count(cfg, where, "kv_lora_rank") + _count(cfg, where, "qk_rope_head_dim", default=0)
    shape.state_bytes_per_layer = _state_bytes(cfg, shape, where)
    return shape


def _layer_kinds(cfg: Mapping[str, object], layers: int, where: str) -> list[str]:
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        names = {"full_attention": "attention", "attention": "attention", "sliding_attention": "sliding",
                 "linear_attention": "linear", "mamba": "mamba", "chunked_attention": "sliding"}
        return [names.get(str(t), "attention") for t in types]
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == layers:
        return [{"M": "mamba", "*": "attention", "-": "mlp", "E": "mlp"}.get(c, "attention") for c in pattern]
    interval = cfg.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0 and cfg.get("linear_num_value_heads"):
        return ["attention" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
    return ["attention"] * layers


def _state_bytes(cfg: Mapping[str, object], shape: ModelShape, where: str) -> int:
    """Bytes of recurrent state one linear-attention / Mamba layer reads per decoded token (per sequence)."""
    state_dtype = DTYPE_BYTES.get(str(cfg.get("mamba_ssm_dtype") or ""), shape.dtype_bytes)
    if "linear" in shape.layer_kinds:
        v_heads = _count(cfg, where, "linear_num_value_heads", default=0)
        k_dim = _count(cfg, where, "linear_key_head_dim", default=0)
        v_dim = _count(cfg, where, "linear_value_head_dim", default=0)
        return v_heads * k_dim * v_dim * state_dtype
    if "mamba" in shape.layer_kinds:
        heads = _count(cfg, where, "mamba_num_heads", default=0)
        head_dim = _count(cfg, where, "mamba_head_dim", default=0)
        state = _count(cfg, where, "ssm_state_size", "state_size", default=0)
        return heads * head_dim * state * state_dtype
    return 0
