"""The issue's real cases, each: check -> fix --yes -> the CuTe DSL probe / the check result ->
fix --rollback (offline) -> the original bytes. Each target is made as users make it: `python -m venv`,
its own pip, plain `pip install` of real cutlass-dsl wheels from the registry (about 75-190 MB each,
from pip's cache when warm), so every .pyc is pip's own; the real CuTe DSL compiler compiles the NVFP4
MMA probe for sm_121a (no GPU needed); a real vLLM 0.32 venv (read-only: the env fix touches only the
file). The venvs are built once and lent (tests.venvs.borrowed) to one test at a time: each test puts
its venv back byte for byte, which is what it proves.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from sparkdoctor.fix import journal as jr
from tests import venvs
from tests.fix import scenario

pytestmark = pytest.mark.slow
PROBE = "cutedsl-nvfp4-mma"
OFFLINE = {"PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}
COLLISION = venvs.CUTEDSL_COLLISION  # the same steps as the read-only venv whatif's proof uses; this one is lent and changed
CU13_442 = [["nvidia-cutlass-dsl[cu13]==4.4.2"]]
CU13_453 = [["nvidia-cutlass-dsl[cu13]==4.5.3"], ["--force-reinstall", "--no-deps", "nvidia-cutlass-dsl-libs-cu13==4.5.3"]]


def cli(*args: str, env: dict | None = None, timeout: float = 1200):
    return scenario.run([sys.executable, "-m", "sparkdoctor", *args], timeout=timeout, env=env)


def probe(python: Path, env: dict | None = None) -> tuple[str, str, str]:
    res = cli("check", "--python", str(python), "--format", "json", env=env)
    facts = json.loads(res.stdout)["facts"]
    k = facts["kernels"][PROBE]
    return k["status"], k.get("detail") or "", facts["cutedsl"]["active_build"]


def tree(python: Path) -> dict[str, str]:
    return scenario.state(python, [])["hashes"]


def moved(python: Path, dists_before: list[str]) -> dict[str, set[str]]:
    """name -> the versions that came or went since, from the dist-info folders on disk."""
    out: dict[str, set[str]] = {}
    for folder in set(dists_before) ^ set(scenario.state(python, [])["dists"]):
        name, version = folder.removesuffix(".dist-info").rsplit("-", 1)
        out.setdefault(canonicalize_name(name), set()).add(version)
    return out


def untouched(python: Path, before: dict[str, str], code: dict[str, tuple[int, int]]) -> None:
    """Every file of every dist as before, and no top-level module's .pyc deleted or rewritten."""
    assert tree(python) == before
    assert scenario.byte_code(python) == code


def test_cu13_collision_fixed_then_rolled_back(tmp_path):
    """nvidia-cutlass-dsl[cu13]==4.5.0, then libs-base force-reinstalled over it: pip lists cu13, the
    libs-base bytes are active and the NVFP4 MMA fails with `_mma`. fix: a clean cu13 reinstall. The venv
    is reached through a symlinked folder, as a venvs folder on a data disk is: the .pyc pip wrote name
    the other path."""
    with venvs.borrowed("fix-collision-450", COLLISION) as real:
        (tmp_path / "venvs").symlink_to(real.parent.parent.parent)
        python = tmp_path / "venvs" / real.parent.parent.name / "bin" / "python"
        status, detail, build = probe(python)
        assert (status, build) == ("fail", "libs-base") and "'_mma'" in detail
        before, code, dists = tree(python), scenario.byte_code(python), scenario.state(python, [])["dists"]
        res = cli("fix", "--python", str(python), "--yes", "--format", "json")
        body = json.loads(res.stdout)
        assert res.returncode == 0 and body["error"] is None, res.stdout + res.stderr
        # the plan that was applied, as its journal keeps it (a plan-only run before would make the same plan: it
        # checked the venv with its kernel probes and ran the dry runs once more for nothing the test asserts)
        (journal,) = scenario.journals(jr.state_dir())
        plan = json.loads((journal / "journal.json").read_text())["plan"]
        # (gone may list a finding about this machine too, such as its page cache)
        assert {"cutedsl-450-nvfp4-garbage", "cutedsl-libs-base-tile-crash", "cutedsl-wheel-collision"} <= set(body["gone"])
        assert body["outside_restored"] == [] and "fix-unfinished" not in body["new"]
        assert [s["requirements"] for s in plan["steps"] if s["op"] == "restore"] == [["nvidia-cutlass-dsl-libs-cu13==4.5.3"]]
        assert plan["changes"] == {n: ["4.5.0", "4.5.3"] for n in ("nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13")}
        assert moved(python, dists) == {n: set(v) for n, v in plan["changes"].items()}, "the applied plan named every dist that moved"
        assert scenario.byte_code(python) == code, "the apply deleted or rewrote byte code of dists it does not name"
        assert probe(python)[::2] == ("ok", "libs-cu13")
        back = cli("fix", "--rollback", env=OFFLINE)
        assert back.returncode == 0 and "byte for byte" in back.stdout, back.stdout + back.stderr
        untouched(python, before, code)
        status, detail, build = probe(python)
        assert (status, build) == ("fail", "libs-base") and "'_mma'" in detail


SIBLING = "nvidia-cutlass-dsl-libs-cu13==4.4.2\n"


@pytest.mark.parametrize("siblings", [False, True], ids=["one-pin", "sibling-pins"])
def test_constraints_pin_442_lifted_then_rolled_back(tmp_path, siblings):
    """PIP_CONSTRAINT pins nvidia-cutlass-dsl==4.4.2 with 4.4.2 installed (a pip venv): the pin is
    changed, the package upgraded, the probe passes; rollback brings back the file bytes and 4.4.2.
    sibling-pins: the file pins nvidia-cutlass-dsl-libs-cu13==4.4.2 too (issue 20 item 3: before, the
    plan's dry run ended in ResolutionImpossible); both pins move together."""
    pins = tmp_path / "constraints.txt"
    pins.write_text("# pins from the exp-b12x mod\nnvidia-cutlass-dsl==4.4.2\n" + (SIBLING if siblings else ""))
    original = pins.read_bytes()
    env = {"PIP_CONSTRAINT": str(pins)}
    with venvs.borrowed("fix-cu13-442", CU13_442) as python:
        assert probe(python, env)[0] == "refused"
        before, code = tree(python), scenario.byte_code(python)
        res = cli("fix", "--python", str(python), "--yes", env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "+nvidia-cutlass-dsl>=4.5.2" in res.stdout and "installer: " + str(python) + " -m pip" in res.stdout
        assert "compiled again" not in res.stdout and scenario.byte_code(python) == code
        assert pins.read_text() == "# pins from the exp-b12x mod\nnvidia-cutlass-dsl>=4.5.2\n" + (SIBLING.replace("==4.4.2", ">=4.5.2") if siblings else "")
        assert probe(python, env)[::2] == ("ok", "libs-cu13")
        back = cli("fix", "--rollback", env={**env, **OFFLINE})
        assert back.returncode == 0 and f"restored {pins}" in back.stdout, back.stdout + back.stderr
        assert pins.read_bytes() == original
        untouched(python, before, code)
        assert "nvidia-cutlass-dsl==4.4.2" in scenario.must([str(python), "-m", "pip", "freeze", "--all"]).stdout


def test_442_without_kernels_fixed_then_rolled_back():
    """A plain 4.4.2 cu13 venv, fixed with --no-kernels (the upgrade check's findings ask for, without
    compiling anything): the apply stands, the rollback puts back every byte."""
    with venvs.borrowed("fix-cu13-442", CU13_442) as python:
        before, code = tree(python), scenario.byte_code(python)
        res = cli("fix", "--python", str(python), "--yes", "--no-kernels", "--format", "json")
        body = json.loads(res.stdout)
        assert res.returncode == 0 and body["error"] is None and body["done"], res.stdout + res.stderr
        assert body["outside_restored"] == [] and scenario.byte_code(python) == code
        assert "nvidia-cutlass-dsl==4.4.2" not in scenario.must([str(python), "-m", "pip", "freeze", "--all"]).stdout
        back = cli("fix", "--rollback", env=OFFLINE)
        assert back.returncode == 0 and "byte for byte" in back.stdout, back.stdout + back.stderr
        untouched(python, before, code)


def test_hand_edited_warp_mma_restored_then_rolled_back():
    """A hand-edited warp/mma.py in an otherwise registry-installed cutlass-dsl 4.5.3 (cu13): restored
    from the registry to the released bytes; rollback puts the edit back (and the test the released bytes)."""
    with venvs.borrowed("fix-cu13-453", CU13_453) as python:
        pristine = tree(python)
        mma = next(python.parent.parent.glob("lib/python*/site-packages/nvidia_cutlass_dsl/python_packages/cutlass/cute/nvgpu/warp/mma.py"))
        released = mma.read_bytes()
        mma.write_text(released.decode().replace("admissible_archs = [", "admissible_archs = [Arch.sm_121, ", 1))
        edited = tree(python)
        res = cli("fix", "--python", str(python), "--yes", "--no-kernels")
        assert res.returncode == 0, res.stdout + res.stderr
        assert "Findings gone: cutedsl-hand-modified, cutedsl-warp-mma-patch-obsolete" in res.stdout
        assert tree(python) == pristine
        back = cli("fix", "--rollback", env=OFFLINE)
        assert back.returncode == 0, back.stdout + back.stderr
        assert tree(python) == edited
        mma.write_bytes(released)
        assert tree(python) == pristine


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
