"""The tools a probe needs: the ptxas binaries the toolkits collector found (one per real file),
which of them matters first, and a disassembler."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor.arch import first_cuda_for
from sparkdoctor.collect.toolkits import version_tuple

_SOURCE_RANK = {"system": 0, "pip": 1, "env": 2, "triton": 3}


def ptxas_knows(version: str | None, arch: str) -> bool | None:
    first = first_cuda_for(arch)
    have = version_tuple(version)
    if not first or len(have) < 2:
        return None
    return have[:2] >= first


@dataclass(frozen=True)
class Tool:
    path: str
    version: str | None
    source: str
    identity: str  # realpath, size, mtime and version: changes whenever the binary does
    used_by: tuple[str, ...] = ()  # e.g. ("triton",): who really calls this ptxas
    archs: tuple[str, ...] = ()  # the --gpu-name values it lists, when the toolkits collector read them

    def knows(self, arch: str) -> bool | None:
        if self.archs:
            return arch in self.archs
        return ptxas_knows(self.version, arch)


def _identity(path: str, version: str | None) -> str | None:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}|{st.st_size}|{st.st_mtime_ns}|{version}"


def usable_ptxas(toolkits: list[dict[str, Any]]) -> tuple[list[Tool], list[str]]:
    """The ptxas binaries that can be tried (one per real file), and why others cannot."""
    tools, skipped, seen = [], [], set()
    for tk in toolkits:
        if tk.get("tool", "ptxas") != "ptxas":
            continue
        path = tk.get("path")
        if tk.get("error") or not path:
            skipped.append(f"{path or 'ptxas'}: {tk.get('error') or 'no path'}")
            continue
        ident = _identity(path, tk.get("version"))
        if ident is None:
            skipped.append(f"{path}: not readable")
            continue
        real = ident.split("|", 1)[0]
        if real in seen:
            continue
        seen.add(real)
        tools.append(
            Tool(path, tk.get("version"), str(tk.get("source") or "unknown"), ident, tuple(tk.get("used_by") or ()), tuple(tk.get("archs") or ()))
        )
    return tools, skipped


def preferred(tools: list[Tool], arch: str) -> list[Tool]:
    """The ptxas that matters first: one that knows the arch, from a CUDA toolkit (system, pip)
    before the one an env var or Triton brings."""
    return sorted(tools, key=lambda t: (t.knows(arch) is False, _SOURCE_RANK.get(t.source, 9)))


def nvidia_wheel_bins() -> list[Path]:
    """bin/ folders of nvidia-* wheels in sparkdoctor's own environment (nvidia-cuda-nvdisasm)."""
    try:
        import nvidia  # namespace package of the CUDA wheels
    except ImportError:
        return []
    return sorted(Path(p) / sub / "bin" for p in getattr(nvidia, "__path__", []) for sub in os.listdir(p) if sub.startswith("cu"))


def _disassembler(path: Path, source: str) -> Tool:
    return Tool(str(path), None, source, _identity(str(path), None) or str(path))


def find_disassembler(ptxas: Tool) -> Tool | None:
    """nvdisasm or cuobjdump: next to the ptxas (same CUDA release), else on PATH, else from an
    nvidia-cuda-nvdisasm / -cuobjdump wheel installed beside sparkdoctor."""
    folders = [Path(ptxas.path).parent, Path(os.path.realpath(ptxas.path)).parent]
    candidates = [folder / name for folder in folders for name in ("nvdisasm", "cuobjdump")]
    candidates += [Path(p) for p in (shutil.which("nvdisasm"), shutil.which("cuobjdump")) if p]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return _disassembler(candidate, "path")
    for folder in nvidia_wheel_bins():
        for name in ("nvdisasm", "cuobjdump"):
            candidate = folder / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return _disassembler(candidate, "pip")
    return None
