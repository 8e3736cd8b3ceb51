"""`sparkdoctor matrix verify`: prove matrix entries against real package versions.

An entry that a probe can check names the probe and what it gives on an affected install, and lists
the installs to try in a `verify` table:

    verified_by = { probe = "cutedsl-nvfp4-mma", expect = "fail" }
    verify.arch = "sm_121a"                                   # what the probe compiles for (default sm_121a)
    verify.affected = [["nvidia-cutlass-dsl==4.5.0"]]
    verify.fixed = [["nvidia-cutlass-dsl[cu13]==4.5.0"], ["nvidia-cutlass-dsl==4.5.1"]]

Each item of `affected` / `fixed` is one scratch environment, written as the list of `pip install`
steps that build it, run in order. A step is one requirement ("nvidia-cutlass-dsl==4.5.0") or a
line of pip install arguments ("--force-reinstall --no-deps nvidia-cutlass-dsl-libs-base==4.5.0");
only the options in ALLOWED_OPTIONS pass (no index URLs, no files, no shell). An item may instead be
a table { steps = [...], arch = "sm_121" } to compile that environment's probe for another arch.

Probes: `cutedsl-*` ids run probes/cutedsl_probe.py with the environment's python; any other id
is a PTX probe of probes/kernels/ (sparkdoctor.kernels), assembled with the ptxas that the
environment's pip packages bring (nvidia-cuda-nvcc, nvidia-cuda-nvcc-cu12).

Verdict per entry: "confirmed" when every affected environment gives `expect` and no fixed one does;
"contradicted" otherwise (the runs are the evidence); "error" when an environment could not be built
or its probe could not run. Exit code: 1 if any entry is contradicted, else 2 if any errored, else 0.

Environments live under <cache>/verify-venvs (or $SPARKDOCTOR_VERIFY_VENVS), one per step list and
Python version, built with real pip (its wheel cache makes a rebuild cheap). Ones this run built are
removed at the end unless --keep; kept ones are reused as they are.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from packaging.requirements import InvalidRequirement, Requirement

from sparkdoctor import proc
from sparkdoctor.matrix import Entry, Matrix

from sparkdoctor.arch import DEFAULT_ARCH  # noqa: E402  (the target every entry is about)
ALLOWED_OPTIONS = frozenset({"--force-reinstall", "--no-deps", "--pre", "--upgrade", "-U", "--only-binary=:all:", "--no-binary=:all:", "--ignore-installed"})
PIP_TIMEOUT = 1800.0
VENV_TIMEOUT = 300.0
PROBE_TIMEOUT = 90.0
READY = ".sparkdoctor-ready"
EXIT_OK, EXIT_CONTRADICTED, EXIT_ERROR = 0, 1, 2
_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")


class VerifyError(ValueError):
    """A `verify` table that cannot be used; the message names the file, entry and field."""


@dataclass(frozen=True)
class Env:
    """One scratch environment to build: pip install steps, each an argument list."""

    steps: tuple[tuple[str, ...], ...]
    arch: str

    @property
    def label(self) -> str:
        return " ; ".join(" ".join(s) for s in self.steps)


@dataclass
class Spec:
    entry: Entry
    probe: str
    expect: str
    affected: list[Env]
    fixed: list[Env]


@dataclass
class Run:
    role: str  # "affected" | "fixed"
    env: Env
    status: str = "error"
    detail: str = ""
    venv: str | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role, "steps": [" ".join(s) for s in self.env.steps], "arch": self.env.arch,
            "status": self.status, "detail": self.detail, "venv": self.venv, "versions": self.versions,
            "seconds": round(self.seconds, 1),
        }


@dataclass
class Result:
    id: str
    probe: str
    expect: str
    verdict: str  # confirmed | contradicted | error
    why: str
    runs: list[Run]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "probe": self.probe, "expect": self.expect, "verdict": self.verdict, "why": self.why, "runs": [r.to_dict() for r in self.runs]}


# ---- the verify table -----------------------------------------------------------------------------


def parse_spec(entry: Entry) -> Spec:
    label = f"{entry.file}: entry {entry.id}"
    vb = entry.verified_by or {}
    if not entry.verify:
        raise VerifyError(f"{label}: field 'verify' is missing (nothing says which installs to try)")
    if not vb.get("probe") or not vb.get("expect"):
        raise VerifyError(f"{label}: field 'verified_by' needs probe and expect for verify")
    table = entry.verify
    unknown = set(table) - {"arch", "affected", "fixed"}
    if unknown:
        raise VerifyError(f"{label}: field 'verify' has unknown key(s): {', '.join(sorted(unknown))}")
    arch = table.get("arch", DEFAULT_ARCH)
    if not isinstance(arch, str) or not _ARCH.match(arch):
        raise VerifyError(f"{label}: field 'verify.arch' must be an arch like sm_121a")
    affected = _envs(table.get("affected"), arch, f"{label}: field 'verify.affected'")
    if not affected:
        raise VerifyError(f"{label}: field 'verify.affected' needs at least one environment")
    fixed = _envs(table.get("fixed", []), arch, f"{label}: field 'verify.fixed'")
    return Spec(entry, vb["probe"], vb["expect"], affected, fixed)


def known_probes() -> set[str]:
    """Every probe id an entry may name: the PTX probes in probes/kernels/ and the CuTe DSL ones."""
    from sparkdoctor.collect.cutedsl import KERNELS
    from sparkdoctor.kernels import load_probes

    return {p.id for p in load_probes()} | set(KERNELS)


def check_entry(entry: Entry, probes: set[str]) -> None:
    """What `matrix validate` adds to the schema: probes that exist and verify tables that parse."""
    vb = entry.verified_by
    if vb and vb["probe"] not in probes:
        raise VerifyError(
            f"{entry.file}: entry {entry.id}: field 'verified_by.probe' names {vb['probe']!r}, which is no probe "
            f"(known: {', '.join(sorted(probes))})"
        )
    if entry.verify:
        parse_spec(entry)


def _envs(value: Any, arch: str, label: str) -> list[Env]:
    if not isinstance(value, list):
        raise VerifyError(f"{label} must be a list of environments (each a list of pip install steps)")
    out = []
    for i, item in enumerate(value):
        where = f"{label}[{i}]"
        env_arch = arch
        if isinstance(item, dict):
            extra = set(item) - {"steps", "arch"}
            if extra:
                raise VerifyError(f"{where} has unknown key(s): {', '.join(sorted(extra))}")
            env_arch = item.get("arch", arch)
            if not isinstance(env_arch, str) or not _ARCH.match(env_arch):
                raise VerifyError(f"{where}.arch must be an arch like sm_121")
            item = item.get("steps")
        if not isinstance(item, list) or not item or not all(isinstance(s, str) and s.strip() for s in item):
            raise VerifyError(f"{where} must be a non-empty list of pip install steps (strings)")
        out.append(Env(tuple(_step(s, where) for s in item), env_arch))
    return out


def _step(text: str, where: str) -> tuple[str, ...]:
    try:
        args = shlex.split(text)
    except ValueError as exc:
        raise VerifyError(f"{where}: step {text!r} cannot be split: {exc}") from None
    reqs = 0
    for arg in args:
        if arg.startswith("-"):
            if arg not in ALLOWED_OPTIONS:
                raise VerifyError(f"{where}: step {text!r} uses {arg}; allowed pip options: {', '.join(sorted(ALLOWED_OPTIONS))}")
            continue
        try:
            req = Requirement(arg)
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "unparsable"
            raise VerifyError(f"{where}: step {text!r}: {arg!r} is not a requirement ({reason})") from None
        if req.url:
            raise VerifyError(f"{where}: step {text!r}: URL requirements are not allowed")
        reqs += 1
    if not reqs:
        raise VerifyError(f"{where}: step {text!r} installs nothing")
    return tuple(args)


def select(matrix: Matrix, entry_id: str | None) -> list[Spec]:
    if entry_id is not None:
        entry = matrix.get(entry_id)
        if entry is None:
            raise VerifyError(f"no matrix entry with id {entry_id!r}")
        return [parse_spec(entry)]
    return [parse_spec(e) for e in matrix.entries if e.verify and e.verified_by and not e.withdrawn]


# ---- scratch environments -------------------------------------------------------------------------


def venv_root() -> Path:
    override = os.environ.get("SPARKDOCTOR_VERIFY_VENVS")
    if override:
        return Path(override)
    from sparkdoctor.locations import cache_dir

    return cache_dir() / "verify-venvs"


def venv_path(root: Path, env: Env) -> Path:
    key = json.dumps([list(s) for s in env.steps] + [sys.version_info[:2]], sort_keys=True)
    return root / f"env-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


class BuildError(RuntimeError):
    pass


def ensure_venv(root: Path, env: Env, log: Callable[[str], None] | None = None) -> tuple[Path, bool]:
    """The python of a ready environment for `env`, building it if needed; (python, built now)."""
    venv = venv_path(root, env)
    python = venv / "bin" / "python"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two verify runs must not build one venv at once
        if (venv / READY).is_file() and python.exists():
            return python, False
        shutil.rmtree(venv, ignore_errors=True)
        if log:
            log(f"building {venv.name}: {env.label}")
        # With our own pip the venv needs none of its own (saves seconds per venv); else it brings one.
        made = proc.run([sys.executable, "-m", "venv", *(["--without-pip"] if _own_pip() else []), str(venv)], timeout=VENV_TIMEOUT)
        if not made.ok:
            raise BuildError(f"python -m venv failed: {made.describe_failure()}")
        for step in env.steps:
            result = proc.run(_pip_install(python, step), timeout=PIP_TIMEOUT)
            if not result.ok:
                shutil.rmtree(venv, ignore_errors=True)
                raise BuildError(f"pip install {' '.join(step)} failed: {_pip_error(result)}")
        (venv / READY).write_text(json.dumps([list(s) for s in env.steps]) + "\n", encoding="utf-8")
        return python, True


_OWN_PIP: list[bool] = []


def _own_pip() -> bool:
    """Can sparkdoctor's own pip install into another environment (pip >= 22.3 has --python)?"""
    if not _OWN_PIP:
        found = proc.run([sys.executable, "-m", "pip", "--version"], timeout=60)
        version = re.match(r"pip (\d+)\.(\d+)", found.stdout or "")
        _OWN_PIP.append(bool(found.ok and version and (int(version.group(1)), int(version.group(2))) >= (22, 3)))
    return _OWN_PIP[0]


def _pip_install(python: Path, step: tuple[str, ...]) -> list[str]:
    # sparkdoctor's own pip installs into the scratch venv (pip --python): no pip bootstrap per venv.
    pip = [sys.executable, "-m", "pip", "--python", str(python)] if _own_pip() else [str(python), "-m", "pip"]
    return [*pip, "--disable-pip-version-check", "--no-input", "-q", "install", *step]


def _pip_error(result: proc.ProcResult) -> str:
    if result.timed_out or result.start_error or result.signal:
        return result.describe_failure()
    lines = [x.strip() for x in (result.stderr or result.stdout).splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1][:400]


# ---- probes -----------------------------------------------------------------------------------------


def run_probe(probe_id: str, python: Path, arch: str) -> tuple[str, str, dict[str, Any]]:
    """(status, detail, versions) of one probe in one environment."""
    from sparkdoctor.collect import cutedsl

    if probe_id in cutedsl.KERNELS:
        return _run_cutedsl(cutedsl, cutedsl.KERNELS[probe_id], python, arch)
    from sparkdoctor import kernels

    probe = next((p for p in kernels.load_probes() if p.id == probe_id), None)
    if probe is None:
        known = sorted([*cutedsl.KERNELS, *(p.id for p in kernels.load_probes())])
        return "error", f"unknown probe {probe_id!r} (known: {', '.join(known)})", {}
    return _run_ptx(kernels, probe, python, arch)


def _clean_env() -> dict[str, str]:
    # The user's CuTe DSL / Python settings must not leak into a scratch environment's probe.
    return {k: v for k, v in os.environ.items() if not k.startswith(("CUTE_DSL_", "PYTHON", "VIRTUAL_ENV", "PIP_"))}


def _run_cutedsl(cutedsl, kernel: str, python: Path, arch: str) -> tuple[str, str, dict[str, Any]]:
    result = proc.run([str(python), "-B", str(cutedsl.probe_script()), "--arch", arch, "--kernel", kernel], timeout=PROBE_TIMEOUT, env=_clean_env())
    raw = cutedsl.interpret(kernel, arch, result)
    versions = dict(raw.get("dists") or {})
    if raw.get("bundled_cuda"):
        versions["bundled CUDA"] = raw["bundled_cuda"]
    return raw.get("status", "error"), raw.get("detail", ""), versions


def find_ptxas(python: Path) -> Path | None:
    """The ptxas an nvidia-cuda-nvcc(-cu12) wheel put into this environment."""
    venv = python.parent.parent
    found = sorted(venv.glob("lib/python*/site-packages/nvidia/*/bin/ptxas"))
    return found[0] if found else None


def _run_ptx(kernels, probe, python: Path, arch: str) -> tuple[str, str, dict[str, Any]]:
    ptxas = find_ptxas(python)
    if ptxas is None:
        return "error", "no ptxas in this environment (install nvidia-cuda-nvcc or nvidia-cuda-nvcc-cu12)", {}
    version_run = proc.run([str(ptxas), "--version"], timeout=20)
    found = re.search(r"V(\d+\.\d+\.\d+)", version_run.stdout or "")
    version = found.group(1) if found else None
    tool = kernels.Tool(str(ptxas), version, "pip", f"{ptxas}|{version}")
    job = kernels.Job(probe, tool, arch, "target")
    job.record = kernels.new_record(job)
    with tempfile.TemporaryDirectory(prefix="sparkdoctor-verify-") as work:
        kernels.compile_job(job, Path(work), set(), threading.Lock())
    rec = job.record
    versions = {"ptxas": version}
    if rec["outcome"] == "compiled":
        return "ok", f"ptxas {version} compiled {probe.id} for {arch}", versions
    if rec["outcome"] == "rejected":
        why = f" ({rec['explanation']})" if rec.get("explanation") else ""
        return "fail", f"ptxas {version} rejected {probe.id} for {arch}: {rec['error']}{why}", versions
    return "error", f"ptxas {version}: {rec.get('error') or rec['outcome']}", versions


# ---- verifying --------------------------------------------------------------------------------------


def judge(spec: Spec, runs: list[Run]) -> tuple[str, str]:
    errors = [r for r in runs if r.status == "error" and spec.expect != "error"]
    if errors:
        return "error", f"{len(errors)} environment(s) could not be built or probed: {errors[0].detail}"
    bad_affected = [r for r in runs if r.role == "affected" and r.status != spec.expect]
    bad_fixed = [r for r in runs if r.role == "fixed" and r.status == spec.expect]
    if not bad_affected and not bad_fixed:
        return "confirmed", f"every affected environment gave {spec.expect}, no fixed one did"
    parts = [f"affected [{r.env.label}] gave {r.status}, not {spec.expect}: {r.detail}" for r in bad_affected]
    parts += [f"fixed [{r.env.label}] still gave {spec.expect}: {r.detail}" for r in bad_fixed]
    return "contradicted", "; ".join(parts)


def verify(specs: list[Spec], root: Path | None = None, keep: bool = False, log: Callable[[str], None] | None = None) -> list[Result]:
    root = root or venv_root()
    built: dict[Env, tuple[Path | None, str | None]] = {}
    fresh: list[Path] = []
    results = []
    try:
        for spec in specs:
            runs = []
            for role, envs in (("affected", spec.affected), ("fixed", spec.fixed)):
                for env in envs:
                    runs.append(_one(spec, role, env, root, built, fresh, log))
            verdict, why = judge(spec, runs)
            results.append(Result(spec.entry.id, spec.probe, spec.expect, verdict, why, runs))
            if log:
                log(f"{spec.entry.id}: {verdict}")
    finally:
        if not keep:
            for venv in fresh:
                shutil.rmtree(venv, ignore_errors=True)
    return results


def _one(spec: Spec, role: str, env: Env, root: Path, built: dict, fresh: list[Path], log) -> Run:
    run = Run(role, env)
    started = time.monotonic()
    key = Env(env.steps, "")  # one venv serves every arch
    if key not in built:
        try:
            python, new = ensure_venv(root, env, log)
            built[key] = (python, None)
            if new:
                fresh.append(python.parent.parent)
        except BuildError as exc:
            built[key] = (None, str(exc))
    python, error = built[key]
    if python is None:
        run.detail = f"environment could not be built: {error}"
    else:
        run.venv = str(python.parent.parent)
        run.status, run.detail, run.versions = run_probe(spec.probe, python, env.arch)
    run.seconds = time.monotonic() - started
    return run


def exit_code(results: list[Result]) -> int:
    if any(r.verdict == "contradicted" for r in results):
        return EXIT_CONTRADICTED
    if any(r.verdict == "error" for r in results):
        return EXIT_ERROR
    return EXIT_OK


# ---- output -----------------------------------------------------------------------------------------


def to_json(results: list[Result], seconds: float) -> str:
    summary = {v: sum(1 for r in results if r.verdict == v) for v in ("confirmed", "contradicted", "error")}
    return json.dumps({"schema": 1, "results": [r.to_dict() for r in results], "summary": summary, "seconds": round(seconds, 1)}, indent=2)


def render_console(results: list[Result], console, seconds: float) -> None:
    from rich.markup import escape

    style = {"confirmed": "green", "contradicted": "bold red", "error": "yellow"}
    for r in results:
        console.print(f"[{style[r.verdict]}]{r.verdict.upper():<12}[/] [bold]{escape(r.id)}[/]  probe {escape(r.probe)} expects {escape(r.expect)}", soft_wrap=True)
        for run in r.runs:
            mark = "ok " if (run.status == r.expect) == (run.role == "affected") else "!! "
            console.print(f"    {mark}{run.role:<8} {escape(run.env.label)} @ {run.env.arch}: {run.status} ({run.seconds:.1f}s)", soft_wrap=True)
            console.print(f"             {escape(run.detail)}", soft_wrap=True)
        if r.verdict != "confirmed":
            console.print(f"    {escape(r.why)}", soft_wrap=True)
    counts = ", ".join(f"{sum(1 for r in results if r.verdict == v)} {v}" for v in ("confirmed", "contradicted", "error"))
    console.print(f"{len(results)} entr{'y' if len(results) == 1 else 'ies'} verified in {seconds:.0f}s: {counts}")
