"""Whether FlashInfer's precompiled kernels (what `vllm download-kernels` installs, vLLM 0.32+) are present for the
installed FlashInfer and the target's arch, from the Facts field `flashinfer_kernels` (probes/target_env/
targetenv_kernels.py says what is read and from which released files).

The rules are vLLM 0.32.0's and FlashInfer 0.7.0.post1's, read in their released files:
  * flashinfer-cubin must be installed at flashinfer-python's version, unless VLLM_HAS_FLASHINFER_CUBIN says the
    cubins are there anyway or FLASHINFER_CUBIN_DIR points FlashInfer at a folder of them
    (vllm/utils/flashinfer.py warn_if_flashinfer_kernels_missing; flashinfer/jit/env.py _get_cubin_dir);
  * flashinfer-jit-cache too, at that version plus a "+cuXY" local part, when torch's CUDA is 12.9 or newer
    (has_flashinfer_jit_cache_wheels); its providers (flashinfer-jit-cache-sm<NN>[a|f], at the shim's exact
    version) carry the kernels per CUDA target, and one must run on the GPU: an "a" target only on its exact
    compute capability, a plain or "f" target on any later minor of its major
    (flashinfer/jit/_cuda_architecture.py cuda_binary_target_compatibility_score).

Statuses: present, missing, mismatched (installed for another FlashInfer version), no-arch (no provider runs on
the target's arch), no-flashinfer; None when the Facts cannot tell (no package list).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sparkdoctor.facts import Facts

STATUSES = ("present", "missing", "mismatched", "no-arch", "no-flashinfer")
_ARCH = re.compile(r"^sm_?([0-9]{1,2})([0-9])([af]?)$")


def _parse(arch: str | None) -> tuple[int, int, str] | None:
    match = _ARCH.match((arch or "").strip().lower())
    return (int(match.group(1)), int(match.group(2)), match.group(3)) if match else None


def runs_on(target: str, device: str) -> bool | None:
    """Whether code built for `target` ("sm120f") runs on `device` ("sm_121a"); None when either is unreadable."""
    binary, dev = _parse(target), _parse(device)
    if binary is None or dev is None:
        return None
    if binary == dev:
        return True
    if binary[2] == "a":
        return binary[:2] == dev[:2]
    return binary[0] == dev[0] and binary[1] <= dev[1]


def _set(env: Mapping[str, object], name: str) -> bool:
    value = str(env.get(name) or "").strip()
    if name == "VLLM_HAS_FLASHINFER_CUBIN":
        return value not in ("", "0")
    return bool(value)


def state(facts: Facts) -> dict[str, object] | None:
    """{"status", "detail", "arch", "providers": [tags that run on the arch]}; None when the Facts cannot tell."""
    raw = getattr(facts, "flashinfer_kernels", None)
    arch = (getattr(facts, "arch", None) or {}).get("value")
    if not isinstance(raw, dict):
        packages = getattr(facts, "packages", None)
        if packages is not None and "flashinfer-python" not in packages:
            return {"status": "no-flashinfer", "detail": "flashinfer-python is not installed", "arch": arch, "providers": []}
        return None
    want = str(raw.get("flashinfer") or "?")
    env = getattr(facts, "env", None) or {}
    problems: dict[str, list[str]] = {"mismatched": [], "missing": [], "no-arch": []}
    have: list[str] = []
    cubin = raw.get("cubin")
    if _set(env, "VLLM_HAS_FLASHINFER_CUBIN") or _set(env, "FLASHINFER_CUBIN_DIR"):
        have.append("cubins from the environment (VLLM_HAS_FLASHINFER_CUBIN / FLASHINFER_CUBIN_DIR)")
    elif not isinstance(cubin, dict):
        problems["missing"].append("flashinfer-cubin is not installed")
    elif not cubin.get("matches"):
        problems["mismatched"].append(f"flashinfer-cubin {cubin.get('version')} is not flashinfer-python {want}'s")
    else:
        have.append(f"flashinfer-cubin {cubin.get('version')}")
    fitting: list[str] = []
    if raw.get("jit_cache_wanted"):
        fitting = _jit_cache(raw, want, arch, problems, have)
    else:
        have.append(f"no jit-cache needed (torch CUDA {raw.get('torch_cuda') or 'none'})")
    for status in ("mismatched", "missing", "no-arch"):
        if problems[status]:
            return {"status": status, "detail": "; ".join(problems[status]), "arch": arch, "providers": fitting}
    return {"status": "present", "detail": "; ".join(have), "arch": arch, "providers": fitting}


def _jit_cache(raw: dict[str, Any], want: str, arch: str | None, problems: dict[str, list[str]],
               have: list[str]) -> list[str]:
    """The jit-cache shim and its providers; the provider tags that run on `arch`."""
    shim = raw.get("jit_cache")
    if not isinstance(shim, dict):
        problems["missing"].append(f"flashinfer-jit-cache is not installed (torch CUDA {raw.get('torch_cuda')})")
        return []
    if not shim.get("matches"):
        problems["mismatched"].append(f"flashinfer-jit-cache {shim.get('version')} is not flashinfer-python {want}'s")
        return []
    providers = [p for p in raw.get("providers") or [] if isinstance(p, dict)]
    stale = [f"{p.get('arch')} {p.get('version')}" for p in providers if not p.get("matches")]
    if stale:
        problems["mismatched"].append(f"jit-cache providers of another version (ignored by FlashInfer): {', '.join(stale)}")
    usable = [str(p.get("arch")) for p in providers if p.get("matches")]
    required = shim.get("requires")
    if not usable and not required:  # a jit-cache wheel without per-arch providers: which arch it holds is not read
        have.append(f"flashinfer-jit-cache {shim.get('version')} (no per-arch providers to judge)")
        return []
    if arch is None:
        have.append(f"flashinfer-jit-cache {shim.get('version')}: providers {', '.join(usable) or 'none'} (arch unknown)")
        return []
    fitting = [tag for tag in usable if runs_on(tag, arch)]
    if not fitting:
        absent = sorted(set(required or []) - set(usable))
        problems["no-arch"].append(
            f"no flashinfer-jit-cache provider runs on {arch} (installed: {', '.join(usable) or 'none'}"
            + (f"; required by the shim but not installed: {', '.join(absent)}" if absent else "") + ")")
        return []
    have.append(f"flashinfer-jit-cache {shim.get('version')}: {', '.join(fitting)} for {arch}")
    return fitting
