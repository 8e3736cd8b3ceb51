"""`whatif --probe`, the PTX half: compile the PTX probes (probes/kernels/) with the ptxas an upgrade would put
on disk, when the upgrade moves one.

A ptxas comes with a wheel: Triton bundles its own (triton/backends/nvidia/bin/ptxas, and ptxas-blackwell in
some releases), nvidia-cuda-nvcc ships the CUDA one. When the proposed set changes such a distribution, the
ptxas binaries of its old and new release are read out of the released wheels (single members over range
requests, sparkdoctor.released; never installed), written to a temp folder, and every PTX probe for the arch
is assembled by each (the same ptxas call as `check`'s kernel probes: a compile counts only with a cubin for
the arch). The wheel read is this machine's (its ptxas must run here); a ptxas of one CUDA release assembles
the same PTX the same way on any host. What this answers is "does it assemble for sm_121a": no GB10 runs the
result here. A change that moves no ptxas leaves the PTX probes' answer as it is (said, with why).
"""

from __future__ import annotations

import os
import platform
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from sparkdoctor import proc

VERSION_TIMEOUT = 30.0
_PTXAS_MEMBER = re.compile(r"(?:^|/)bin/ptxas(?:-[\w.]+)?$")
_RELEASE = re.compile(r"release (\d+\.\d+), V([\d.]+)|cuda_(\d+\.\d+)")


def ships_ptxas(name: str) -> bool:
    """A distribution whose wheels carry a ptxas: Triton (and its forks) and nvidia-cuda-nvcc."""
    return "triton" in name or name.startswith("nvidia-cuda-nvcc")


def host_platform() -> str:
    machine = platform.machine().lower()
    return "linux-aarch64" if machine in ("aarch64", "arm64") else "linux-x86_64"


def ptxas_version(path: str) -> str | None:
    done = proc.run([path, "--version"], timeout=VERSION_TIMEOUT)
    found = _RELEASE.search(done.stdout or "") if done.ok else None
    if not found:
        return None
    return found.group(2) or found.group(1) or found.group(3)


def _compile_all(ptxas: str, version: str | None, arch: str, folder: Path) -> list[dict[str, Any]]:
    from sparkdoctor.kernels.assemble import (
        COMPILE_TIMEOUT,
        explain,
        ptxas_errors,
        run_ptxas,
    )
    from sparkdoctor.kernels.collector import compile_arch, selected_probes
    from sparkdoctor.kernels.probes import load_probes
    from sparkdoctor.kernels.tools import Tool

    tool = Tool(ptxas, version, "wheel", ptxas)
    rows = []
    for probe in selected_probes(load_probes(), arch):
        target, _note = compile_arch(probe, arch)
        ptx, cubin = folder / f"{probe.id}.ptx", folder / f"{probe.id}.cubin"
        ptx.write_text(probe.ptx_for(target), encoding="utf-8")
        result, bad = run_ptxas(tool, target, ptx, cubin, COMPILE_TIMEOUT)
        if result.ok and not bad:
            verdict, detail = "compiled", f"a cubin for {target}"
        elif result.ok:
            verdict, detail = "could not run", f"ptxas exited 0 but {bad}"
        elif result.timed_out or result.start_error or result.signal:
            verdict, detail = "could not run", result.describe_failure()
        else:
            error = ptxas_errors(result.stderr or result.stdout)
            verdict, detail = "refused", explain(error, target, probe, version) or error
        rows.append({"probe": probe.id, "arch": target, "verdict": verdict, "detail": str(detail)[:300]})
    return rows


def _one_release(reader: Any, name: str, version: str, arch: str, tmp: Path) -> list[dict[str, Any]]:
    """Each ptxas of one release of `name`, with the PTX probes compiled by it."""
    from sparkdoctor.released import RemoteError

    try:
        wheel = reader.release(name, version)
        members = [m for m in wheel.names if _PTXAS_MEMBER.search(m)]
    except RemoteError as exc:
        return [{"dist": name, "version": version, "error": f"could not read the wheel: {exc}"}]
    if not members:
        return [{"dist": name, "version": version, "member": None, "note": f"{name} {version} ships no ptxas"}]
    out = []
    for member in members:
        row: dict[str, Any] = {"dist": name, "version": version, "member": member}
        folder = tmp / f"{name}-{version}-{len(os.listdir(tmp))}"
        folder.mkdir()
        binary = folder / Path(member).name
        try:
            binary.write_bytes(wheel.read(member))
        except RemoteError as exc:
            out.append({**row, "error": f"could not read {member}: {exc}"})
            continue
        binary.chmod(0o755)
        row["ptxas_version"] = ptxas_version(str(binary))
        if row["ptxas_version"] is None:
            out.append({**row, "error": f"{member} does not run here ({platform.machine()})"})
            continue
        row["kernels"] = _compile_all(str(binary), row["ptxas_version"], arch, folder)
        out.append(row)
    return out


def probe_ptx(changes: list[Any], arch: str, python: str | None = None) -> dict[str, Any]:
    """{"arch", "moved", "today", "after", "note"}: the PTX probes compiled by each ptxas the upgrade moves, as
    released before and after; or only a note when it moves none."""
    moved = [c for c in changes if ships_ptxas(c.name)]
    if not moved:
        return {"arch": arch, "moved": [], "note": (
            "PTX probes: the upgrade moves no ptxas (it changes no triton or nvidia-cuda-nvcc distribution), so they "
            "compile with the same ptxas as today and their answer is today's (sparkdoctor check)")}
    from sparkdoctor.released import Reader

    py = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    reader = Reader(host_platform(), py)
    out: dict[str, Any] = {"arch": arch, "moved": [c.to_dict() for c in moved], "today": [], "after": [],
                           "note": (f"PTX probes compiled here ({platform.machine()}) by the ptxas of each release's "
                                    f"{host_platform()} wheel, read without installing it; compiled only: no GB10 ran "
                                    "the result")}
    try:
        with tempfile.TemporaryDirectory(prefix="sparkdoctor-whatif-ptx-") as tmp:
            for c in moved:
                if c.old:
                    out["today"] += _one_release(reader, c.name, c.old, arch, Path(tmp))
                else:
                    out["today"].append({"dist": c.name, "version": None, "note": f"{c.name} is not installed today"})
                out["after"] += _one_release(reader, c.name, c.new, arch, Path(tmp))
    finally:
        reader.close()
    return out
