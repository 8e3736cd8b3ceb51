"""Cubin-arch file checks: the archs of a library's fatbin read in Python (no CUDA tool; checked
against cuobjdump here), and the `cubins` / `lacks_cubins` kinds of a `files` table.

Fast: a tiny real shared object compiled here with nvcc for sm_90, sm_120a and the sm_120f family
(so the caveat is proven, not assumed: the family cubin is listed as plain sm_120), put into a real
wheel and checked end to end. verify + slow: vLLM's released _C.abi3.so (0.19.1 vs 0.20.0).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.kernels.tools import nvidia_wheel_bins
from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.released import cubins
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


def build_tiny_so(folder: Path) -> Path:
    """A real CUDA shared object compiled with nvcc for sm_90, sm_120a and the sm_120f family."""
    (folder / "twice.cu").write_text(SOURCE)
    out = folder / "libtwice.so"
    p = subprocess.run([_nvcc(), "-shared", "-Xcompiler", "-fPIC", *ARCHS, "-o", str(out), str(folder / "twice.cu")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and out.is_file(), p.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def tiny_so(tmp_path_factory) -> Path:
    return build_tiny_so(tmp_path_factory.mktemp("cubins"))


def _listed(path: Path, decided=None) -> cubins.Listing:
    data = path.read_bytes()
    return cubins.list_archs((data[i : i + 4096] for i in range(0, len(data), 4096)), decided, path.name)


def test_the_fatbin_reader_lists_the_archs_of_a_real_so(tiny_so):
    # compiled for sm_90, sm_120a and the sm_120f family: the family cubin is listed as plain sm_120
    listing = _listed(tiny_so)
    assert listing.archs == ("sm_90", "sm_120", "sm_120a") and listing.complete


def test_the_fatbin_reader_agrees_with_cuobjdump(tiny_so):
    """The Python reader against NVIDIA's own tool (from the test extra's nvidia-cuda-cuobjdump wheel):
    the same arch names, family cubins included."""
    tool = shutil.which("cuobjdump") or next((str(b / "cuobjdump") for b in nvidia_wheel_bins() if (b / "cuobjdump").is_file()), None)
    assert tool, "no cuobjdump: pip install -e '.[test]' (nvidia-cuda-cuobjdump)"
    out = subprocess.run([tool, "--list-elf", str(tiny_so)], capture_output=True, text=True, timeout=120, check=True).stdout
    listed = {m.group(1) for m in re.finditer(r"\.(sm_\d+a?)\.cubin", out)}
    assert tuple(sorted(listed, key=lambda a: (int(re.sub(r"\D", "", a)), a))) == _listed(tiny_so).archs


def test_the_listing_stops_once_the_checks_are_decided(tiny_so):
    whole = _listed(tiny_so)
    # a cubins check for sm_90 is decided by the first entry: the rest of the fatbin is not read
    early = _listed(tiny_so, cubins.decided_by([("cubins", ("sm_90",))]))
    assert early.archs == ("sm_90",) and not early.complete and early.read < whole.read
    # a lacks_cubins check that holds needs the whole fatbin
    full = _listed(tiny_so, cubins.decided_by([("lacks_cubins", ("sm_121a",))]))
    assert full == whole
    assert "read until the checks were decided" in early.words() and "read until" not in whole.words()


def test_a_file_without_device_code_lists_no_cubins(tmp_path):
    plain = tmp_path / "libplain.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-x", "c", "-", "-o", str(plain)], input="int f(void){return 1;}\n",
                   text=True, check=True, timeout=60)
    assert _listed(plain).archs == ()


def test_a_broken_fatbin_is_one_line_error(tiny_so):
    data = bytearray(tiny_so.read_bytes())
    at = data.find(bytes.fromhex("50ed55ba01001000"))
    data[at + 16 + 4 : at + 16 + 8] = (1 << 30).to_bytes(4, "little")  # the first entry's header size
    with pytest.raises(cubins.CubinError) as caught:
        cubins.list_archs(iter([bytes(data)]), name="libtwice.so")
    assert str(caught.value).startswith("libtwice.so: a fatbin entry header of 1073741824 bytes") and "\n" not in str(caught.value)


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
    assert "family cubins (sm_XXXf) are listed as plain sm_XXX" in result.why
    affected = result.runs[0].to_dict()
    assert affected["evidence"] == ["demo/libtwice.so: cubins sm_90, sm_120, sm_120a (family cubins (sm_XXXf) are listed as plain sm_XXX)"]
    assert result.runs[1].evidence == ["demo/libtwice.so: cubins none (family cubins (sm_XXXf) are listed as plain sm_XXX)"]


def test_cubin_checks_contradict_when_the_archs_are_not_there(tmp_path, so_wheels):
    extra = CUBIN_FILES.replace('cubins = ["sm_90", "sm_120a"]', 'cubins = ["sm_121a"]')
    result = file_checks.verify_files(load(matrix_file(tmp_path, extra)).entries[0])
    assert result.verdict == "contradicted" and result.why == "affected 1.0: demo/*.so ships cubins for sm_121a does not hold"
    gone = CUBIN_FILES.replace('path = "demo/libtwice.so"', 'path = "demo/other.so"')  # nothing to look at is not a pass
    assert file_checks.verify_files(load(matrix_file(tmp_path, gone)).entries[0]).verdict == "contradicted"


def test_a_cubin_check_needs_no_cuda_tool(tmp_path, so_wheels, monkeypatch):
    """No program may run: the check reads the wheel itself. (It used to run cuobjdump, and a machine
    without one got an error where the committed document has an answer.)"""
    from sparkdoctor import proc

    def refuse(*args, **kwargs):
        raise AssertionError(f"a file check ran a program: {args[:1]}")

    monkeypatch.setattr(proc, "run", refuse)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    result = file_checks.verify_files(load(matrix_file(tmp_path, CUBIN_FILES)).entries[0])
    assert result.verdict == "confirmed", result.why
    assert result.runs[0].evidence == ["demo/libtwice.so: cubins sm_90, sm_120, sm_120a (family cubins (sm_XXXf) are listed as plain sm_XXX)"]


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
    # the entries built on this fact check it from far fewer bytes (the sdist's CMake, the CUDA runtime a
    # small extension links): they must give the answer the cubins give
    for entry in ("vllm-cuda13-arch-family", "vllm-nvfp4-emulation-forced"):
        result = file_checks.verify_files(load().get(entry))
        assert result.verdict == "confirmed", result.why


def test_matrix_verify_prints_the_listed_cubins(tmp_path, so_wheels):
    path = matrix_file(tmp_path, CUBIN_FILES)
    run = subprocess.run([sys.executable, "-m", "sparkdoctor", "matrix", "verify", "--kind", "files", "--matrix", str(path)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "SPARKDOCTOR_WHEELS": str(so_wheels)})
    assert run.returncode == 0, run.stderr
    assert "demo/libtwice.so: cubins sm_90, sm_120, sm_120a (family cubins (sm_XXXf) are listed as plain sm_XXX)" in run.stdout
