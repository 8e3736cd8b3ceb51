"""Storage formats: the one place that knows how each format lays out a module's tensors.

Each rule looks at the tensors of one module (role -> header entry) and says which format they are and how
many logical weights they hold; byte counts always come from the headers. Sources:
- NVFP4, compressed-tensors "nvfp4-pack-quantized": `weight_packed` U8 [out, in/2] (two E2M1 per byte),
  `weight_scale` F8_E4M3 [out, in/16] (one scale per 16), `weight_global_scale` F32 (vLLM
  compressed_tensors_w4a4_nvfp4.py / compressed_tensors_w4a16_nvfp4.py).
- NVFP4, NVIDIA ModelOpt: `weight` U8 [out, in/2], `weight_scale` F8_E4M3 [out, in/16], `weight_scale_2` F32
  global scale, `input_scale` (vLLM modelopt.py ModelOptNvFp4LinearMethod).
- MXFP4 (OCP Microscaling Formats spec v1.0): 32 E2M1 values share one E8M0 scale; gpt-oss stores
  `*_blocks` U8 [..., n_blocks, 16] and `*_scales` U8 [..., n_blocks] (vLLM mxfp4.py).
- FP8 (E4M3/E5M2): one scale (per-tensor), a [out, 1] scale (per-channel), or `weight_scale_inv`
  [out/128, in/128] (block, DeepSeek/Qwen "fp8" with weight_block_size) (vLLM fp8.py, compressed-tensors
  float-quantized).
- INT4/INT8 packed in int32: GPTQ `qweight` [in*bits/32, out] with `g_idx`, AWQ `qweight` [in, out*bits/32];
  both with `qzeros` and `scales` per group (vLLM gptq.py, awq.py); compressed-tensors "pack-quantized"
  `weight_packed` I32 [out, in*bits/32] with `weight_scale` per group.
- Anything else is the weight's own dtype (BF16, F16, F32, ...): unquantized.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkdoctor.audit.safetensors import TensorInfo

UNQUANTIZED = {"BF16", "F16", "F32", "F64"}
FP8 = {"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}  # the FNUZ pair: torch's ROCm FP8 types


@dataclass(frozen=True)
class Format:
    name: str  # "NVFP4", "MXFP4", "FP8 per-channel", "INT4 AWQ g128", "BF16", ...
    params: int  # logical weights (and biases/1-D parameters) the module holds
    quantized: bool


def _params_of_rest(tensors: dict[str, TensorInfo], used: set[str]) -> int:
    """Biases and other plain parameters beside the (quantized) weight."""
    return sum(t.numel for role, t in tensors.items() if role not in used and t.dtype in UNQUANTIZED and "scale" not in role)


def classify(tensors: dict[str, TensorInfo], bits_hint: int = 4) -> Format:
    """The format of one module from its tensors (role -> TensorInfo)."""
    weight = tensors.get("weight")
    packed = tensors.get("weight_packed")
    scale = tensors.get("weight_scale")
    if packed is not None and packed.dtype == "U8" and scale is not None and scale.dtype == "F8_E4M3":
        return Format("NVFP4", packed.numel * 2 + _params_of_rest(tensors, {"weight_packed"}), True)
    if weight is not None and weight.dtype == "U8" and scale is not None and scale.dtype == "F8_E4M3":
        return Format("NVFP4", weight.numel * 2 + _params_of_rest(tensors, {"weight"}), True)
    blocks, scales = tensors.get("blocks"), tensors.get("scales")
    if blocks is not None and blocks.dtype == "U8" and scales is not None and scales.dtype in ("U8", "F8_E8M0"):
        return Format("MXFP4", blocks.numel * 2 + _params_of_rest(tensors, {"blocks"}), True)
    qweight = tensors.get("qweight")
    # bits_hint is 2, 3, 4 or 8 (quantconfig refuses any other); a word holds 32/bits weights (3-bit GPTQ packs
    # 32 weights into 3 words, so the count is numel * 32 // bits, never numel * (32 // bits))
    if qweight is not None and qweight.dtype in ("I32", "U32"):
        style = "GPTQ" if "g_idx" in tensors else "AWQ"
        group = _group(qweight, tensors.get("scales"), bits_hint, style)
        return Format(f"INT{bits_hint} {style}{group}", qweight.numel * 32 // bits_hint + _params_of_rest(tensors, {"qweight"}), True)
    if packed is not None and packed.dtype in ("I32", "U32"):
        in_features = packed.shape[-1] * 32 // bits_hint if packed.shape else 0
        group = f" g{in_features // scale.shape[-1]}" if scale is not None and len(scale.shape) == 2 and scale.shape[-1] > 1 else ""
        return Format(f"INT{bits_hint}{group}", packed.numel * 32 // bits_hint + _params_of_rest(tensors, {"weight_packed"}), True)
    if weight is None:
        main = max(tensors.values(), key=lambda t: t.nbytes)
        return Format(main.dtype, _params_of_rest(tensors, set()) or main.numel, main.dtype not in UNQUANTIZED)
    if weight.dtype in FP8:
        return Format(f"FP8 {_fp8_granularity(weight, tensors)}", weight.numel + _params_of_rest(tensors, {"weight"}), True)
    if weight.dtype == "I8" and (scale is not None or "weight_scale_inv" in tensors):
        return Format("INT8", weight.numel + _params_of_rest(tensors, {"weight"}), True)
    return Format(weight.dtype, weight.numel + _params_of_rest(tensors, {"weight"}), weight.dtype not in UNQUANTIZED)


def _fp8_granularity(weight: TensorInfo, tensors: dict[str, TensorInfo]) -> str:
    inv = tensors.get("weight_scale_inv")
    if inv is not None and len(inv.shape) == 2 and len(weight.shape) == 2:
        rows = -(-weight.shape[0] // max(inv.shape[0], 1))
        cols = -(-weight.shape[1] // max(inv.shape[1], 1))
        return f"block {rows}x{cols}"
    scale = tensors.get("weight_scale") or inv
    if scale is None or scale.numel == 1:
        return "per-tensor"
    if len(weight.shape) >= 2 and scale.numel == weight.shape[0] or (len(scale.shape) == 2 and scale.shape[-1] == 1):
        return "per-channel"
    if len(scale.shape) == 2 and len(weight.shape) == 2 and scale.shape[-1] > 1:
        return f"group {weight.shape[1] // scale.shape[-1]}"
    return "scaled"


def _group(qweight: TensorInfo, scales: TensorInfo | None, bits: int, style: str) -> str:
    if scales is None or len(scales.shape) != 2 or scales.shape[0] == 0 or not qweight.shape:
        return ""
    in_features = qweight.shape[0] * 32 // bits if style == "GPTQ" else qweight.shape[0]
    return f" g{in_features // scales.shape[0]}" if scales.shape[0] > 1 else ""
