"""The static FlashInfer / vLLM capability probe: synthetic files for every rule branch (fast), the
real released wheels (slow) and the real vLLM 0.32 install when this machine has it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from sparkdoctor.collect import Context
from sparkdoctor.collect import capabilities as collector
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget
from tests.probe_modules import probe_module

PROBE = Path(__file__).resolve().parents[1] / "probes" / "capabilities" / "__main__.py"
WHEELS = Path(os.environ.get("SPARKDOCTOR_TEST_WHEELS", Path.home() / ".cache" / "sparkdoctor-tests" / "wheels"))
POISON = "raise SystemExit('the probe must not import this package')\n"


# ---- helpers ------------------------------------------------------------------------------------


def run_probe(site: Path, cache: Path | None = None, env: dict[str, str] | None = None) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    full.update(env or {})
    full["PYTHONPATH"] = str(site)
    cmd = [sys.executable, "-S", "-B", str(PROBE)] + (["--cache", str(cache)] if cache else [])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=full)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def caps_of(site: Path, **kw) -> dict:
    return run_probe(site, **kw)["capabilities"]


def write(site: Path, rel: str, text: str) -> Path:
    path = site / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def dist(site: Path, name: str, version: str, record: str = "") -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(record)


FI_GEMM = """\
    def mm_fp4(a, b, backend="auto"):
        pass

    @supported_compute_capability({ccs})
    def _b12x_gemm_fp4_requirement(a, b):
        return True

    def _b12x_gemm_fp4_runner():
        from .kernels.dense_blockscaled_gemm_sm120_b12x import (
            Sm120B12xBlockScaledDenseGemmKernel,
        )

    def _heuristic_func_mm_fp4(
        suitable_backends,
        a,
    ):
        cuda_major = get_cuda_version().major
        major, minor = get_compute_capability(a.device)
        is_sm120 = {cond}
        if is_sm120 and cuda_major >= 13:
            return [c for c in ("b12x", "cutlass", "cudnn") if c in suitable_backends]
        return [c for c in ("cudnn", "cutlass") if c in suitable_backends]
    """

FI_KERNEL_HARDCODED = """\
    class Sm120B12xBlockScaledDenseGemmKernel:
        def launch(self, sm_version: str):
            if sm_version != "sm_120":
                raise ValueError(f"dense_gemm launch only supports sm_120, got {sm_version}")
    """


def flashinfer_site(tmp_path: Path, ccs="[120, 121]", cond="major == 12 and minor == 0", kernel=FI_KERNEL_HARDCODED, gemm=None) -> Path:
    site = tmp_path / "site"
    dist(site, "flashinfer-python", "0.6.11")
    write(site, "flashinfer/__init__.py", POISON)
    write(site, "flashinfer/gemm/gemm_base.py", gemm if gemm is not None else FI_GEMM.format(ccs=ccs, cond=cond))
    if kernel is not None:
        write(site, "flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120_b12x.py", kernel)
    return site


VLLM_LINEAR = """\
    from vllm.model_executor.kernels.linear.nvfp4.flashinfer import (
        FlashInferCutlassNvFp4LinearKernel,
        FlashInferB12xNvFp4LinearKernel,
    )

    _POSSIBLE_NVFP4_KERNELS: dict = {{
        PlatformEnum.CUDA: [
            FlashInferCutlassNvFp4LinearKernel,
    {auto}        CutlassNvFp4LinearKernel,
        ],
        PlatformEnum.ROCM: [
            EmulationNvFp4LinearKernel,
        ],
    }}
    """

VLLM_MOE = """\
    class NvFp4MoeBackend(Enum):
        FLASHINFER_TRTLLM = "FLASHINFER_TRTLLM"
    {member}
    def select_nvfp4_moe_backend(config):
        AVAILABLE_BACKENDS = [
            NvFp4MoeBackend.FLASHINFER_TRTLLM,
    {auto}    ]
        AVAILABLE_BACKENDS = [b for b in AVAILABLE_BACKENDS if b]
        return AVAILABLE_BACKENDS[0]
    """

VLLM_MARLIN = """\
    def get_marlin_input_dtype(prefix=None):
        if envs.VLLM_MARLIN_INPUT_DTYPE is None:
            return
        elif envs.VLLM_MARLIN_INPUT_DTYPE.lower() == "fp8":
{guard}
            return torch.float8_e4m3fn
    """

VLLM_RUNNER = """\
    class GPUModelRunner:
        def profile_cudagraph_memory(self) -> int:
            mem_samples = []
            for mode, descs in capture_descs:
                first_capture = {first}
                per_graph = max(mem_samples[1] if len(mem_samples) > 1 else 0, 1 << 20)
                shared_memory_estimate[mode] = first_capture
            total_estimate = max(shared_memory_estimate.values(), default=0) + sum(per_graph_estimate.values())
            return int(total_estimate)

        def capture_model(self) -> int:
            return 0
    """

VLLM_CONFIG_ASSERT = """\
    class VllmConfig:
        def check(self):
            if self.cache_config.mamba_cache_mode == "align":
                assert block_size <= self.scheduler_config.max_num_batched_tokens, (
                    "In Mamba cache align mode"
                )
    """

VLLM_ENVS = """\
    import os
    environment_variables: dict[str, Callable[[], Any]] = {
        "VLLM_MARLIN_INPUT_DTYPE": env_with_choices(
            "VLLM_MARLIN_INPUT_DTYPE", None, ["int8", "fp8"]
        ),
        "VLLM_NVFP4_GEMM_BACKEND": deprecated_env(
            "VLLM_NVFP4_GEMM_BACKEND",
            "v0.23",
            "Use --linear-backend.",
            env_with_choices("VLLM_NVFP4_GEMM_BACKEND", None, ["cutlass"]),
        ),
        "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
        "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": lambda: bool(
            int(os.getenv("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "1"))
        ),
        "VLLM_CACHE_ROOT": lambda: os.path.expanduser(os.getenv("VLLM_CACHE_ROOT", os.path.join(get_default_cache_root(), "vllm"))),
    }
    """


def vllm_site(tmp_path: Path, auto="", member="    FLASHINFER_B12X = \"FLASHINFER_B12X\"", moe_auto="", guard=None, first="mem_samples[0]", config=VLLM_CONFIG_ASSERT, envs=VLLM_ENVS, so: bytes | None = b"\x7fELF...-arch sm_120 -m 64\x00...-arch sm_100f -m 64\x00-arch sm_90a\x00", linear=VLLM_LINEAR) -> Path:
    site = tmp_path / "site"
    dist(site, "vllm", "0.22.0")
    write(site, "vllm/__init__.py", POISON)
    if linear is not None:
        write(site, "vllm/model_executor/kernels/linear/__init__.py", linear.format(auto=auto))
    write(site, "vllm/model_executor/kernels/linear/nvfp4/flashinfer.py", "class FlashInferCutlassNvFp4LinearKernel:\n    pass\n\n\nclass FlashInferB12xNvFp4LinearKernel:\n    pass\n")
    write(site, "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py", VLLM_MOE.format(member=member, auto=moe_auto))
    guard = guard if guard is not None else (
        "            if not current_platform.is_device_capability(89) and not current_platform.is_device_capability_family(120):\n"
        "                raise ValueError('fp8 marlin needs sm89 or sm12x')\n"
    )
    write(site, "vllm/model_executor/layers/quantization/utils/marlin_utils.py", VLLM_MARLIN.format(guard=guard))
    write(site, "vllm/v1/worker/gpu_model_runner.py", VLLM_RUNNER.format(first=first))
    if config is not None:
        write(site, "vllm/config/vllm.py", config)
    if envs is not None:
        write(site, "vllm/envs.py", envs)
    if so is not None:
        (site / "vllm" / "_C.abi3.so").write_bytes(so)
    return site


# ---- FlashInfer rules ----------------------------------------------------------------------------


def test_flashinfer_like_0_6_11(tmp_path):
    caps = caps_of(flashinfer_site(tmp_path))
    assert caps["flashinfer.b12x_gemm"]["value"] is True
    assert caps["flashinfer.b12x_gemm_sm121"] == {"value": True, "evidence": "flashinfer/gemm/gemm_base.py:4 @supported_compute_capability([120, 121])"}
    assert caps["flashinfer.b12x_auto_sm121"]["value"] is False
    assert caps["flashinfer.b12x_auto_sm121"]["evidence"].startswith("flashinfer/gemm/gemm_base.py:21 ")
    assert caps["flashinfer.b12x_hardcoded_sm120"] == {
        "value": True,
        "evidence": 'flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120_b12x.py:3 launch accepts only sm_version "sm_120"',
    }
    assert not any(k.startswith("vllm.") for k in caps)  # vLLM not installed: its ids are absent


def test_flashinfer_gate_without_121_and_auto_for_the_whole_family(tmp_path):
    caps = caps_of(flashinfer_site(tmp_path, ccs="[120]", cond="major == 12", kernel="class K:\n    pass\n"))
    assert caps["flashinfer.b12x_gemm_sm121"]["value"] is False
    assert caps["flashinfer.b12x_auto_sm121"]["value"] is True
    assert caps["flashinfer.b12x_hardcoded_sm120"]["value"] is False


def test_flashinfer_auto_condition_beyond_the_rules_is_unknown(tmp_path):
    caps = caps_of(flashinfer_site(tmp_path, cond="current_platform.is_device_capability(SOME_CC)"))
    assert caps["flashinfer.b12x_auto_sm121"]["value"] is None
    assert "cannot tell" in caps["flashinfer.b12x_auto_sm121"]["evidence"]


def test_flashinfer_without_b12x_is_false_everywhere(tmp_path):
    caps = caps_of(flashinfer_site(tmp_path, gemm="def mm_fp4(a, b):\n    pass\n", kernel=None))
    assert {k: v["value"] for k, v in caps.items()} == {
        "flashinfer.b12x_gemm": False, "flashinfer.b12x_gemm_sm121": False,
        "flashinfer.b12x_auto_sm121": False, "flashinfer.b12x_hardcoded_sm120": False,
    }


def test_flashinfer_layout_not_recognised_is_unknown_not_false(tmp_path):
    caps = caps_of(flashinfer_site(tmp_path, gemm="def something_else():\n    pass\n"))
    assert [v["value"] for v in caps.values()] == [None] * 4
    assert all("not recognised" in v["evidence"] for v in caps.values())


def test_flashinfer_missing_kernel_module_or_gate_is_unknown(tmp_path):
    gemm = FI_GEMM.format(ccs="[120, 121]", cond="major == 12").replace("    @supported_compute_capability([120, 121])\n", "")
    caps = caps_of(flashinfer_site(tmp_path, gemm=gemm, kernel=None))
    assert caps["flashinfer.b12x_gemm"]["value"] is True
    assert caps["flashinfer.b12x_gemm_sm121"]["value"] is None
    assert caps["flashinfer.b12x_hardcoded_sm120"]["value"] is None


# ---- vLLM rules ----------------------------------------------------------------------------------


def test_vllm_like_0_22(tmp_path):
    caps = caps_of(vllm_site(tmp_path), env={"VLLM_HOST_IP": "1.2.3.4", "VLLM_BOGUS_FLAG": "1"})
    v = {k: c["value"] for k, c in caps.items()}
    assert v["vllm.b12x_linear"] is True
    assert caps["vllm.b12x_linear"]["evidence"].startswith("vllm/model_executor/kernels/linear/nvfp4/flashinfer.py:5 ")
    assert v["vllm.b12x_linear_auto"] is False
    assert v["vllm.b12x_moe"] is True and v["vllm.b12x_moe_auto"] is False
    assert v["vllm.marlin_fp8_sm121"] is True
    assert v["vllm.cg_estimate_clamped"] is False
    assert caps["vllm.cg_estimate_clamped"]["evidence"].startswith("vllm/v1/worker/gpu_model_runner.py:5 ")
    assert v["vllm.mamba_align_assert"] is True
    assert v["vllm.cubin_archs"] == ["sm_90a", "sm_100f", "sm_120"]
    assert v["vllm.env.VLLM_MARLIN_INPUT_DTYPE"] == "known"
    assert caps["vllm.env.VLLM_NVFP4_GEMM_BACKEND"] == {"value": "deprecated", "evidence": "vllm/envs.py:6 deprecated_env(v0.23, Use --linear-backend.)"}
    assert v["vllm.env.VLLM_HOST_IP"] == "known"
    assert v["vllm.env.VLLM_BOGUS_FLAG"] == "unknown"
    for name in ("VLLM_USE_FLASHINFER_MOE_FP4", "VLLM_FLASHINFER_MOE_BACKEND", "VLLM_TEST_FORCE_FP8_MARLIN"):
        assert v[f"vllm.env.{name}"] == "unknown"  # always reported, set or not
    assert not any(k.startswith("flashinfer.") for k in caps)
    # what the release uses when a variable is unset, for every variable envs.py defines
    assert caps["env_default.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"] == {"value": "1", "evidence": "vllm/envs.py:13: default '1'"}
    assert v["env_default.VLLM_HOST_IP"] == ""
    assert v["env_default.VLLM_MARLIN_INPUT_DTYPE"] is False and v["env_default.VLLM_NVFP4_GEMM_BACKEND"] is False  # no default
    assert v["env_default.VLLM_CACHE_ROOT"] is None  # computed, not a literal: unknown


def test_vllm_b12x_in_auto_lists(tmp_path):
    caps = caps_of(vllm_site(tmp_path, auto="        FlashInferB12xNvFp4LinearKernel,\n", moe_auto="        NvFp4MoeBackend.FLASHINFER_B12X,\n"))
    assert caps["vllm.b12x_linear_auto"]["value"] is True
    assert caps["vllm.b12x_linear_auto"]["evidence"].startswith("vllm/model_executor/kernels/linear/__init__.py:9 ")
    assert caps["vllm.b12x_moe_auto"]["value"] is True


def test_vllm_without_b12x(tmp_path):
    linear = VLLM_LINEAR.replace("    FlashInferB12xNvFp4LinearKernel,\n", "")
    caps = caps_of(vllm_site(tmp_path, member="", linear=linear))
    assert [caps[k]["value"] for k in ("vllm.b12x_linear", "vllm.b12x_linear_auto", "vllm.b12x_moe", "vllm.b12x_moe_auto")] == [False] * 4


def test_vllm_marlin_guard_of_0_20_rejects_sm121(tmp_path):
    guard = (
        "            if not current_platform.is_device_capability(\n                89\n            ) and not current_platform.is_device_capability(120):\n"
        "                raise ValueError('fp8 marlin needs sm89 or sm120')\n"
    )
    caps = caps_of(vllm_site(tmp_path, guard=guard))
    assert caps["vllm.marlin_fp8_sm121"]["value"] is False
    assert "rejects SM121" in caps["vllm.marlin_fp8_sm121"]["evidence"]


@pytest.mark.parametrize(
    ("guard", "value"),
    [
        ("            if not current_platform.has_device_capability((12, 0)):\n                raise ValueError('x')\n", True),
        ("            if not current_platform.is_device_capability(ALLOWED):\n                raise ValueError('x')\n", None),
        ("            pass\n", True),
    ],
)
def test_vllm_marlin_guard_variants(tmp_path, guard, value):
    assert caps_of(vllm_site(tmp_path, guard=guard))["vllm.marlin_fp8_sm121"]["value"] is value


def test_vllm_clamped_estimate_and_no_mamba_assert(tmp_path):
    config = 'class VllmConfig:\n    def check(self):\n        if self.cache_config.mamba_cache_mode == "align":\n            pass\n'
    caps = caps_of(vllm_site(tmp_path, first="max(mem_samples[0], 0)", config=config))
    assert caps["vllm.cg_estimate_clamped"]["value"] is True
    assert caps["vllm.mamba_align_assert"] == {"value": False, "evidence": "vllm/config/vllm.py:3 align mode without the block_size <= max_num_batched_tokens assert"}


V2_ESTIMATE = """\
    @torch.inference_mode()
    def profile_cudagraph_memory(runner: "GPUModelRunner") -> int:
        mem_samples: list[int] = []
        try:
            measured = int(runner.capture_model(profile_only=True))
            full_estimate = _extrapolate_full_graph_memory(mem_samples, 4)
            return {ret}
        finally:
            runner.cudagraph_manager = None
    """


@pytest.mark.parametrize(("ret", "value"), [("max(measured - sum(mem_samples) + full_estimate, 0)", True),
                                            ("measured - sum(mem_samples) + full_estimate", None)])
def test_vllm_0_34_runner_estimate_read_from_cudagraph_utils(tmp_path, ret, value):
    """vLLM 0.34.0 removed gpu_model_runner.py; its one runner estimates in vllm/v1/worker/gpu/cudagraph_utils.py and
    clamps at 0 (the released file's shape). An estimate whose clamp the rules do not see is unknown, never "unclamped"."""
    site = vllm_site(tmp_path)
    (site / "vllm/v1/worker/gpu_model_runner.py").unlink()
    write(site, "vllm/v1/worker/gpu/cudagraph_utils.py", "import torch\n\n\n" + textwrap.dedent(V2_ESTIMATE).format(ret=ret))
    cap = caps_of(site)["vllm.cg_estimate_clamped"]
    assert cap["value"] is value
    assert cap["evidence"].startswith("vllm/v1/worker/gpu/cudagraph_utils.py:" + ("10 estimate clamped at 0" if value else "5: "))


def test_vllm_removed_variable_is_named_removed_and_has_no_default(tmp_path):
    """vLLM 0.34.0 lists VLLM_MARLIN_INPUT_DTYPE in removed_environment_variables and raises at startup while it is set:
    that is "removed", not the "unknown" of a variable a release merely stopped reading."""
    envs = VLLM_ENVS.replace('    "VLLM_MARLIN_INPUT_DTYPE": env_with_choices(\n        "VLLM_MARLIN_INPUT_DTYPE", None, ["int8", "fp8"]\n    ),\n', "")
    envs = 'removed_environment_variables: dict[str, str] = {\n    "VLLM_MARLIN_INPUT_DTYPE": (\n        "Marlin no longer supports 8-bit activations. "\n        "Use `--quantization humming`."\n    ),\n}\n\n' + textwrap.dedent(envs)
    caps = caps_of(vllm_site(tmp_path, envs=envs), env={"VLLM_MARLIN_INPUT_DTYPE": "fp8"})
    assert caps["vllm.env.VLLM_MARLIN_INPUT_DTYPE"] == {
        "value": "removed",
        "evidence": "vllm/envs.py:2 removed_environment_variables: Marlin no longer supports 8-bit activations. Use `--quantization humming`."}
    assert "env_default.VLLM_MARLIN_INPUT_DTYPE" not in caps and caps["vllm.env.VLLM_NVFP4_GEMM_BACKEND"]["value"] == "deprecated"


def test_vllm_layouts_not_recognised_are_unknown(tmp_path):
    site = vllm_site(tmp_path, linear=None, config=None, envs="environment_variables = make_table()\n", so=None)
    write(site, "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py", "# moved\n")
    write(site, "vllm/model_executor/layers/quantization/utils/marlin_utils.py", "# moved\n")
    write(site, "vllm/v1/worker/gpu_model_runner.py", "# moved\n")
    caps = caps_of(site, env={"VLLM_X": "1"})
    for key in ("vllm.b12x_linear", "vllm.b12x_linear_auto", "vllm.b12x_moe", "vllm.b12x_moe_auto", "vllm.marlin_fp8_sm121",
                "vllm.cg_estimate_clamped", "vllm.mamba_align_assert", "vllm.cubin_archs", "vllm.env.VLLM_X"):
        assert caps[key]["value"] is None, key
        assert caps[key]["evidence"], key


@pytest.mark.parametrize("odd", ["a FIFO", "/dev/zero"])
def test_an_odd_source_file_is_unknown_and_never_blocks(tmp_path, odd):
    site = vllm_site(tmp_path, envs=None, so=None)
    for rel in ("vllm/envs.py", "vllm/_C.abi3.so"):
        os.mkfifo(site / rel) if odd == "a FIFO" else (site / rel).symlink_to("/dev/zero")
    caps = caps_of(site)  # before: blocked on open(), or read /dev/zero without end
    assert caps["vllm.env.VLLM_NVFP4_GEMM_BACKEND"]["value"] is None
    assert caps["vllm.cubin_archs"]["value"] is None
    assert caps["vllm.mamba_align_assert"]["value"] is True  # the rest is read as usual


def test_vllm_so_without_arch_strings_is_unknown(tmp_path):
    caps = caps_of(vllm_site(tmp_path, so=b"\x7fELF nothing here"))
    assert caps["vllm.cubin_archs"]["value"] is None


def test_arch_scan_across_chunk_boundaries(tmp_path):
    mod = probe_module("capabilities", "capabilities_vllm", own_name="sd_caps_vllm")
    blob = tmp_path / "_C.so"
    blob.write_bytes(b"x" * 10 + b"-arch sm_121a -m 64" + b"y" * 7 + b"-arch sm_90 ")
    for chunk in range(4, 40):  # every split point of both strings
        assert mod.scan_archs(str(blob), chunk=chunk) == {"sm_121a", "sm_90"}, chunk


# ---- locating, caching --------------------------------------------------------------------------


def test_editable_install_is_found_through_its_finder(tmp_path):
    src = tmp_path / "checkout"
    write(src, "vllm/__init__.py", POISON)
    write(src, "vllm/config/vllm.py", VLLM_CONFIG_ASSERT)
    site = tmp_path / "site"
    write(site, "__editable___vllm_0_22_0_finder.py", f"MAPPING = {{'vllm': '{src / 'vllm'}'}}\n")
    dist(site, "vllm", "0.22.0", record="__editable___vllm_0_22_0_finder.py,,\n")
    out = run_probe(site)
    assert out["packages"]["vllm"] == {"version": "0.22.0", "root": str(src / "vllm")}
    assert out["capabilities"]["vllm.mamba_align_assert"]["value"] is True


def test_source_checkout_with_egg_info_is_found(tmp_path):
    checkout = tmp_path / "vllm-src"
    write(checkout, "vllm/__init__.py", POISON)
    write(checkout, "vllm/config/vllm.py", VLLM_CONFIG_ASSERT)
    write(checkout, "vllm.egg-info/PKG-INFO", "Metadata-Version: 2.1\nName: vllm\nVersion: 0.21.1.dev42+g1234abc.cu130\n")
    out = run_probe(checkout)
    assert out["packages"]["vllm"] == {"version": "0.21.1.dev42+g1234abc.cu130", "root": str(checkout / "vllm")}
    assert out["capabilities"]["vllm.mamba_align_assert"]["value"] is True


def test_installed_but_unlocatable_gives_unknown_ids(tmp_path):
    site = tmp_path / "site"
    dist(site, "flashinfer-python", "0.6.9")
    caps = caps_of(site)
    assert sorted(caps) == ["flashinfer.b12x_auto_sm121", "flashinfer.b12x_gemm", "flashinfer.b12x_gemm_sm121", "flashinfer.b12x_hardcoded_sm120"]
    assert all(v["value"] is None and "not found" in v["evidence"] for v in caps.values())


def test_nothing_installed_gives_no_ids(tmp_path):
    (tmp_path / "site").mkdir()
    assert caps_of(tmp_path / "site") == {}


def test_cache_is_reused_and_revalidated_by_file_stat(tmp_path):
    site = vllm_site(tmp_path)
    cache = tmp_path / "cache.json"
    cold = run_probe(site, cache=cache)
    warm = run_probe(site, cache=cache)
    assert warm["capabilities"] == cold["capabilities"]
    data = json.loads(cache.read_text())
    assert len(data) == 1 and "vllm/config/vllm.py" in next(iter(data.values()))["seen"]
    # An edit (new size and mtime) must be seen, never answered from the cache.
    cfg = site / "vllm" / "config" / "vllm.py"
    cfg.write_text('class VllmConfig:\n    def check(self):\n        if self.cache_config.mamba_cache_mode == "align":\n            pass  # assert dropped by a local patch\n')
    os.utime(cfg, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    assert run_probe(site, cache=cache)["capabilities"]["vllm.mamba_align_assert"]["value"] is False
    # A new binary next to the package changes the listing, so the arch scan reruns.
    (site / "vllm" / "_C_extra.abi3.so").write_bytes(b"-arch sm_121a ")
    assert "sm_121a" in run_probe(site, cache=cache)["capabilities"]["vllm.cubin_archs"]["value"]


def test_corrupt_cache_is_ignored(tmp_path):
    site = vllm_site(tmp_path)
    cache = tmp_path / "cache.json"
    cache.write_text("{not json")
    assert run_probe(site, cache=cache)["capabilities"]["vllm.mamba_align_assert"]["value"] is True
    json.loads(cache.read_text())  # rewritten whole
    # A well-formed cache whose entries lie about their files is revalidated, not trusted.
    data = json.loads(cache.read_text())
    for entry in data.values():
        entry["facts"]["caps"]["vllm.mamba_align_assert"]["value"] = "stale"
        entry["seen"]["vllm/config/vllm.py"] = [1, 1]
    cache.write_text(json.dumps(data))
    assert run_probe(site, cache=cache)["capabilities"]["vllm.mamba_align_assert"]["value"] is True


@pytest.mark.parametrize("facts", [{}, {"caps": [1]}, {"caps": {"vllm.mamba_align_assert": "yes"}}, None])
def test_a_cache_entry_of_another_shape_is_computed_again(tmp_path, facts):
    """An entry whose files still match but whose derived facts have another shape (another version's cache, a hand
    edit) ended the probe with KeyError/TypeError on every run (it is never rewritten: nothing new was computed)."""
    site = vllm_site(tmp_path)
    cache = tmp_path / "cache.json"
    fresh = run_probe(site, cache=cache)["capabilities"]
    data = json.loads(cache.read_text())
    for entry in data.values():
        entry["facts"] = facts
    cache.write_text(json.dumps(data))
    assert run_probe(site, cache=cache)["capabilities"] == fresh
    assert run_probe(site, cache=cache)["capabilities"] == fresh  # and the entry was written again


def test_probe_is_python38_syntax():
    import ast

    for path in [*PROBE.parent.glob("*.py"), *(PROBE.parents[1] / "shared").glob("*.py")]:
        ast.parse(path.read_text(), feature_version=(3, 8))


def test_collector_runs_the_probe_through_the_target(tmp_path, monkeypatch):
    site = flashinfer_site(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(site))
    ctx = Context(target=PythonTarget(sys.executable, "test"), facts=Facts(), cache_dir=tmp_path / "cache")
    out = collector.run(ctx)
    assert out["capabilities"]["flashinfer.b12x_gemm_sm121"]["value"] is True
    assert list((tmp_path / "cache" / "capabilities").glob("*.json"))
    ctx.use_cache = False
    assert collector.run(ctx) == out


# ---- the real thing --------------------------------------------------------------------------------


def wheel(spec: str) -> Path:
    """A released wheel from PyPI, downloaded once into the shared test cache."""
    name, version = spec.split("==")
    stem = name.replace("-", "_")
    found = sorted(WHEELS.glob(f"{stem}-{version}-*.whl"))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(WHEELS), spec],
            check=True, timeout=1800, capture_output=True,
        )
        found = sorted(WHEELS.glob(f"{stem}-{version}-*.whl"))
    assert found, f"pip download {spec} left no wheel in {WHEELS}"
    return found[0]


def install_subset(whl: Path, site: Path, keep) -> Path:
    """Unzip what the probe reads (plus the dist-info) into a fake site-packages."""
    with zipfile.ZipFile(whl) as zf:
        for member in zf.namelist():
            if ".dist-info/" in member or keep(member):
                zf.extract(member, site)
    return site


def fi_member(m: str) -> bool:
    return m in ("flashinfer/__init__.py", "flashinfer/gemm/gemm_base.py", "flashinfer/gemm.py") or m.startswith("flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120")


VLLM_READS = (
    "vllm/__init__.py", "vllm/envs.py", "vllm/config/vllm.py", "vllm/model_executor/kernels/linear/__init__.py",
    "vllm/model_executor/kernels/linear/nvfp4/flashinfer.py", "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py",
    "vllm/model_executor/layers/quantization/utils/marlin_utils.py", "vllm/v1/worker/gpu_model_runner.py",
)


def vllm_member(m: str) -> bool:
    return m in VLLM_READS or (m.startswith("vllm/_C") and m.endswith(".so"))


FLASHINFER_FACTS = {
    # version: (sm121 gate line, hard-coded sm_120 kernel evidence or None)
    "0.6.9": (4541, "flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120.py:1591"),
    "0.6.11": (5137, "flashinfer/gemm/kernels/dense_blockscaled_gemm_sm120_b12x.py:1591"),
    "0.6.18": (6207, None),
    "0.7.2.post1": (8064, None),
}


@pytest.mark.slow
@pytest.mark.parametrize("version", list(FLASHINFER_FACTS))
def test_real_flashinfer_wheels(tmp_path, version):
    site = install_subset(wheel(f"flashinfer-python=={version}"), tmp_path / "site", fi_member)
    (site / "flashinfer" / "__init__.py").write_text(POISON)
    caps = caps_of(site)
    gate_line, hardcoded = FLASHINFER_FACTS[version]
    assert caps["flashinfer.b12x_gemm"]["value"] is True
    assert caps["flashinfer.b12x_gemm_sm121"] == {"value": True, "evidence": f"flashinfer/gemm/gemm_base.py:{gate_line} @supported_compute_capability([120, 121])"}
    assert caps["flashinfer.b12x_auto_sm121"]["value"] is False  # auto prefers b12x on SM120 only
    assert caps["flashinfer.b12x_hardcoded_sm120"]["value"] is (hardcoded is not None)
    if hardcoded:
        assert caps["flashinfer.b12x_hardcoded_sm120"]["evidence"].startswith(hardcoded + " ")


VLLM_FACTS = {
    "0.20.2": {
        "vllm.b12x_linear": False, "vllm.b12x_linear_auto": False, "vllm.b12x_moe": False, "vllm.b12x_moe_auto": False,
        "vllm.marlin_fp8_sm121": False, "vllm.cg_estimate_clamped": False, "vllm.mamba_align_assert": True,
        "vllm.env.VLLM_NVFP4_GEMM_BACKEND": "known", "vllm.env.VLLM_USE_FLASHINFER_MOE_FP4": "known",
        "vllm.env.VLLM_FLASHINFER_MOE_BACKEND": "known", "vllm.env.VLLM_TEST_FORCE_FP8_MARLIN": "known", "vllm.env.VLLM_MARLIN_INPUT_DTYPE": "known",
    },
    "0.22.0": {
        "vllm.b12x_linear": True, "vllm.b12x_linear_auto": False, "vllm.b12x_moe": True, "vllm.b12x_moe_auto": False,
        "vllm.marlin_fp8_sm121": True, "vllm.cg_estimate_clamped": False, "vllm.mamba_align_assert": True,
        "vllm.env.VLLM_NVFP4_GEMM_BACKEND": "deprecated", "vllm.env.VLLM_USE_FLASHINFER_MOE_FP4": "deprecated",
        "vllm.env.VLLM_FLASHINFER_MOE_BACKEND": "deprecated", "vllm.env.VLLM_TEST_FORCE_FP8_MARLIN": "known", "vllm.env.VLLM_MARLIN_INPUT_DTYPE": "known",
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("version", list(VLLM_FACTS))
def test_real_vllm_wheels(tmp_path, version):
    site = install_subset(wheel(f"vllm=={version}"), tmp_path / "site", vllm_member)
    (site / "vllm" / "__init__.py").write_text(POISON)
    caps = caps_of(site)
    assert {k: caps[k]["value"] for k in VLLM_FACTS[version]} == VLLM_FACTS[version]
    archs = caps["vllm.cubin_archs"]["value"]
    assert "sm_120" in archs and "sm_120f" in archs and not any(a.startswith("sm_121") for a in archs)
    if version == "0.22.0":
        assert caps["vllm.cg_estimate_clamped"]["evidence"].startswith("vllm/v1/worker/gpu_model_runner.py:6327 ")
        assert caps["vllm.mamba_align_assert"]["evidence"].startswith("vllm/config/vllm.py:2102 ")
        assert "v0.23" in caps["vllm.env.VLLM_NVFP4_GEMM_BACKEND"]["evidence"]


@pytest.mark.slow
def test_real_vllm_032_install(tmp_path, vllm032_venv):
    cache = tmp_path / "caps.json"
    cmd = [str(vllm032_venv / "bin" / "python"), "-B", str(PROBE), "--cache", str(cache)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    import resource

    def run_timed() -> tuple[dict, float]:
        """The probe's answer and the CPU seconds it cost (wall time on a busy machine says little)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=True).stdout)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    cold, cold_cpu = run_timed()
    warm, warm_cpu = run_timed()
    caps = warm["capabilities"]
    assert warm["packages"]["vllm"]["version"] == "0.32.0" and warm["packages"]["flashinfer-python"]["version"] == "0.7.0.post1"
    assert caps == cold["capabilities"]
    values = {k: v["value"] for k, v in caps.items()}
    assert values["flashinfer.b12x_gemm_sm121"] is True and values["flashinfer.b12x_auto_sm121"] is False
    assert values["flashinfer.b12x_hardcoded_sm120"] is False
    assert values["vllm.b12x_linear"] is True and values["vllm.b12x_linear_auto"] is True
    assert values["vllm.b12x_moe"] is True and values["vllm.b12x_moe_auto"] is False
    assert values["vllm.marlin_fp8_sm121"] is True and values["vllm.cg_estimate_clamped"] is False
    assert values["vllm.mamba_align_assert"] is False
    assert values["vllm.env.VLLM_NVFP4_GEMM_BACKEND"] == "unknown" and values["vllm.env.VLLM_MARLIN_INPUT_DTYPE"] == "known"
    # served from the cache: measured 0.02 s of CPU against the cold scan's 0.19 s (the interpreter's start is in both).
    # It was held to 100 ms of the probe's own wall clock and 1 s of the test's, which a loaded machine can stretch.
    assert warm_cpu * 3 < cold_cpu, (warm_cpu, cold_cpu)


# ---- CuTe DSL's SM120 block-scaled MMA guard, read from the installed file ----------------------------
# The class skeleton as cutlass-dsl 4.4.2 (python_packages, strings) and 4.8.1 (dsl_packages, Arch values) ship it.
WARP_MMA_442 = """\
    @dataclass(frozen=True)
    class MmaSM120BlockScaledOp(MmaOp):
        admissible_archs = [
            "sm_120a",
        ]

        def __post_init__(self) -> None:
            arch = BaseDSL._get_dsl().get_arch_enum()
            if not arch == Arch.sm_120a:
                raise OpError(self, f"expects arch to be one of {self.admissible_archs}, but got {arch}")


    class MmaMXF4Op(MmaSM120BlockScaledOp):
        admissible_archs = ["sm_121a"]
    """
WARP_MMA_481 = WARP_MMA_442.replace('''        admissible_archs = [
            "sm_120a",
        ]''', '''        admissible_archs = [
            Arch.sm_120a,
            Arch.sm_120f,
            Arch.sm_121a,
            Arch.sm_121f,
        ]''')


@pytest.mark.parametrize("folder, text, admits", [
    ("python_packages", WARP_MMA_442, False),  # 4.4.x: sm_120a only (a later class listing sm_121a does not count)
    ("dsl_packages", WARP_MMA_481, True),      # 4.6+: libs-core
], ids=["4.4.2", "4.8.1"])
def test_cutedsl_sm121a_admission_is_read_from_the_file(tmp_path, folder, text, admits):
    site = tmp_path / "site"
    dist(site, "nvidia-cutlass-dsl", "4.4.2")
    write(site, f"nvidia_cutlass_dsl/{folder}/cutlass/cute/nvgpu/warp/mma.py", text)
    cap = caps_of(site)["cutedsl.sm120_blockscaled_sm121a"]
    assert cap["value"] is admits
    assert cap["evidence"].startswith(f"nvidia_cutlass_dsl/{folder}/cutlass/cute/nvgpu/warp/mma.py:3 admissible_archs = [sm_120a")


def test_cutedsl_layout_not_recognised_is_unknown_and_absent_is_silent(tmp_path):
    site = tmp_path / "site"
    write(site, "nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu/warp/mma.py", "class SomethingElse:\n    pass\n")
    assert caps_of(site)["cutedsl.sm120_blockscaled_sm121a"]["value"] is None
    assert "cutedsl.sm120_blockscaled_sm121a" not in caps_of(tmp_path / "empty")
