"""The tools a probe needs: the ptxas binaries the toolkits collector found (one per real binary,
wrapper scripts resolved to what they run), which of them matters first, and a disassembler.

A tool's identity, the kernel cache's key, changes whenever what it runs could: the resolved
binary's realpath, size and mtime, and every wrapper script's realpath, size, mtime and bytes."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sparkdoctor.arch import first_cuda_for
from sparkdoctor.ptxas import WRAPPER_MAX_BYTES, is_script, resolve_ptxas, version_tuple

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
    identity: str  # what it runs, see the module docstring: changes whenever the binary or a wrapper does
    used_by: tuple[str, ...] = ()  # e.g. ("triton",): who really calls this ptxas
    archs: tuple[str, ...] = ()  # the --gpu-name values it lists, when the toolkits collector read them
    binary: str = ""  # the resolved binary's realpath: tools are one per binary

    def knows(self, arch: str) -> bool | None:
        if self.archs:
            return arch in self.archs
        return ptxas_knows(self.version, arch)


def _file_identity(path: str, with_bytes: bool) -> str:
    st = os.stat(path)
    text = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    if with_bytes:  # a wrapper is at most WRAPPER_MAX_BYTES: a bigger script is known by size, mtime and its head
        with open(path, "rb") as fh:
            text += "|" + hashlib.sha256(fh.read(WRAPPER_MAX_BYTES + 1)).hexdigest()
    return text


def tool_identity(path: str, version: str | None) -> tuple[str, str] | None:
    """(binary, identity) of a tool path, or None when it cannot be read."""
    try:
        resolved = resolve_ptxas(path)
        parts = [_file_identity(resolved.binary, with_bytes=is_script(resolved.binary))]
        parts += [f"script:{_file_identity(script, with_bytes=True)}" for script in resolved.scripts]
    except OSError:
        return None
    return resolved.binary, "|".join([*parts, str(version)])


def usable_ptxas(toolkits: list[dict[str, Any]]) -> tuple[list[Tool], list[str]]:
    """The ptxas binaries that can be tried (one per resolved binary: a wrapper and the binary it runs
    are one tool, used by whoever uses either), and why others cannot."""
    tools: list[Tool] = []
    skipped: list[str] = []
    by_binary: dict[str, int] = {}
    for tk in toolkits:
        if tk.get("tool", "ptxas") != "ptxas":
            continue
        path = tk.get("path")
        if tk.get("error") or not path:
            skipped.append(f"{path or 'ptxas'}: {tk.get('error') or 'no path'}")
            continue
        found = tool_identity(path, tk.get("version"))
        if found is None:
            skipped.append(f"{path}: not readable")
            continue
        binary, ident = found
        used_by = tuple(tk.get("used_by") or ())
        if binary in by_binary:
            kept = tools[by_binary[binary]]
            tools[by_binary[binary]] = replace(kept, used_by=tuple(dict.fromkeys(kept.used_by + used_by)))
            continue
        by_binary[binary] = len(tools)
        tools.append(Tool(path, tk.get("version"), str(tk.get("source") or "unknown"), ident, used_by, tuple(tk.get("archs") or ()), binary))
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
    found = tool_identity(str(path), None)
    return Tool(str(path), None, source, found[1] if found else str(path), binary=found[0] if found else str(path))


def find_disassembler(ptxas: Tool) -> Tool | None:
    """nvdisasm or cuobjdump: next to the ptxas (same CUDA release), else on PATH, else from an
    nvidia-cuda-nvdisasm / -cuobjdump wheel installed beside sparkdoctor."""
    folders = [Path(ptxas.path).parent, Path(os.path.realpath(ptxas.path)).parent]
    if ptxas.binary:
        folders.append(Path(ptxas.binary).parent)
    candidates = [folder / name for folder in dict.fromkeys(folders) for name in ("nvdisasm", "cuobjdump")]
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
