"""`whatif --probe`: compile the CuTe DSL probes with the proposed cutlass-dsl set before it is installed.

A throwaway venv (uv, in a temp folder, removed after) gets the cutlass-dsl distributions of the Facts
(today's or the predicted ones) laid out as pip leaves them (layout_steps). Then probes/cutedsl/ compiles its
kernels for the arch in that venv: no GPU needed (the DSL takes the arch from the command line).

Per kernel: compiled (ok), refused (the DSL rejected the arch, or ptxas rejected its code), could not run
(crash, error, timeout, an install that failed). The PTX probes (probes/kernels/) are whatif/ptx.py's: they
compile with a ptxas (CUDA toolkit, triton), which a cutlass-dsl change does not move."""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.facts import Facts
from sparkdoctor.inputs import NUMBER_TOO_LONG, json_lines
from sparkdoctor.locations import data_dir
from sparkdoctor.targets import early
from sparkdoctor.text import clip

INSTALL_TIMEOUT = 900.0
# uv trusts its bundled roots only; pip (truststore) trusts the system store: so do these installs (a TLS proxy the box trusts)
UV_TRUST = {"UV_SYSTEM_CERTS": "1", "UV_NATIVE_TLS": "1"}  # the name in newer uv, and in older (the user's own win)
PROBE_TIMEOUT = 600.0
VERDICT = {"ok": "compiled", "refused": "refused", "fail": "refused"}
LIBS = {"libs-cu13": "nvidia-cutlass-dsl-libs-cu13", "libs-base": "nvidia-cutlass-dsl-libs-base", "libs-cu12": "nvidia-cutlass-dsl-libs-cu12"}
PTX_NOTE = "the cutlass-dsl set moves no ptxas: the PTX probes are judged apart (probe.ptx)"


@dataclass(frozen=True)
class KernelVerdict:
    kernel: str
    verdict: str  # compiled | refused | could not run
    status: object  # the probe's own word (ok, refused, fail, ...)
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"kernel": self.kernel, "verdict": self.verdict, "status": self.status, "detail": self.detail}


@dataclass
class ProbeRun:
    """The CuTe DSL probes compiled with one cutlass-dsl set."""

    arch: str
    dists: dict[str, str]
    active_build: str | None
    kernels: list[KernelVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # could not run at all, and why

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"arch": self.arch, "dists": self.dists, "active_build": self.active_build,
                                  "kernels": [k.to_json() for k in self.kernels], "notes": self.notes}
        if self.error is not None:
            out["error"] = self.error
        return out


def uv_binary() -> str | None:
    try:
        from uv import find_uv_bin  # the optional uv wheel: absent on most installs

        return str(find_uv_bin())
    except Exception:  # noqa: BLE001 - uv as a wheel is optional; a uv on PATH does as well
        return shutil.which("uv")


def cutedsl_set(facts: Facts) -> tuple[dict[str, str], str | None]:
    """The cutlass-dsl distributions of the Facts and the libs build that is (or would be) active."""
    dists = {n: str(r.get("version")) for n, r in (facts.packages or {}).items() if n.startswith("nvidia-cutlass-dsl") and r.get("version")}
    return dists, (facts.cutedsl or {}).get("active_build")


def layout_steps(uv: str, py: str, dists: dict[str, str], last: str | None) -> list[list[str]]:
    """The installer calls that leave the files of `dists` as pip leaves them, even for a family at different
    versions (which no resolver accepts): the umbrella with its dependencies (the third-party ones the DSL
    imports), every member it brought that is not in the set removed, then each member of the set by itself with
    --no-deps, the active libs wheel (`last`) written last: the shared paths and the .pth files hold its bytes."""
    install = [uv, "pip", "install", "-q", "--only-binary", ":all:", "--python", py]  # wheels only: a build runs code
    base = "nvidia-cutlass-dsl" if "nvidia-cutlass-dsl" in dists else sorted(dists)[0]
    steps = [[*install, "--", f"{base}=={dists[base]}"]]
    steps.append([uv, "pip", "uninstall", "-q", "--python", py, "--", *LIBS.values(), "nvidia-cutlass-dsl-libs-core", "nvidia-cutlass-dsl"])
    for name in sorted(dists, key=lambda n: (n == last, n)):
        steps.append([*install, "--no-deps", "--reinstall-package", name, "--", f"{name}=={dists[name]}"])
    return steps


def probe_cutedsl(facts: Any, arch: str, python: str = sys.executable) -> ProbeRun:
    """The verdict per kernel (compiled, refused, could not run), or why nothing ran."""
    dists, active = cutedsl_set(facts)
    out = ProbeRun(arch, dists, active, notes=[PTX_NOTE])
    if not dists:
        out.notes.append("no nvidia-cutlass-dsl distribution in the set: nothing to compile")
        return out
    uv = uv_binary()
    if uv is None:
        out.error = "could not run: uv is not installed (pip install uv)"
        return out

    with tempfile.TemporaryDirectory(prefix="sparkdoctor-whatif-probe-") as tmp:
        venv = Path(tmp) / "venv"
        py = str(venv / "bin" / "python")
        for argv in [[uv, "venv", "-q", "--python", python, str(venv)], *layout_steps(uv, py, dists, LIBS.get(active or ""))]:
            done = proc.run(argv, timeout=INSTALL_TIMEOUT, env={**UV_TRUST, **early.third_party_env(*early.INSTALLER)})
            if not done.ok:
                why = clip((done.stderr or "").strip(), 300, tail=True)
                out.error = f"could not run: {' '.join(argv[1:4])} failed: {done.describe_failure()}: {why}"
                return out
        done = proc.run([py, "-B", str(data_dir("probes") / "cutedsl" / "__main__.py"), "--arch", arch], timeout=PROBE_TIMEOUT, env=early.third_party_env())
        rows, too_long = json_lines((done.stdout or "").splitlines())
        for row in rows:
            if isinstance(row, dict) and "kernel" in row:
                out.kernels.append(KernelVerdict(str(row["kernel"]), VERDICT.get(str(row.get("status")), "could not run"),
                                                 row.get("status"), clip(str(row.get("detail") or ""), 300)))
        if not out.kernels and too_long:
            out.error = f"could not run: the CuTe DSL probe's answer {NUMBER_TOO_LONG}"
        elif not out.kernels:
            out.error = f"could not run: the CuTe DSL probe printed no result: {done.describe_failure()}"
    return out
