"""Write capabilities-<stack>.json: what the capability probe (probes/capabilities) reads from the RELEASED
files of a stack, for the healthy reference boxes of tests/healthy_boxes.py.

    .venv/bin/python tests/data/facts/healthy/capture.py [STACK ...]

For each stack it lays the files the probe opens (read from the registry's wheels by range requests, the
released/ reader) into a scratch site-packages with each distribution's .dist-info, runs the probe there with
that folder as its only site, and keeps its answer. The compiled _C*.so of vLLM is not read (hundreds of MB; no
entry judges `vllm.cubin_archs`), so that one capability comes back unknown, as the probe says. Re-run it when a
stack is added; the JSON files are committed, so the tests need no network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sparkdoctor.released import Reader

HERE = Path(__file__).resolve().parent
PROBE = HERE.parents[3] / "probes" / "capabilities" / "__main__.py"

# stack -> {distribution: version}: each stack's own pins (its METADATA), read from the registry
STACKS = {
    "vllm-0.33.0": {"vllm": "0.33.0", "flashinfer-python": "0.7.2.post1", "nvidia-cutlass-dsl-libs-core": "4.8.0"},
    "vllm-0.32.0": {"vllm": "0.32.0", "flashinfer-python": "0.7.0.post1", "nvidia-cutlass-dsl-libs-core": "4.8.0"},
    "cutlass-dsl-4.8.1": {"nvidia-cutlass-dsl-libs-core": "4.8.1"},
    # the newest release of each on the registry on 2026-12-01 (vLLM 0.33.0 pins older FlashInfer and cutlass-dsl; a user upgrades them)
    "newest-2026-12-01": {"vllm": "0.33.0", "flashinfer-python": "0.7.4", "nvidia-cutlass-dsl-libs-core": "4.8.1"},
    # the same on 2026-12-03: vLLM 0.34.0 pins flashinfer-python==0.7.3, which the registry does not have (pip cannot
    # install vllm==0.34.0 as pinned), so its FlashInfer is the newest, 0.7.4, with cutlass-dsl 4.8.1
    "newest-2026-12-03": {"vllm": "0.34.0", "flashinfer-python": "0.7.4", "nvidia-cutlass-dsl-libs-core": "4.8.1"},
    # sglang 0.5.23 pins flashinfer_python[cu13]==0.7.2 and nvidia-cutlass-dsl[cu13]==4.8.0; the probe reads no SGLang file
    "sglang-0.5.23": {"flashinfer-python": "0.7.2", "nvidia-cutlass-dsl-libs-core": "4.8.0"},
}
# what the probe opens beyond its named files: the module a linear-kernel table points to, the b12x kernels
PREFIXES = {
    "vllm": ("vllm/__init__.py", "vllm/envs.py", "vllm/model_executor/kernels/linear/", "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py",
             "vllm/model_executor/layers/quantization/utils/marlin_utils.py", "vllm/v1/worker/gpu_model_runner.py", "vllm/v1/worker/gpu/cudagraph_utils.py",
             "vllm/config/vllm.py"),
    "flashinfer-python": ("flashinfer/__init__.py", "flashinfer/gemm/"),
    "nvidia-cutlass-dsl-libs-core": ("nvidia_cutlass_dsl/dsl_packages/cutlass/cute/nvgpu/warp/mma.py",),
}


def lay_out(site: Path, reader: Reader, dist: str, version: str) -> None:
    release = reader.release(dist, version)
    top = dist.replace("-", "_")
    info = site / f"{top}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    for name in release.names:
        if name.endswith(".py") and name.startswith(PREFIXES[dist]):
            path = site / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(release.text(name))


def capture(stack: str, dists: dict[str, str], reader: Reader) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        for dist, version in dists.items():
            lay_out(site, reader, dist, version)
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(site), "PYTHONNOUSERSITE": "1"}
        out = subprocess.run([sys.executable, "-S", "-B", str(PROBE), "--cache", str(site / "cache.json")],
                             capture_output=True, text=True, timeout=120, env=env, check=True).stdout
        caps = json.loads(out.strip().splitlines()[-1])["capabilities"]
    # evidence paths are relative to the site (the probe names them so); drop the scratch folder if it leaked in
    return {k: {"value": v["value"], "evidence": str(v["evidence"]).replace(tmp + "/", "")} for k, v in sorted(caps.items())}


def main() -> None:
    reader = Reader()
    wanted = sys.argv[1:] or list(STACKS)  # stacks named on the command line, or all
    for stack, dists in ((s, STACKS[s]) for s in wanted):
        caps = capture(stack, dists, reader)
        (HERE / f"capabilities-{stack}.json").write_text(json.dumps({"stack": stack, "read_from": dists, "capabilities": caps}, indent=1) + "\n")
        print(stack, len(caps))


if __name__ == "__main__":
    main()
