"""Values `vllm serve`'s own argument parser refuses, so the server never starts: `--max-model-len {max_model_len}`
(a placeholder the recipe's runner left unresolved), `--max-num-seqs 8k`, `--gpu-memory-utilization 1.2`.

vLLM's FlexibleArgumentParser (vllm/utils/argparse_utils.py, vllm/engine/arg_utils.py `_compute_kwargs`, 0.32)
converts every occurrence of a flag with the flag's type (argparse calls `type` on each, so a bad first one fails
even when a later one is good): --max-model-len with human_readable_int_or_auto, --max-num-batched-tokens and
--kv-cache-memory-bytes with human_readable_int, the other int fields with int; --gpu-memory-utilization is a float
that CacheConfig then requires above 0 and at most 1. A flag given last with nothing after it has no value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sparkdoctor.audit.fromrecipe import vllm_int, vllm_model_len, vllm_share
from sparkdoctor.recipes.model import Recipe, vllm_spelling
from sparkdoctor.recipes.vllm_config import serve_config

Finding = dict[str, object]

# flag -> (how vLLM reads it, what it accepts in words)
PARSED: dict[str, tuple[Callable[[str], object], str]] = {
    "--max-model-len": (vllm_model_len, "a whole number, vLLM's 32k / 32K forms, -1 or auto"),
    "--max-num-batched-tokens": (vllm_int, "a whole number or vLLM's 8k / 8K forms"),
    "--kv-cache-memory-bytes": (vllm_int, "a whole number or vLLM's 8g / 8G forms"),
    "--max-num-seqs": (int, "a whole number (no k/K suffix)"),
    "--tensor-parallel-size": (int, "a whole number"),
    "-tp": (int, "a whole number"),
    "--gpu-memory-utilization": (vllm_share, "a fraction above 0 and at most 1"),
}


def refused_values(argv: Sequence[object]) -> list[Finding]:
    """One error finding per flag occurrence whose value vLLM's parser (or its config check) refuses."""
    args = [str(a) for a in argv]
    out: list[Finding] = []
    for i, arg in enumerate(args):
        flag, eq, value = vllm_spelling(arg).partition("=")
        if flag not in PARSED:
            continue
        read, accepted = PARSED[flag]
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("--"):
                out.append(_refused(flag, None, accepted))
                continue
            value = args[i + 1]
        try:
            read(value)
        except ValueError:
            out.append(_refused(flag, value, accepted))
    return out


def finding(kind: str, fid: str, severity: str, title: str, evidence: list[str], remedy: str) -> Finding:
    return {"kind": kind, "id": fid, "severity": severity, "title": title, "evidence": evidence, "remedy": remedy}


def _refused(flag: str, value: str | None, accepted: str) -> Finding:
    shown = "no value" if value is None else repr(value)
    why = f"{flag} takes {accepted}"
    if value is not None and value.startswith("{") and value.endswith("}"):
        why += f"; {value} is a placeholder the recipe's runner left as it is (no default or override names {value[1:-1]})"
    source = "vllm/utils/argparse_utils.py and vllm/engine/arg_utils.py: the type vLLM parses the flag with"
    return finding("flag", f"flag-value:{flag}", "error", f"vLLM refuses {flag} {shown}: `vllm serve` would not start",
                   [why, source], f"Give {flag} a value vLLM accepts ({accepted})" +
                   (f", e.g. a `{value[1:-1]}` default in the recipe." if value and value.startswith("{") else "."))


def abbreviated(flag: str, known: set[str]) -> str | None:
    """The one known flag `flag` is a prefix of, as argparse reads it (vLLM's parser keeps argparse's allow_abbrev:
    `--gpu-memory-util 0.8` is --gpu-memory-utilization); None when none or several (argparse: "ambiguous option")."""
    longer = [k for k in known if k.startswith(flag) and k != flag]
    return longer[0] if len(longer) == 1 else None


def config_findings(recipe: Recipe) -> list[Finding]:
    """The recipe command's `--config FILE.yaml`: an error when vLLM would not start with it (missing, unreadable, not
    a mapping, named twice), a warning when it could not be read here (a container's file); else one error per value of
    it vLLM's parser refuses, naming the file (the other flags of the file are judged with the command's)."""
    config = serve_config(recipe)
    if config is None:
        return []
    if config.problem is not None:
        if config.fatal or not recipe.container:
            return [finding("flag", "flag-config:--config", "error", "vLLM would not start with the recipe's "
                            "--config file", [config.problem], "Give --config the path of a YAML mapping of vLLM "
                            "options (.yaml or .yml), relative to the recipe's folder, once.")]
        return [finding("flag", "flag-config:--config", "warn", "the recipe's --config file was not read: its options "
                        "are not judged", [config.problem], "Run recipe check where the file is, or set the options "
                        "on the command line.")]
    out = refused_values(config.args)
    for refused in out:
        evidence = refused["evidence"]
        refused["evidence"] = [f"set in --config {config.written} ({config.path})", *(evidence if isinstance(evidence, list) else [])]
    return out
