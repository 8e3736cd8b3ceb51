"""The `serving` condition: judgements of the VALUES a recipe passes to `vllm serve`, written as data.

    when.serving = { "--gpu-memory-utilization" = ">0.85" }
    when.serving = { "model.hybrid" = true, "--max-num-batched-tokens" = { test = "<2096", unset = 2048 } }
    when.serving = { "--max-model-len" = ">model.max_model_len" }
    when.serving = { "--kv-cache-memory-bytes" = ">host.memory_total_bytes" }
    when.serving = { "--kv-cache-dtype" = ["fp8", "fp8_e4m3", "fp8_e5m2"], "model.head_dim" = ">=256" }
    when.serving = { "model.quant" = ["mxfp4"], "model.architecture" = ["GptOss*"] }

A key is a serve flag (spelled with dashes; a recipe's `--flag_name` and `--flag=value` forms count),
a fact of the recipe's model (`model.*`, read from its local config.json) or of the host (`host.*`).
A test is true / false (a flag: set / not set or --no-flag; a fact: equals), a comparison with a
number (`<`, `<=`, `>`, `>=`, `==`, `!=`; vLLM's "8k" / "2G" suffixes accepted on both sides) or with
a fact (">model.max_model_len"), "not multiple of N", or a list of values (shell patterns, `GptOss*`):
the flag's value or the model's text fact is one of them. A flag given as `{ test = ..., unset = V }`
is judged at V when the recipe does not set it (vLLM's default for it); without `unset`, a flag the
recipe does not set fails every comparison (vLLM derives the value itself).

The recipe's argv and model facts are Facts.recipe, which only `recipe check` fills; with no recipe
the condition is unknown, and evaluate_all leaves entries that use it out (plain `check`).
A recipe whose command runs another engine or program (SGLang, TensorRT-LLM, uvicorn: no `vllm serve` in it) does not
meet the condition.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.model import Check

MODEL_FACTS = {
    "hybrid": "has Mamba / linear-attention layers (config.json)",
    "type": "model_type in config.json (e.g. gpt_oss, qwen3_5_moe)",
    "architecture": "the first of config.json's architectures (e.g. GptOssForCausalLM)",
    "quant": "the checkpoint's quantization (quantization_config.quant_method; ModelOpt's quant_algo: nvfp4, fp8; none)",
    "head_dim": "attention head size (head_dim, else hidden_size / num_attention_heads)",
    "linear_layers": "linear-attention (Gated DeltaNet) layers",
    "mamba_layers": "Mamba layers",
    "max_position_embeddings": "max_position_embeddings in config.json",
    "max_model_len": "the longest --max-model-len vLLM accepts for the model (derived as vLLM derives it)",
}
TEXT_FACTS = ("type", "architecture", "quant")  # tested against a list of values, never compared as numbers
HOST_FACTS = {"memory_total_bytes": "the host's total memory (MemTotal); on GB10 the unified memory the GPU shares"}
_NUMBER = r"\d{1,15}(?:\.\d{1,9})?[kKmMgGtT]?"
_CMP = re.compile(rf"^(<=|>=|==|!=|<|>)\s*(-?{_NUMBER}|(?:model|host)\.[a-z_]+)$")
_MULTIPLE = re.compile(r"^not multiple of (\d{1,9})$")
_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
COMPARE: dict[str, Callable[[float, float], bool]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_number(text: object) -> float | None:
    """A value as vLLM's argument parser reads it: 4096, 0.9, "8k" (decimal), "2G" (binary, integers only)."""
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text) if math.isfinite(text) else None
    s = str(text).strip()
    match = re.fullmatch(r"(-?\d+(?:\.\d+)?)([kKmMgGtT])", s)
    if match:
        number, suffix = match.groups()
        if suffix.isupper() and "." in number:
            return None  # vLLM: "Decimals are not allowed with binary suffixes"
        return float(number) * _SUFFIX[suffix]
    try:
        value = float(s)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _v_test(key: str, test: object) -> str | None:
    if isinstance(test, bool):
        return None
    if isinstance(test, list):
        if test and all(isinstance(x, str) and x and len(x) <= 200 for x in test):
            return None
        return f"{key}: a list of values needs at least one non-empty string"
    if key.startswith("model.") and key[6:] in TEXT_FACTS:
        return f"{key}: a text fact takes a list of values (shell patterns), e.g. [\"mxfp4\"]"
    if isinstance(test, str):
        cmp = _CMP.match(test)
        if cmp:
            ref = cmp.group(2)
            if ref.startswith("model.") and ref[6:] not in MODEL_FACTS:
                return f"{key}: {ref!r} is not a model fact (one of {', '.join('model.' + n for n in MODEL_FACTS)})"
            if ref.startswith("host.") and ref[5:] not in HOST_FACTS:
                return f"{key}: {ref!r} is not a host fact (one of {', '.join('host.' + n for n in HOST_FACTS)})"
            if not ref[0].isalpha() and parse_number(ref) is None:
                return f"{key}: {ref!r} is not a number vLLM reads (decimals take k/m/g/t, not K/M/G/T)"
            return None
        multiple = _MULTIPLE.match(test)
        if multiple and int(multiple.group(1)) > 0:
            return None
    return f"{key}: {test!r} must be true, false, a comparison such as \">0.85\" or \">model.max_model_len\", or \"not multiple of N\""


def v_serving(value: object) -> str | None:
    if not isinstance(value, dict) or not value:
        return "must be a table of \"--flag\" | \"model.fact\" | \"host.fact\" = test (e.g. \"--gpu-memory-utilization\" = \">0.85\")"
    for key, test in value.items():
        key = str(key)
        if key.startswith("model.") or key.startswith("host."):
            known = MODEL_FACTS if key.startswith("model.") else HOST_FACTS
            if key.split(".", 1)[1] not in known:
                return f"{key!r}: not a known fact (one of {', '.join(key.split('.')[0] + '.' + n for n in known)})"
            if isinstance(test, dict):
                return f"{key}: `unset` is for flags only"
        elif not _FLAG.match(key):
            return f"{key!r}: not a serve flag (\"--name-with-dashes\") or a model./host. fact"
        if isinstance(test, dict):
            extra = set(test) - {"test", "unset"}
            if extra or "test" not in test:
                return f"{key}: a table takes `test` and `unset` only"
            unset = test.get("unset")
            if unset is not None and not isinstance(unset, bool) and parse_number(unset) is None:
                return f"{key}: unset = {unset!r} is neither true/false nor a number"
            test = test["test"]
        err = _v_test(key, test)
        if err:
            return err
    return None


def flag_value(argv: Sequence[object], flag: str) -> tuple[bool, str | bool | None]:
    """(set, value) of `flag` in argv as vLLM's parser sees it: the last occurrence wins, `--flag_name`
    is `--flag-name`, `--flag=v` and `--flag v` both count, a bare flag is True and `--no-flag` False."""
    found = False
    value: str | bool | None = None
    words = [str(a) for a in argv]
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, eq, given = word.partition("=")
        name = "--" + name[2:].replace("_", "-")
        if name == "--no-" + flag[2:]:
            found, value = True, False
        elif name == flag:
            found = True
            if eq:
                value = given
            elif i + 1 < len(words) and not words[i + 1].startswith("--"):
                value = words[i + 1]
            else:
                value = True
    return found, value


def _fact(ref: str, facts: Facts) -> tuple[Any, str | None]:
    """(value, why unknown) of a model./host. fact."""
    part, name = ref.split(".", 1)
    if part == "host":
        health = facts.host_health if isinstance(facts.host_health, dict) else {}
        memory = health.get("memory")
        kib = memory.get("total_kib") if isinstance(memory, dict) else None
        if isinstance(kib, bool) or not isinstance(kib, (int, float)) or kib <= 0 or kib > 2**50:
            return None, "the host's total memory was not read"
        return int(kib) * 1024, None
    recipe = facts.recipe if isinstance(facts.recipe, dict) else {}
    model = recipe.get("model")
    if not isinstance(model, dict):
        return None, "the recipe's model is not known"
    got = model.get(name)
    if name in TEXT_FACTS and isinstance(got, str):
        return got, None
    if got is None or (name != "hybrid" and (isinstance(got, bool) or not isinstance(got, (int, float)))):
        why = model.get("error")
        return None, str(why) if isinstance(why, str) and why else f"model.{name} is not known for {model.get('ref', 'the model')}"
    return got, None


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _amount(raw: object, number: float, name: str) -> str:
    """A judged number as the recipe spelled it and as vLLM reads it: "2k (2000)", bytes also in GiB."""
    text = _shown(number)
    if str(raw).strip() != text and not isinstance(raw, bool):
        text = f"{raw} = {text}"
    if name.endswith("bytes") and abs(number) >= 2**30:
        text += f" ({number / 2**30:.1f} GiB)"
    return text


def _judge(key: str, spec: object, facts: Facts) -> Check:
    test, unset, has_unset = spec, None, False
    if isinstance(spec, dict):
        test, unset, has_unset = spec.get("test"), spec.get("unset"), "unset" in spec
    shown = key
    if key.startswith(("model.", "host.")):
        got, why = _fact(key, facts)
    else:
        recipe = facts.recipe if isinstance(facts.recipe, dict) else {}
        argv = recipe.get("argv")
        if not isinstance(argv, list):
            return Check("serving", None, f"no recipe to read {key} from")
        present, got = flag_value(argv, key)
        why = None
        if not present:
            if not has_unset:
                if isinstance(test, bool):
                    return Check("serving", test is False, f"{key} not set")
                return Check("serving", False, f"{key} not set (vLLM derives it)")
            got, shown = unset, f"{key} (not set; vLLM's default)"
    if why:
        return Check("serving", None, why)
    if isinstance(test, bool):
        on = got is not False and str(got).lower() not in ("false", "0")
        return Check("serving", on is test, f"{shown} = {_shown(got)}")
    if isinstance(test, list):
        value = str(got)
        ok = any(fnmatchcase(value, pattern) for pattern in test)
        return Check("serving", ok, f"{shown} = {value} ({'one of' if ok else 'not one of'} {', '.join(test)})")
    multiple = _MULTIPLE.match(str(test))
    number = parse_number(got)
    if number is None:
        return Check("serving", None, f"{shown} = {_shown(got)}: not a number, so not judged")
    seen = f"{shown} = {_amount(got, number, key)}"
    if multiple:
        step = int(multiple.group(1))
        return Check("serving", not (number.is_integer() and int(number) % step == 0), f"{seen} (entry: not a multiple of {step})")
    compared = _CMP.match(str(test))
    assert compared is not None, "validated at load"
    op, ref = compared.groups()
    if ref[0].isalpha():
        want_raw, why = _fact(ref, facts)
        if why:
            return Check("serving", None, f"{seen}, but {why}: not judged")
        want = parse_number(want_raw)
        label = f"{ref} = {_amount(want_raw, want, ref)}" if want is not None else ref
    else:
        want = parse_number(ref)
        label = _amount(ref, want, key) if want is not None else ref
    if want is None:
        return Check("serving", None, f"{seen}, {label} is not a number: not judged")
    return Check("serving", COMPARE[op](number, want), f"{seen} (entry: {op} {label})")


def other_engine(argv: list[object]) -> str | None:
    """The engine or program a recipe's command runs when it is not vLLM; None for a vLLM launch. Read from the
    command's head (before its first flag and before a `vllm` word): `python3 -m sglang.launch_server`, `sglang serve`,
    `trtllm-serve`; else, when no `vllm serve` or `vllm.entrypoints` is anywhere in it, the program it starts
    (`uvicorn`, `llama-server`: eugr's FLUX.2 recipe serves images with uvicorn, which has no vLLM defaults)."""
    program = None
    for arg in argv:
        text = str(arg)
        if text.startswith("--"):
            break
        base = text.rsplit("/", 1)[-1]
        if base == "vllm" or base.startswith("vllm."):
            return None  # vLLM's own command: what follows is its model and flags
        if base == "sglang" or base.startswith("sglang."):
            return "SGLang"
        if base == "trtllm-serve":
            return "TensorRT-LLM"
        if program is None and "=" not in base and base not in LAUNCHERS:
            program = base
    words = [str(a) for a in argv]
    if any(w.rsplit("/", 1)[-1] == "vllm" and words[i + 1:i + 2] == ["serve"] or w.startswith("vllm.entrypoints")
           for i, w in enumerate(words)):
        return None  # `numactl --interleave=all vllm serve ...`: a flag of a launcher before vLLM's own command
    return program or (words[0].rsplit("/", 1)[-1] if words else None)


# words that start another program rather than being the server (`exec`, `env X=1`, `python3 -m`, `uv run`)
LAUNCHERS = frozenset({"exec", "env", "export", "nohup", "time", "numactl", "taskset", "chrt", "nice", "stdbuf", "uv",
                       "run", "python", "python3", "-m", "-u", "sudo"})


def eval_serving(value: Mapping[str, object], facts: Facts) -> list[Check]:
    if not isinstance(facts.recipe, dict):
        return [Check("serving", None, "judged by `recipe check` only (no recipe here)")]
    argv = facts.recipe.get("argv")
    engine = other_engine(argv) if isinstance(argv, list) else None
    if engine:  # vLLM's flags and defaults say nothing about another engine's launch
        return [Check("serving", False, f"the recipe runs {engine}, not `vllm serve`: vLLM's flags and defaults do not apply")]
    return [_judge(str(key), spec, facts) for key, spec in value.items()]


def describe(value: Mapping[str, object]) -> str:
    """The condition in words (`matrix show`): `model.hybrid true, --max-num-batched-tokens <2096 (unset: 2048)`."""
    parts = []
    for key, spec in value.items():
        test, unset = (spec.get("test"), spec.get("unset")) if isinstance(spec, dict) else (spec, None)
        if isinstance(test, bool) and str(key).startswith("--"):
            shown = f"{key} {'set' if test else 'not set'}"
        elif isinstance(test, list):
            shown = f"{key} one of {', '.join(test)}"
        else:
            shown = f"{key} {_shown(test)}"
        parts.append(shown + (f" (unset: {_shown(unset)})" if unset is not None else ""))
    return ", ".join(parts)
