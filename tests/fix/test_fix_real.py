"""The issue's real cases, each: check -> fix --yes -> the CuTe DSL probe / the check result ->
fix --rollback (offline) -> the original bytes. Real cutlass-dsl wheels from the registry (about
75-190 MB each, from uv's cache when warm), the real CuTe DSL compiler compiling the NVFP4 MMA probe
for sm_121a (no GPU needed), a real vLLM 0.32 venv (read-only: the env fix touches only the file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fix import scenario

pytestmark = pytest.mark.slow
PROBE = "cutedsl-nvfp4-mma"
OFFLINE = {"PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}


def cli(*args: str, env: dict | None = None, timeout: float = 1200):
    return scenario.run([sys.executable, "-m", "sparkdoctor", *args], timeout=timeout, env=env)


def probe(python: Path, env: dict | None = None) -> tuple[str, str, str]:
    res = cli("check", "--python", str(python), "--format", "json", env=env)
    facts = json.loads(res.stdout)["facts"]
    k = facts["kernels"][PROBE]
    return k["status"], k.get("detail") or "", facts["cutedsl"]["active_build"]


def tree(python: Path) -> dict[str, str]:
    return scenario.state(python, [])["hashes"]


def uv_target(root: Path, *steps: list[str]) -> Path:
    scenario.must([scenario.uv(), "venv", "--quiet", str(root / "v")])
    python = root / "v" / "bin" / "python"
    for step in steps:
        scenario.must([scenario.uv(), "pip", "install", "--quiet", "--python", str(python), *step], timeout=1200)
    return python


def test_cu13_collision_fixed_then_rolled_back(tmp_path):
    """nvidia-cutlass-dsl[cu13]==4.5.0, then libs-base force-reinstalled over it: pip lists cu13, the
    libs-base bytes are active and the NVFP4 MMA fails with `_mma`. fix: a clean cu13 reinstall."""
    python = uv_target(tmp_path, ["nvidia-cutlass-dsl[cu13]==4.5.0"], ["--reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-base==4.5.0"])
    status, detail, build = probe(python)
    assert (status, build) == ("fail", "libs-base") and "'_mma'" in detail
    before = tree(python)
    res = cli("fix", "--python", str(python), "--yes")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Findings gone: cutedsl-450-nvfp4-garbage, cutedsl-libs-base-tile-crash, cutedsl-wheel-collision" in res.stdout
    assert "reinstall nvidia-cutlass-dsl-libs-cu13==4.5.3 last" in res.stdout
    assert probe(python)[::2] == ("ok", "libs-cu13")
    back = cli("fix", "--rollback", env=OFFLINE)
    assert back.returncode == 0 and "byte for byte" in back.stdout, back.stdout + back.stderr
    assert tree(python) == before
    status, detail, build = probe(python)
    assert (status, build) == ("fail", "libs-base") and "'_mma'" in detail


SIBLING = "nvidia-cutlass-dsl-libs-cu13==4.4.2\n"


@pytest.mark.parametrize("siblings", [False, True], ids=["one-pin", "sibling-pins"])
def test_constraints_pin_442_lifted_then_rolled_back(tmp_path, siblings):
    """PIP_CONSTRAINT pins nvidia-cutlass-dsl==4.4.2 with 4.4.2 installed (a pip venv): the pin is
    changed, the package upgraded, the probe passes; rollback brings back the file bytes and 4.4.2.
    sibling-pins: the file pins nvidia-cutlass-dsl-libs-cu13==4.4.2 too (issue 20 item 3: before, the
    plan's dry run ended in ResolutionImpossible); both pins move together."""
    scenario.must([sys.executable, "-m", "venv", str(tmp_path / "v")])
    python = tmp_path / "v" / "bin" / "python"
    scenario.must([scenario.uv(), "pip", "install", "--quiet", "--python", str(python), "nvidia-cutlass-dsl[cu13]==4.4.2"], timeout=1200)
    pins = tmp_path / "constraints.txt"
    pins.write_text("# pins from the exp-b12x mod\nnvidia-cutlass-dsl==4.4.2\n" + (SIBLING if siblings else ""))
    original = pins.read_bytes()
    env = {"PIP_CONSTRAINT": str(pins)}
    assert probe(python, env)[0] == "refused"
    before = tree(python)
    res = cli("fix", "--python", str(python), "--yes", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "+nvidia-cutlass-dsl>=4.5.2" in res.stdout and "installer: " + str(python) + " -m pip" in res.stdout
    assert pins.read_text() == "# pins from the exp-b12x mod\nnvidia-cutlass-dsl>=4.5.2\n" + (SIBLING.replace("==4.4.2", ">=4.5.2") if siblings else "")
    assert probe(python, env)[::2] == ("ok", "libs-cu13")
    back = cli("fix", "--rollback", env={**env, **OFFLINE})
    assert back.returncode == 0 and f"restored {pins}" in back.stdout, back.stdout + back.stderr
    assert pins.read_bytes() == original and tree(python) == before
    assert "nvidia-cutlass-dsl==4.4.2" in scenario.must([str(python), "-m", "pip", "freeze", "--all"]).stdout


def test_hand_edited_warp_mma_restored_then_rolled_back(tmp_path):
    """A hand-edited warp/mma.py in an otherwise registry-installed cutlass-dsl 4.5.3 (cu13): restored
    from the registry to the released bytes; rollback puts the edit back."""
    python = uv_target(tmp_path, ["nvidia-cutlass-dsl[cu13]==4.5.3"], ["--reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-cu13==4.5.3"])
    pristine = tree(python)
    mma = next((tmp_path / "v").glob("lib/python*/site-packages/nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu/warp/mma.py"))
    mma.write_text(mma.read_text().replace("admissible_archs = [", "admissible_archs = [Arch.sm_121, ", 1))
    edited = tree(python)
    res = cli("fix", "--python", str(python), "--yes", "--no-kernels")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Findings gone: cutedsl-hand-modified, cutedsl-warp-mma-patch-obsolete" in res.stdout
    assert tree(python) == pristine
    back = cli("fix", "--rollback", env=OFFLINE)
    assert back.returncode == 0, back.stdout + back.stderr
    assert tree(python) == edited


def test_env_file_var_removed_next_to_vllm_032_then_rolled_back(tmp_path, vllm032_venv):
    """VLLM_NVFP4_GEMM_BACKEND in an env file next to vLLM 0.32, which removed it: the line is removed,
    the finding is gone; rollback puts it back. The vLLM venv is only read."""
    env_file = tmp_path / "vllm.env"
    env_file.write_text("# serve env\nVLLM_NVFP4_GEMM_BACKEND=flashinfer-b12x\nCUTE_DSL_ARCH=sm_121a\n")
    original = env_file.read_bytes()
    python = vllm032_venv / "bin" / "python"
    dists = sorted(p.name for p in vllm032_venv.glob("lib/python*/site-packages/*.dist-info"))
    res = cli("fix", "--python", str(python), "--env-file", str(env_file), "--no-kernels", "--yes")
    assert "Findings gone: vllm-env-nvfp4-gemm-backend-removed" in res.stdout, res.stdout + res.stderr
    assert env_file.read_text() == "# serve env\nCUTE_DSL_ARCH=sm_121a\n"
    back = cli("fix", "--rollback", env=OFFLINE)
    assert back.returncode == 0 and env_file.read_bytes() == original, back.stdout + back.stderr
    assert sorted(p.name for p in vllm032_venv.glob("lib/python*/site-packages/*.dist-info")) == dists
