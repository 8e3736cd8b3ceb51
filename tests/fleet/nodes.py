"""Serving environments for fleet tests: bare venvs (no pip, offline) holding the distributions a node's
serving stack would, with drift injected where a test asks for it.

The NCCL library of the nvidia-nccl-cu13 wheel is a real ELF shared object (one of this interpreter's own
extension modules, which carry a GNU build-id) with the "NCCL version X" banner NCCL embeds appended:
two nodes given different source objects hold two builds of one version, exactly the drift of
vllm-project/vllm#41725. The cutlass-dsl libraries use the 4.6+ layout of tests/test_targetenv.py.
"""

from __future__ import annotations

import _ctypes
import _json
import subprocess
import sys
from pathlib import Path

from tests.test_targetenv import flavoured_cutedsl, record_row, site_of, write_dist

NCCL_VERSION = "2.28.9"
ELF_SOURCES = {"a": Path(_json.__file__), "b": Path(_ctypes.__file__)}


def nccl_library(path: Path, build: str, version: str = NCCL_VERSION) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(ELF_SOURCES[build].read_bytes() + f"\0NCCL version {version}+cuda13.0\0".encode())
    return path


def serving_venv(root: Path, name: str, nccl_build: str = "a", cutedsl_majors: tuple[int, ...] = (12, 13),
                 vllm: str = "0.22.0") -> Path:
    """A bare venv with vllm, nvidia-nccl-cu13 (its libnccl.so.2 of `nccl_build`) and nvidia-cutlass-dsl
    4.8.0 with the library builds of `cutedsl_majors`; its interpreter's path."""
    folder = root / name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    site = site_of(python)
    write_dist(site, "vllm", vllm, f"Metadata-Version: 2.1\nName: vllm\nVersion: {vllm}\n", [])
    lib = nccl_library(site / "nvidia" / "nccl" / "lib" / "libnccl.so.2", nccl_build)
    write_dist(site, "nvidia-nccl-cu13", NCCL_VERSION, f"Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: {NCCL_VERSION}\n",
               [record_row(site, str(lib.relative_to(site)))])
    files = flavoured_cutedsl(python)
    for major, so in files.items():
        if major not in cutedsl_majors:  # uninstall that library build: its files and its dist-info
            so.unlink()
            for info in site.glob(f"nvidia_cutlass_dsl_libs_cu{major}-*.dist-info"):
                for f in info.iterdir():
                    f.unlink()
                info.rmdir()
    return python
