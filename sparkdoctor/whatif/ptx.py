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
from dataclasses import dataclass
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.kernels.assemble import (
    COMPILE_TIMEOUT,
    explain,
    ptxas_errors,
    run_ptxas,
)
from sparkdoctor.kernels.collector import compile_arch, selected_probes
from sparkdoctor.kernels.probes import load_probes
from sparkdoctor.kernels.tools import Tool
from sparkdoctor.released import Reader, RemoteError
from sparkdoctor.text import clip
from sparkdoctor.whatif.resolve import Change

VERSION_TIMEOUT = 30.0
_PTXAS_MEMBER = re.compile(r"(?:^|/)bin/ptxas(?:-[\w.]+)?$")
_RELEASE = re.compile(r"release (\d+\.\d+), V([\d.]+)|cuda_(\d+\.\d+)")


@dataclass(frozen=True)
class PtxKernel:
    """One PTX probe assembled by one ptxas."""

    probe: str
    arch: str
    verdict: str  # compiled | refused | could not run
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"probe": self.probe, "arch": self.arch, "verdict": self.verdict, "detail": self.detail}


@dataclass
class PtxRow:
    """One ptxas of one release of a distribution (or why there is none to run), with the PTX probes it compiled."""

    dist: str
    version: str | None
    member: str | None = None  # the ptxas's path in the wheel
    ptxas_version: str | None = None
    kernels: list[PtxKernel] | None = None
    error: str | None = None
    note: str | None = None
    listed: bool = False  # the wheel's members were read: `member` is said (None: the wheel ships no ptxas)
    ran: bool = False  # the ptxas was asked its version: `ptxas_version` is said (None: it does not run here)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"dist": self.dist, "version": self.version}
        if self.listed:
            out["member"] = self.member
        if self.ran:
            out["ptxas_version"] = self.ptxas_version
        if self.kernels is not None:
            out["kernels"] = [k.to_json() for k in self.kernels]
        if self.error is not None:
            out["error"] = self.error
        if self.note is not None:
            out["note"] = self.note
        return out


@dataclass
class PtxComparison:
    """`whatif --probe`, the PTX half: each ptxas the upgrade moves, as released today and after (today/after
    None: it moves none, said in the note)."""

    arch: str
    moved: list[dict[str, object]]  # the Changes (sparkdoctor.whatif.resolve.Change.to_dict) that move a ptxas
    note: str
    today: list[PtxRow] | None = None
    after: list[PtxRow] | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"arch": self.arch, "moved": self.moved}
        if self.today is not None or self.after is not None:
            out["today"] = [r.to_json() for r in self.today or []]
            out["after"] = [r.to_json() for r in self.after or []]
        out["note"] = self.note
        return out


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


def _compile_all(ptxas: str, version: str | None, arch: str, folder: Path) -> list[PtxKernel]:
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
        rows.append(PtxKernel(probe.id, target, verdict, clip(str(detail), 300)))
    return rows


def release_ptxas(reader: Reader, name: str, version: str, arch: str, tmp: Path) -> list[PtxRow]:
    """Each ptxas of one release of `name`, with the PTX probes compiled by it."""
    try:
        wheel = reader.release(name, version)
        members = [m for m in wheel.names if _PTXAS_MEMBER.search(m)]
    except RemoteError as exc:
        return [PtxRow(name, version, error=f"could not read the wheel: {exc}")]
    if not members:
        return [PtxRow(name, version, note=f"{name} {version} ships no ptxas", listed=True)]
    out = []
    for member in members:
        row = PtxRow(name, version, member, listed=True)
        folder = tmp / f"{name}-{version}-{len(os.listdir(tmp))}"
        folder.mkdir()
        binary = folder / Path(member).name
        try:
            binary.write_bytes(wheel.read(member))
        except RemoteError as exc:
            row.error = f"could not read {member}: {exc}"
            out.append(row)
            continue
        binary.chmod(0o755)
        row.ptxas_version, row.ran = ptxas_version(str(binary)), True
        if row.ptxas_version is None:
            row.error = f"{member} does not run here ({platform.machine()})"
            out.append(row)
            continue
        row.kernels = _compile_all(str(binary), row.ptxas_version, arch, folder)
        out.append(row)
    return out


def probe_ptx(changes: list[Change], arch: str, python: str | None = None) -> PtxComparison:
    """The PTX probes compiled by each ptxas the upgrade moves, as released before and after; or only a note when
    it moves none."""
    moved = [c for c in changes if ships_ptxas(c.name)]
    if not moved:
        return PtxComparison(arch, [], (
            "PTX probes: the upgrade moves no ptxas (it changes no triton or nvidia-cuda-nvcc distribution), so they "
            "compile with the same ptxas as today and their answer is today's (sparkdoctor check)"))

    py = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    reader = Reader(host_platform(), py)
    today: list[PtxRow] = []
    after: list[PtxRow] = []
    try:
        with tempfile.TemporaryDirectory(prefix="sparkdoctor-whatif-ptx-") as tmp:
            for c in moved:
                if c.old:
                    today += release_ptxas(reader, c.name, c.old, arch, Path(tmp))
                else:
                    today.append(PtxRow(c.name, None, note=f"{c.name} is not installed today"))
                after += release_ptxas(reader, c.name, c.new, arch, Path(tmp))
    finally:
        reader.close()
    return PtxComparison(arch, [c.to_dict() for c in moved],
                         (f"PTX probes compiled here ({platform.machine()}) by the ptxas of each release's "
                          f"{host_platform()} wheel, read without installing it; compiled only: no GB10 ran the result"),
                         today, after)
