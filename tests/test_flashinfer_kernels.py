"""FlashInfer's precompiled kernels (`vllm download-kernels`, vLLM 0.32+) in `check`: the target probe lists them, the
Facts judge them for the installed FlashInfer and the arch, and the matrix conditions on it.

A real venv (python -m venv) whose site-packages holds the dist-info trees `vllm download-kernels` leaves behind:
flashinfer-jit-cache and its providers are not on PyPI (only on flashinfer.ai's own index, which this machine cannot
reach), so the wheels' metadata is written here the way pip writes it. Names, versions and the shim's
Requires-Dist follow flashinfer-python 0.7.0.post1's flashinfer/__main__.py (the version vLLM 0.32.0 pins).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FI = "0.7.0.post1"
CU = f"{FI}+cu130"
ENTRY = "fi-kernels-not-downloaded"


@pytest.fixture
def venv(tmp_path) -> tuple[Path, Path]:
    """(python, site-packages) of a fresh venv (without pip: quick; nothing is installed into it by pip here)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120)
    return tmp_path / "venv" / "bin" / "python", next((tmp_path / "venv").glob("lib/python*/site-packages"))


def add(site: Path, name: str, version: str, files: dict[str, str] | None = None, requires: tuple[str, ...] = ()) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    headers = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(headers) + "\n\nThe long description.\n")
    for rel, text in (files or {}).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    (info / "RECORD").write_text("".join(f"{rel},,\n" for rel in files or {}) + f"{info.name}/RECORD,,\n")


def base(site: Path, torch_cuda: str = "13.0") -> None:
    """vLLM 0.32.0 (with its download-kernels command), torch built for `torch_cuda`, flashinfer-python."""
    add(site, "vllm", "0.32.0", {"vllm/__init__.py": "", "vllm/entrypoints/cli/download_kernels.py": "# the command\n"})
    add(site, "torch", "2.13.0", {"torch/__init__.py": "", "torch/version.py": f"cuda = '{torch_cuda}'\ngit_version = 'x'\n"})
    add(site, "flashinfer-python", FI, {"flashinfer/__init__.py": ""})


def downloaded(site: Path, providers: tuple[str, ...] = ("sm100a", "sm120f"), cubin: str = FI, provider_version: str = CU) -> None:
    """What `python -m flashinfer download-kernels` installs: the cubin wheel, the jit-cache shim and its providers."""
    add(site, "flashinfer-cubin", cubin, {"flashinfer_cubin/__init__.py": ""})
    add(site, "flashinfer-jit-cache", CU, {"flashinfer_jit_cache/__init__.py": ""},
        requires=tuple(f"flashinfer-jit-cache-{tag}=={CU}" for tag in providers))
    for tag in providers:
        add(site, f"flashinfer-jit-cache-{tag}", provider_version, {f"flashinfer_jit_cache_{tag}/__init__.py": ""})


def check(python: Path, tmp_path: Path, arch: str = "sm_121a") -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache"),
           "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    env = {k: v for k, v in env.items() if not k.startswith(("VLLM_", "FLASHINFER_"))}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--arch", arch,
                           "--format", "json"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode in (0, 1), done.stderr  # 1: findings at or above --fail-on
    return json.loads(done.stdout)


def verdict(report: dict) -> tuple[str | None, bool]:
    from sparkdoctor.facts import Facts
    from sparkdoctor.flashinfer_kernels import state

    found = state(Facts.from_dict(report["facts"], source="test"))
    return (found or {}).get("status"), ENTRY in {f["id"] for f in report["findings"]}


def test_downloaded_kernels_for_the_installed_flashinfer_and_gb10_are_present(venv, tmp_path):
    python, site = venv
    base(site)
    downloaded(site)
    report = check(python, tmp_path)
    raw = report["facts"]["flashinfer_kernels"]
    assert raw["vllm_download_kernels"] is True and raw["jit_cache_wanted"] is True and raw["torch_cuda"] == "13.0"
    assert raw["jit_cache"] == {"version": CU, "matches": True, "requires": ["sm100a", "sm120f"]}
    assert [p["arch"] for p in raw["providers"]] == ["sm100a", "sm120f"]
    assert verdict(report) == ("present", False)  # sm120f (a family target) runs on sm_121a; sm100a does not


def test_no_kernel_wheels_is_missing_and_the_matrix_says_run_download_kernels(venv, tmp_path):
    python, site = venv
    base(site)
    report = check(python, tmp_path)
    assert report["facts"]["flashinfer_kernels"]["cubin"] is None
    assert verdict(report) == ("missing", True)
    finding = next(f for f in report["findings"] if f["id"] == ENTRY)
    assert "vllm download-kernels" in finding["remedy"]


def test_kernels_of_another_flashinfer_version_are_mismatched(venv, tmp_path):
    python, site = venv
    base(site)
    downloaded(site, cubin="0.6.11.post2")
    assert verdict(check(python, tmp_path)) == ("mismatched", True)


def test_providers_for_other_gpus_only_are_no_arch_for_gb10_and_present_for_theirs(venv, tmp_path):
    python, site = venv
    base(site)
    downloaded(site, providers=("sm100a", "sm90a"))
    assert verdict(check(python, tmp_path)) == ("no-arch", True)
    assert verdict(check(python, tmp_path, arch="sm_100a")) == ("present", False)


def test_a_torch_older_than_cuda_12_9_needs_the_cubin_wheel_only(venv, tmp_path):
    python, site = venv
    base(site, torch_cuda="12.8")
    add(site, "flashinfer-cubin", FI, {"flashinfer_cubin/__init__.py": ""})
    report = check(python, tmp_path)
    assert report["facts"]["flashinfer_kernels"]["jit_cache_wanted"] is False
    assert verdict(report) == ("present", False)


def test_an_older_vllm_is_not_told_to_download_kernels(venv, tmp_path):
    python, site = venv
    add(site, "vllm", "0.31.0", {"vllm/__init__.py": ""})
    add(site, "torch", "2.12.0", {"torch/__init__.py": "", "torch/version.py": "cuda = '13.0'\n"})
    add(site, "flashinfer-python", "0.6.18", {"flashinfer/__init__.py": ""})
    report = check(python, tmp_path)
    assert report["facts"]["flashinfer_kernels"]["vllm_download_kernels"] is False
    assert verdict(report) == ("missing", False)  # the state is reported; the entry is for vLLM 0.32 and newer
