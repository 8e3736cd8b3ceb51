"""Verify entries: build (or reuse) each environment, run the entry's probe in it, and judge.

Verdict per entry: "confirmed" when every affected environment gives `expect` and no fixed one does;
"contradicted" otherwise (the runs are the evidence); "error" when an environment could not be built
or its probe could not run. Environments this run built are removed at the end unless keep=True.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sparkdoctor.exitcodes import EXIT_OK, EXIT_VERIFY_CONTRADICTED, EXIT_VERIFY_ERROR
from sparkdoctor.matrix.verify_table import Env
from sparkdoctor.verify import venvs
from sparkdoctor.verify.probes import run_probe
from sparkdoctor.verify.selection import Spec


@dataclass
class Run:
    role: str  # "affected" | "fixed"
    env: Env
    status: str = "error"
    detail: str = ""
    venv: str | None = None
    versions: dict[str, object] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
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

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "probe": self.probe, "expect": self.expect, "verdict": self.verdict, "why": self.why, "runs": [r.to_dict() for r in self.runs]}


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


class _Builds:
    """The environments of one verify run: each built once for every arch, fresh ones remembered."""

    def __init__(self, root: Path, log: Callable[[str], None] | None):
        self.root, self.log = root, log
        self.built: dict[Env, tuple[Path | None, str | None]] = {}
        self.fresh: list[Path] = []

    def python(self, env: Env) -> tuple[Path | None, str | None]:
        key = Env(env.steps, "")  # one venv serves every arch
        if key not in self.built:
            try:
                python, new = venvs.ensure_venv(self.root, env, self.log)
                self.built[key] = (python, None)
                if new:
                    self.fresh.append(python.parent.parent)
            except venvs.BuildError as exc:
                self.built[key] = (None, str(exc))
        return self.built[key]


def _probe_run(spec: Spec, role: str, env: Env, builds: _Builds) -> Run:
    run = Run(role, env)
    started = time.monotonic()
    python, error = builds.python(env)
    if python is None:
        run.detail = f"environment could not be built: {error}"
    else:
        run.venv = str(python.parent.parent)
        run.status, run.detail, run.versions = run_probe(spec.probe, python, env.arch)
    run.seconds = time.monotonic() - started
    return run


def verify(specs: list[Spec], root: Path | None = None, keep: bool = False, log: Callable[[str], None] | None = None) -> list[Result]:
    builds = _Builds(root or venvs.venv_root(), log)
    results = []
    try:
        for spec in specs:
            runs = [_probe_run(spec, role, env, builds) for role, envs in (("affected", spec.affected), ("fixed", spec.fixed)) for env in envs]
            verdict, why = judge(spec, runs)
            results.append(Result(spec.entry.id, spec.probe, spec.expect, verdict, why, runs))
            if log:
                log(f"{spec.entry.id}: {verdict}")
    finally:
        if not keep:
            for venv in builds.fresh:
                shutil.rmtree(venv, ignore_errors=True)
    return results


class Judged(Protocol):
    verdict: str


def exit_code(results: Sequence[Judged]) -> int:
    """Exit 1 when something is contradicted, else 2 when something could not be read or run, else 0."""
    if any(r.verdict == "contradicted" for r in results):
        return EXIT_VERIFY_CONTRADICTED
    if any(r.verdict == "error" for r in results):
        return EXIT_VERIFY_ERROR
    return EXIT_OK
