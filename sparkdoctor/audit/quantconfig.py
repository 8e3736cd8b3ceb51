"""What a checkpoint's quantization config claims: the method, the scheme, and which modules it leaves out.

Sources and their matching rules (how the loader that reads each one decides that a module is excluded):
- compressed-tensors (`config.json` quantization_config, quant_method "compressed-tensors"): `ignore` and
  each config group's `targets` are exact module names, layer class names ("Linear") or `re:` regexes
  matched from the start of the name (compressed_tensors.utils.match; vLLM compressed_tensors.py).
- NVIDIA ModelOpt (`hf_quant_config.json` "quantization", or quantization_config quant_method "modelopt"):
  `exclude_modules` / `ignore` are fnmatch wildcards (vLLM modelopt.py `is_layer_excluded`) — so
  `mtp.layers.0*` does not match `mtp.fc`. MIXED_PRECISION names each quantized layer in `quantized_layers`; a
  linear no entry names is built unquantized (ModelOptMixedPrecisionConfig `_resolve_quant_algo`: the exact name,
  and for routed experts their `.experts` module or any entry under its parent).
- config.json's quantization_config is the one vLLM reads (weight_utils.py `get_quant_config`);
  hf_quant_config.json only when config.json has none.
- GPTQ / AWQ (quant_method "gptq", "awq"): `modules_to_not_convert` entries match as substrings of the module
  name (vLLM awq.py `is_layer_skipped_awq`); vLLM leaves lm_head and routers unquantized for them.
- MXFP4 (quant_method "mxfp4", gpt-oss): only the MoE experts are MXFP4 (vLLM mxfp4.py quantizes FusedMoE);
  `modules_to_not_convert` is informational.
- FP8 (quant_method "fp8", e.g. Qwen *-FP8 with weight_block_size): `modules_to_not_convert` substrings.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.patterns import MATCH_SECONDS, search


@dataclass
class QuantConfig:
    method: str  # compressed-tensors | modelopt | gptq | awq | mxfp4 | fp8 | other name
    scheme: str  # a short description: "NVFP4 W4A4", "FP8 W8A8 channel", "INT4 g128"
    source: str  # the file (and key) it came from
    ignore_field: str  # the list the ignore entries came from, as the user would search for it
    ignore: list[str] = field(default_factory=list)
    match: str = "exact-or-re"  # exact-or-re | fnmatch | substring
    targets: list[str] = field(default_factory=list)  # compressed-tensors targets (others: every Linear)
    experts_only: bool = False
    kv_cache_dtype: str | None = None  # "fp8" when the config quantizes the KV cache
    bits: int = 4
    layers: frozenset[str] | None = None  # ModelOpt MIXED_PRECISION: the quantized_layers names (None: not such a config)
    parents: frozenset[str] = frozenset()  # every dotted prefix of those names (what routed experts are looked up by)

    def excludes(self, module: str) -> list[str]:
        """The ignore entries that match `module`."""
        return [p for p in self.ignore if matches(p, module, self.match)]

    def targets_module(self, module: str) -> bool:
        if self.layers is not None:
            if module in self.layers:
                return True
            container, found, _ = module.partition(".experts.")
            return bool(found) and (f"{container}.experts" in self.layers or container in self.parents)
        return not self.targets or any(t == "Linear" or matches(t, module, "exact-or-re") for t in self.targets)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str, how: str) -> re.Pattern[str] | None:
    try:
        # read the way vLLM reads it, with this Python's re: a FutureWarning ("[[" is a nested set one day) is
        # not ours to print in the middle of an audit
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            if how == "exact-or-re" and pattern.startswith("re:"):
                return re.compile(pattern[3:])
            if how == "fnmatch" and any(c in pattern for c in "*?["):
                return re.compile(fnmatch.translate(pattern))
    except re.error:
        return re.compile(r"(?!)")  # a broken regex matches nothing (and is then reported as matching nothing)
    return None


def matches(pattern: str, module: str, how: str) -> bool:
    if how == "substring":
        return pattern in module
    compiled = _compiled(pattern, how)
    if compiled is None:
        return pattern == module
    if how == "exact-or-re" and compiled.pattern == pattern[3:]:
        # the checkpoint's own regex may backtrack for minutes on one name, e.g. `re:(a|a)+b`: run it bounded
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            found = search(pattern[3:], module, at_start=True)
        if found is None:
            raise AuditError(f"the checkpoint's ignore pattern {pattern!r} could not be matched against {module!r} within {MATCH_SECONDS} s")
        return found
    return compiled.match(module) is not None


def _list(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AuditError(f"{where}: must be a list of strings")
    return list(value)


def read_quant_configs(config: Mapping[str, object], hf_quant: Mapping[str, object] | None) -> list[QuantConfig]:
    """Every quantization config the folder carries (config.json's and hf_quant_config.json's)."""
    found: list[QuantConfig] = []
    qc = config.get("quantization_config")
    text = config.get("text_config")
    if qc is None and isinstance(text, dict):
        qc = text.get("quantization_config")
    if qc is not None:
        if not isinstance(qc, dict):
            raise AuditError("config.json: quantization_config must be an object")
        found.append(_from_config_json(qc))
    elif hf_quant is not None:  # read only when config.json has none, as vLLM reads it
        found.append(_modelopt(hf_quant.get("quantization"), "hf_quant_config.json", "quantization.exclude_modules", "exclude_modules"))
    return found


def _from_config_json(qc: Mapping[str, object]) -> QuantConfig:
    method = str(qc.get("quant_method") or "").lower()
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    if method in ("modelopt", "modelopt_fp4", "modelopt_mixed"):
        return _modelopt(qc, "config.json quantization_config", "quantization_config.ignore", "ignore", "exclude_modules")
    where = "config.json: quantization_config.modules_to_not_convert"
    skip = _list(qc.get("modules_to_not_convert"), where)
    if method in ("gptq", "awq"):
        bits = _packed_bits(4 if qc.get("bits") is None else qc.get("bits"))
        group = qc.get("group_size")
        return QuantConfig(method, f"INT{bits} {method.upper()} group {group}", "config.json quantization_config",
                           "quantization_config.modules_to_not_convert", skip, "substring", bits=bits)
    if method == "mxfp4":
        return QuantConfig(method, "MXFP4 experts", "config.json quantization_config",
                           "quantization_config.modules_to_not_convert", skip, "fnmatch", experts_only=True)
    if method == "fp8":
        block = qc.get("weight_block_size")
        scheme = f"FP8 block {block}" if block else "FP8"
        return QuantConfig(method, scheme, "config.json quantization_config", "quantization_config.modules_to_not_convert",
                           skip, "substring", bits=8)
    return QuantConfig(method or "unknown", method or "unknown", "config.json quantization_config",
                       "quantization_config.modules_to_not_convert", skip, "substring")


PACKED_BITS = (2, 3, 4, 8)  # the widths GPTQ and AWQ pack into int32 words (vLLM gptq.py, awq.py)


def _packed_bits(bits: object) -> int:
    if type(bits) is not int or bits not in PACKED_BITS:
        shown = f"{bits!r:.40}" if not isinstance(bits, int) or abs(bits) < 10**40 else "an integer of over 40 digits"
        raise AuditError(f"config.json: quantization_config.bits must be {', '.join(map(str, PACKED_BITS[:-1]))} or "
                         f"{PACKED_BITS[-1]} (the widths GPTQ and AWQ pack into int32), got {shown}")
    return bits


def _compressed_tensors(qc: Mapping[str, object]) -> QuantConfig:
    where = "config.json: quantization_config"
    groups = qc.get("config_groups") or {}
    if not isinstance(groups, dict):
        raise AuditError(f"{where}.config_groups must be an object")
    targets: list[str] = []
    schemes: list[str] = []
    for name, group in groups.items():
        if not isinstance(group, dict):
            raise AuditError(f"{where}.config_groups.{name} must be an object")
        targets += _list(group.get("targets"), f"{where}.config_groups.{name}.targets")
        schemes.append(_ct_scheme(group))
    # pack-quantized int weights: how many a 32-bit word holds (the first int group's width; W4A16 and W8A16 exist)
    widths = [g["weights"].get("num_bits") for g in groups.values() if isinstance(g.get("weights"), dict) and g["weights"].get("type") == "int"]
    bits = next((b for b in widths if type(b) is int and b in PACKED_BITS), 4)
    return QuantConfig("compressed-tensors", "; ".join(schemes) or str(qc.get("format")), "config.json quantization_config",
                       "quantization_config.ignore", _list(qc.get("ignore"), f"{where}.ignore"), "exact-or-re",
                       targets=targets, kv_cache_dtype=_kv_scheme(qc), bits=bits)


def _kv_scheme(qc: Mapping[str, object]) -> str | None:
    """"fp8" when a config.json `kv_cache_scheme` quantizes the KV cache to 8 bits (compressed-tensors, ModelOpt)."""
    kv = qc.get("kv_cache_scheme")
    return "fp8" if isinstance(kv, dict) and kv.get("num_bits") == 8 else None


def _ct_scheme(group: Mapping[str, object]) -> str:
    w = group.get("weights") or {}
    a = group.get("input_activations")
    if not isinstance(w, dict):
        return "?"
    bits, kind, strategy, size = w.get("num_bits"), w.get("type"), w.get("strategy"), w.get("group_size")
    if kind == "float" and bits == 4 and size == 16:
        name = "NVFP4"
    elif kind == "float":
        name = f"FP{bits}"
    else:
        name = f"INT{bits}"
    acts = f"A{a.get('num_bits')}" if isinstance(a, dict) and a.get("num_bits") else "A16"
    detail = f"{strategy}" + (f" g{size}" if size and name != "NVFP4" else "")
    return f"{name} W{bits}{acts} ({detail})"


def _modelopt(section: object, source: str, field_name: str, *keys: str) -> QuantConfig:
    if not isinstance(section, dict):
        raise AuditError(f"{source}: no quantization object")
    ignore = [entry for key in keys for entry in _list(section.get(key), f"{source}: {key}")]
    algo = str(section.get("quant_algo") or "?")
    kv = str(section.get("kv_cache_quant_algo") or "").upper()
    kv_dtype = "fp8" if kv.startswith("FP8") else _kv_scheme(section)  # hf_quant_config.json's string, config.json's scheme
    layers: frozenset[str] | None = None
    parents: frozenset[str] = frozenset()
    scheme = f"{algo} (ModelOpt)"
    quantized = section.get("quantized_layers")
    if algo.upper() == "MIXED_PRECISION" and isinstance(quantized, dict):
        layers = frozenset(str(k) for k in quantized)
        parents = frozenset(name.rsplit(".", n)[0] for name in layers for n in range(1, name.count(".") + 1))
        algos = sorted({str(v.get("quant_algo")) for v in quantized.values() if isinstance(v, dict)})
        scheme = f"{algo} (ModelOpt: {len(layers)} quantized_layers, {', '.join(algos)})"
    return QuantConfig("modelopt", scheme, source, field_name, ignore, "fnmatch", kv_cache_dtype=kv_dtype,
                       bits=4 if "FP4" in algo.upper() else 8, layers=layers, parents=parents)
