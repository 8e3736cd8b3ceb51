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
from sparkdoctor.audit.formats import Format, classify
from sparkdoctor.audit.modelconfig import ModelShape
from sparkdoctor.audit.modules import GROUPS, group_of, split_name
from sparkdoctor.audit.safetensors import TensorInfo

NOT_READ = {"vision"}


@dataclass
class Module:
    name: str
    group: str
    tensors: dict[str, TensorInfo]
    format: Format
    nbytes: int = 0  # all its tensors, computed once (a MoE has 100,000 modules)


@dataclass
class GroupRow:
    key: str
    label: str
    modules: int = 0
    params: int = 0
    bytes_stored: int = 0
    bytes_read: float = 0.0  # per decoded token, one sequence
    params_read: float = 0.0  # parameters behind bytes_read (the "active" parameters)
    formats: dict[str, int] = field(default_factory=dict)  # format -> bytes stored
    note: str = ""

    def to_dict(self) -> dict:
        return {"group": self.key, "label": self.label, "modules": self.modules, "params": self.params,
                "bytes_stored": self.bytes_stored, "bytes_read_per_token": round(self.bytes_read),
                "params_read_per_token": round(self.params_read),
                "formats": dict(sorted(self.formats.items(), key=lambda kv: -kv[1])), "note": self.note}


def modules_of(checkpoint: Checkpoint, shape: ModelShape, bits: int) -> list[Module]:
    grouped: dict[str, dict[str, TensorInfo]] = defaultdict(dict)
    for tensor in checkpoint.tensors.values():
        module, role = split_name(tensor.name, len(tensor.shape))
        grouped[module][role] = tensor
    return [Module(name, group_of(name, shape.layers), tensors, classify(tensors, bits), sum(t.nbytes for t in tensors.values()))
            for name, tensors in sorted(grouped.items())]


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
        row.bytes_stored += module.nbytes
        row.formats[module.format.name] = row.formats.get(module.format.name, 0) + module.nbytes
        read = _read(module, fraction, include_mtp)
        row.bytes_read += read
        row.params_read += module.format.params * read / module.nbytes if module.nbytes else 0.0
    _notes(rows, shape, fraction, include_mtp)
    if shape.tied_embeddings and "lm_head" not in rows and "embeddings" in rows:
        emb = rows["embeddings"]
        rows["lm_head"] = GroupRow("lm_head", "lm_head (tied to the embeddings)", bytes_read=float(emb.bytes_stored), params_read=float(emb.params),
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
    """Bytes read per token, by storage format (for the unquantized share)."""
    fraction = expert_fraction(shape)
    out: dict[str, float] = defaultdict(float)
    for module in modules:
        out[module.format.name] += _read(module, fraction, include_mtp)
    if tied_embedding_read:
        for module in modules:
            if module.group == "embeddings":
                out[module.format.name] += module.nbytes
    return dict(out)


KV_BYTES = {"auto": None, "bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1}


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
