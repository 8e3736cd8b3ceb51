"""Which of FlashInfer's precompiled kernels are installed: what `vllm download-kernels` (vLLM 0.32+) puts there.

Read from vLLM 0.32.0's released files (vllm/entrypoints/cli/download_kernels.py, vllm/utils/flashinfer.py) and
those of the flashinfer-python it pins, 0.7.0.post1 (flashinfer/__main__.py, flashinfer/jit/env.py,
flashinfer/jit/_cuda_architecture.py): `vllm download-kernels` runs `python -m flashinfer download-kernels`
(`install-cubin-wheel` when torch's CUDA is older than 12.9), which pip-installs into the same environment

  * flashinfer-cubin == FlashInfer's public version (module flashinfer_cubin; FlashInfer refuses another version),
  * flashinfer-jit-cache == that version + "+cu<XY>" (module flashinfer_jit_cache), only when torch's CUDA is 12.9
    or newer: a shim whose Requires-Dist pins one provider per CUDA target, flashinfer-jit-cache-sm<NN>[a|f],
    each of the shim's exact version; FlashInfer ignores a provider of another version.

So the kernels are installed distributions: this reads their names and versions (already listed) and the shim's
Requires-Dist (one bounded header read), and whether the installed vLLM has the command. Which providers run on
the target's GPU is decided by sparkdoctor (sparkdoctor/flashinfer_kernels.py), which knows the arch.
"""

import os
import re

from probe_io import MAX_HEADER, read_head

PROVIDER_RE = re.compile(r"^flashinfer-jit-cache-(sm[0-9]{2,3}[af]?)$")
COMMAND_FILE = os.path.join("vllm", "entrypoints", "cli", "download_kernels.py")


def public(version):
    """A version without its local part ("0.7.0.post1+cu130" -> "0.7.0.post1"), lower case."""
    return (version or "").split("+", 1)[0].strip().lower() or None


def _required_providers(dist):
    """The provider tags the jit-cache shim's METADATA requires (None: it could not be read)."""
    if not dist.is_dist_info:
        return None
    try:
        head, _ = read_head(os.path.join(dist.info_dir, "METADATA"), MAX_HEADER)
    except OSError:
        return None
    end = head.find(b"\n\n")
    tags = []
    for line in (head if end < 0 else head[:end]).decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "requires-dist":
            name = re.split(r"[\s;\[(<>=!~]", value.strip(), maxsplit=1)[0]
            match = PROVIDER_RE.match(re.sub(r"[-_.]+", "-", name).lower())
            if match:
                tags.append(match.group(1))
    return sorted(set(tags))


def _torch_cuda_at_least_12_9(cuda):
    """True / False for torch's CUDA release ("12.9", "13.0"), None when unknown or a CPU build."""
    match = re.match(r"^(\d+)\.(\d+)", cuda or "")
    if not match:
        return None
    return (int(match.group(1)), int(match.group(2))) >= (12, 9)


def flashinfer_kernels(dists, packages):
    """The kernel wheels' state for the installed FlashInfer; None when FlashInfer is not installed."""
    flashinfer = dists.get("flashinfer-python")
    if flashinfer is None:
        return None
    want = public(flashinfer.version)
    vllm = dists.get("vllm")
    torch_cuda = ((packages.get("torch") or {}).get("cuda")) if isinstance(packages.get("torch"), dict) else None
    out = {
        "flashinfer": flashinfer.version,
        "vllm_download_kernels": None if vllm is None else os.path.isfile(os.path.join(vllm.location, COMMAND_FILE)),
        "torch_cuda": torch_cuda,
        "jit_cache_wanted": _torch_cuda_at_least_12_9(torch_cuda),
        "cubin": None,
        "jit_cache": None,
        "providers": [],
    }
    cubin = dists.get("flashinfer-cubin")
    if cubin is not None:
        out["cubin"] = {"version": cubin.version, "matches": public(cubin.version) == want}
    shim = dists.get("flashinfer-jit-cache")
    if shim is not None:
        out["jit_cache"] = {"version": shim.version, "matches": public(shim.version) == want,
                            "requires": _required_providers(shim)}
    for key in sorted(dists):
        match = PROVIDER_RE.match(key)
        if match:
            version = dists[key].version
            out["providers"].append({"arch": match.group(1), "version": version,
                                     "matches": shim is not None and (version or "").lower() == (shim.version or "").lower()})
    return out
