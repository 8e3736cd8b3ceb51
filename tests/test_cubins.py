"""Cubin-arch file checks: `cuobjdump --list-elf` read into arch names, and the `cubins` /
`lacks_cubins` kinds of a `files` table.

Fast: a tiny real shared object compiled here with nvcc for sm_90, sm_120a and the sm_120f family
(so the caveat is proven, not assumed: the family cubin is listed as plain sm_120), put into a real
wheel and checked end to end. verify + slow: vLLM's released _C.abi3.so (0.19.1 vs 0.20.0).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.kernels.tools import nvidia_wheel_bins
from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.verify import cubins
from sparkdoctor.verify import files as file_checks
from sparkdoctor.verify.wheels import WheelFiles, wheel
from tests.test_matrix_files import make_wheel, matrix_file

SOURCE = "__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\nvoid launch(float* x) { twice<<<1, 32>>>(x); }\n"
ARCHS = ("-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_120a,code=sm_120a",
         "-gencode", "arch=compute_120f,code=sm_120f")


def _nvcc() -> str:
    """A CUDA 13 nvcc: the system's, else the nvidia-cuda-nvcc wheel of the test extra."""
    found = shutil.which("nvcc") or next((str(b / "nvcc") for b in nvidia_wheel_bins() if (b / "nvcc").is_file()), None)
    assert found, "no nvcc: pip install -e '.[test]' (nvidia-cuda-nvcc)"
    return found


@pytest.fixture(scope="session")
def tiny_so(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cubins")
    (folder / "twice.cu").write_text(SOURCE)
    out = folder / "libtwice.so"
    p = subprocess.run([_nvcc(), "-shared", "-Xcompiler", "-fPIC", *ARCHS, "-o", str(out), str(folder / "twice.cu")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and out.is_file(), p.stderr[-2000:]
    return out


def test_cuobjdump_is_found_and_lists_the_archs_of_a_real_so(tiny_so):
    assert cubins.find_cuobjdump(), "no cuobjdump: pip install -e '.[test]' (nvidia-cuda-cuobjdump)"
    # compiled for sm_90, sm_120a and the sm_120f family: the family cubin is listed as plain sm_120
    assert cubins.list_cubins(tiny_so) == ("sm_90", "sm_120", "sm_120a")


def test_a_file_without_device_code_lists_no_cubins(tmp_path):
    plain = tmp_path / "libplain.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-x", "c", "-", "-o", str(plain)], input="int f(void){return 1;}\n",
                   text=True, check=True, timeout=60)
    assert cubins.list_cubins(plain) == ()


def test_a_failing_cuobjdump_is_one_line_error(tmp_path):
    missing = tmp_path / "absent.so"
    with pytest.raises(cubins.CubinError) as caught:
        cubins.list_cubins(missing)
    assert "cuobjdump --list-elf absent.so failed" in str(caught.value) and "\n" not in str(caught.value)


def test_parse_list_elf_keeps_suffixes_and_drops_everything_else():
    text = ("ELF file    1: _C.abi3.1.sm_75.cubin\nELF file    2: _C.abi3.2.sm_120.cubin\n"
            "ELF file    3: _C.abi3.3.sm_90a.cubin\nELF file    4: x.4.sm_120a.cubin\nELF file    5: x.5.sm_75.cubin\n"
            "PTX file    1: x.1.sm_90.ptx\ncuobjdump info    : something\n")
    assert cubins.parse_list_elf(text) == ("sm_75", "sm_90a", "sm_120", "sm_120a")
    assert cubins.parse_list_elf("") == ()


CUBIN_FILES = """
evidence = "checked"
files.package = "demo-pkg"
files.affected = ["1.0"]
files.fixed = ["2.0"]
files.checks = [
  { path = "demo/*.so", cubins = ["sm_90", "sm_120a"] },
  { path = "demo/libtwice.so", lacks_cubins = ["sm_121a"], fixed = "same" },
]
last_verified = { date = "2026-11-23", versions = "demo-pkg 1.0 / 2.0" }
"""


@pytest.fixture
def so_wheels(tmp_path, monkeypatch, tiny_so):
    root = tmp_path / "wheels"
    monkeypatch.setenv("SPARKDOCTOR_WHEELS", str(root))
    make_wheel(root, "demo-pkg", "1.0", {"demo/libtwice.so": tiny_so.read_bytes()})
    make_wheel(root, "demo-pkg", "2.0", {"demo/libtwice.so": Path("/bin/true").read_bytes()})  # no device code
    return root


def test_cubin_checks_confirm_with_the_caveat_in_the_evidence(tmp_path, so_wheels):
    result = file_checks.verify_files(load(matrix_file(tmp_path, CUBIN_FILES)).entries[0])
    assert result.verdict == "confirmed", result.why
    assert "cuobjdump lists family cubins (sm_XXXf) as plain sm_XXX" in result.why
    affected = result.runs[0].to_dict()
    assert affected["evidence"] == ["demo/libtwice.so: cubins sm_90, sm_120, sm_120a (cuobjdump lists family cubins (sm_XXXf) as plain sm_XXX)"]
    assert result.runs[1].evidence == ["demo/libtwice.so: cubins none (cuobjdump lists family cubins (sm_XXXf) as plain sm_XXX)"]


def test_cubin_checks_contradict_when_the_archs_are_not_there(tmp_path, so_wheels):
    extra = CUBIN_FILES.replace('cubins = ["sm_90", "sm_120a"]', 'cubins = ["sm_121a"]')
    result = file_checks.verify_files(load(matrix_file(tmp_path, extra)).entries[0])
    assert result.verdict == "contradicted" and result.why == "affected 1.0: demo/*.so ships cubins for sm_121a does not hold"
    gone = CUBIN_FILES.replace('path = "demo/libtwice.so"', 'path = "demo/other.so"')  # nothing to look at is not a pass
    assert file_checks.verify_files(load(matrix_file(tmp_path, gone)).entries[0]).verdict == "contradicted"


def test_without_cuobjdump_the_check_is_an_error_never_a_pass(tmp_path, so_wheels, monkeypatch):
    monkeypatch.setattr(cubins, "find_cuobjdump", lambda: None)
    result = file_checks.verify_files(load(matrix_file(tmp_path, CUBIN_FILES)).entries[0])
    assert result.verdict == "error" and "\n" not in result.why
    assert result.why == "demo_pkg-1.0-py3-none-any.whl: no cuobjdump found (PATH, $CUDA_HOME/bin, the nvidia-cuda-cuobjdump wheel): cannot list cubins"


@pytest.mark.parametrize("check, message", [
    ('cubins = ["sm_120f"]', "field 'files.checks[0]': cubins has 'sm_120f': cuobjdump lists family cubins as plain sm_120; write that"),
    ('cubins = ["gfx90a"]', "field 'files.checks[0]': cubins has 'gfx90a', which is not an arch name such as sm_90 or sm_120a"),
    ("cubins = []", "field 'files.checks[0]': cubins must be a non-empty list of arch names"),
    ('lacks_cubins = "sm_120a"', "field 'files.checks[0]': lacks_cubins must be a non-empty list of arch names"),
])
def test_validate_names_file_entry_and_field_of_a_bad_cubin_check(tmp_path, check, message):
    extra = CUBIN_FILES.replace('cubins = ["sm_90", "sm_120a"]', check)
    with pytest.raises(MatrixError) as caught:
        load(matrix_file(tmp_path, extra))
    assert message in str(caught.value) and "demo.toml: entry demo-entry" in str(caught.value)


@pytest.mark.slow
@pytest.mark.verify
def test_vllm_release_wheels_ship_sm120a_cubins_before_cuda13_and_family_code_after():
    """One cached vLLM wheel pair: 0.19.1 (CUDA 12.9) has sm_120a cubins, 0.20.0 (CUDA 13) only sm_120."""
    listed = {}
    for version in ("0.19.1", "0.20.0"):
        files = WheelFiles(wheel("vllm", version))
        try:
            listed[version] = files.cubins("vllm/_C.abi3.so")
        finally:
            files.close()
    assert {"sm_120", "sm_120a"} <= set(listed["0.19.1"]) and "sm_121a" not in listed["0.19.1"]
    assert "sm_120" in listed["0.20.0"] and not {"sm_120a", "sm_121a"} & set(listed["0.20.0"])
    result = file_checks.verify_files(load().get("vllm-cuda13-arch-family"))
    assert result.verdict == "confirmed", result.why


def test_matrix_verify_prints_the_listed_cubins(tmp_path, so_wheels):
    path = matrix_file(tmp_path, CUBIN_FILES)
    run = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--kind", "files", "--matrix", str(path)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "SPARKDOCTOR_WHEELS": str(so_wheels)})
    assert run.returncode == 0, run.stderr
    assert "demo/libtwice.so: cubins sm_90, sm_120, sm_120a (cuobjdump lists family cubins (sm_XXXf) as plain sm_XXX)" in run.stdout
