"""The quantization config's claims against the tensors: which modules it says are excluded, which are.

Tensor dtypes are the truth; a loader builds each layer from the config. When they disagree the loader
builds the wrong layer: the config quantizes a module whose tensors are BF16 (the loader expects packed
weights and scales; vLLM fails with a shape assertion — the MTP exclusion bug, where ModelOpt's
`mtp.layers.0*` did not cover the BF16 `mtp.fc`), or the config excludes a module whose tensors are
quantized (the loader reads packed bytes as BF16). Ignore entries that match no module are reported too:
they often mean the list was written for another model or another naming. A compressed-tensors config whose
targets name layers (not the `Linear` class) must match every linear with a target or an ignore entry: vLLM stops
at one that neither matches (compressed_tensors/utils.py `find_matched_target`: "Unable to find matching target").

Only linear layers are judged (norms, embeddings, 1-D parameters, encoders and routers are not: vLLM builds
routers unquantized whatever the config says). For GPTQ/AWQ/FP8 checkpoints lm_head is never expected
quantized; for MXFP4 only the routed experts are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparkdoctor.audit.bytemodel import Module
from sparkdoctor.audit.quantconfig import QuantConfig, matches

_JUDGED = {"attention", "mlp", "experts", "shared_experts", "mixer", "lm_head", "mtp", "other"}
# the decoder's plain linear layers, which vLLM's compressed-tensors loader matches one by one (lm_head is no LinearBase,
# routed experts are matched as one FusedMoE, an MTP head is built only with speculative decoding)
_TARGETED = {"attention", "mlp", "shared_experts", "mixer"}


@dataclass(frozen=True)
class Disagreement:
    kind: str  # stored-unquantized-not-excluded | excluded-but-quantized | matched-by-no-target | stale-ignore-entry
    module: str  # a module name, or the ignore entry for stale ones
    detail: str
    source: str
    count: int = 1  # modules folded into this line (same kind, same shape of name)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "module": self.module, "detail": self.detail, "source": self.source, "count": self.count}


def _is_linear(module: Module) -> bool:
    if module.group not in _JUDGED:
        return False
    weight = module.tensors.get("weight") or module.tensors.get("weight_packed") or module.tensors.get("qweight") or module.tensors.get("blocks")
    if weight is None or len(weight.shape) < 2:
        return False
    leaf = module.name.rsplit(".", 1)[-1]
    return "conv" not in leaf and "norm" not in leaf


def _expected_quantized(module: Module, quant: QuantConfig) -> bool:
    if quant.experts_only:
        return module.group == "experts"
    if module.group == "lm_head" and quant.method not in ("compressed-tensors", "modelopt"):
        return False
    return quant.targets_module(module.name)


def cross_check(modules: list[Module], quant: QuantConfig) -> list[Disagreement]:
    found: list[Disagreement] = []
    used: set[str] = set()
    for module in modules:
        if not _is_linear(module):
            continue
        hits = quant.excludes(module.name)
        used.update(hits)
        quantized = module.format.quantized
        if hits and quantized:
            found.append(Disagreement("excluded-but-quantized", module.name,
                                      f"{quant.ignore_field} entry {hits[0]!r} excludes it, but its tensors are {module.format.name}",
                                      quant.source))
        elif not hits and module.group in _TARGETED and quant.method == "compressed-tensors" and not quant.targets_module(module.name):
            found.append(Disagreement("matched-by-no-target", module.name,
                                      f"stored {module.format.name}, matched by no config_groups target and no {quant.ignore_field} "
                                      f"entry: vLLM stops loading (\"Unable to find matching target for {module.name} in the "
                                      "compressed-tensors config\"); name it in a target or in ignore", quant.source))
        elif not hits and not quantized and _expected_quantized(module, quant):
            found.append(Disagreement("stored-unquantized-not-excluded", module.name,
                                      f"stored {module.format.name}, but {quant.ignore_field} does not exclude it: a loader that trusts "
                                      f"the config builds a {quant.scheme} layer for {module.format.name} weights",
                                      quant.source))
    names = [m.name for m in modules]
    for entry in quant.ignore:
        if entry not in used and not any(matches(entry, name, quant.match) for name in names):
            found.append(Disagreement("stale-ignore-entry", entry, f"{quant.ignore_field} entry matches no module in the checkpoint", quant.source))
    return fold(found)


def fold(items: list[Disagreement]) -> list[Disagreement]:
    """One line per (kind, name with digits replaced by N): 48 layers' worth of one problem is one line."""
    buckets: dict[tuple[str, str], list[Disagreement]] = {}
    for item in items:
        key = (item.kind, re.sub(r"\.\d+(?=\.|$)", ".N", item.module))
        buckets.setdefault(key, []).append(item)
    return [Disagreement(kind, pattern if len(group) > 1 else group[0].module, group[0].detail, group[0].source, len(group))
            for (kind, pattern), group in buckets.items()]
