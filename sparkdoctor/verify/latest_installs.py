"""`matrix verify --latest` for install checks: each fixed environment of an entry's verify table built again at the
newest releases of what it pins, and the entry's probe run there."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from packaging.requirements import Requirement

from sparkdoctor.matrix.verify_table import Env
from sparkdoctor.verify.files import Log
from sparkdoctor.verify.runner import Run, _Builds, _probe_run
from sparkdoctor.verify.venvs import venv_root
from sparkdoctor.verify.wheels import WheelError, released_versions


def bump_pins(steps: tuple[tuple[str, ...], ...], newest: Callable[[str], str]) -> tuple[tuple[str, ...], ...]:
    """The same pip steps with every `name==version` (extras kept) moved to `newest(name)`."""
    out = []
    for step in steps:
        args = []
        for arg in step:
            if arg.startswith("-"):
                args.append(arg)
                continue
            req = Requirement(arg)
            pinned = [s for s in req.specifier if s.operator == "=="]
            if pinned:
                extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
                arg = f"{req.name}{extras}=={newest(req.name)}"
            args.append(arg)
        out.append(tuple(args))
    return tuple(out)


def latest_installs(spec, log: Log | None = None) -> dict[str, object]:
    """Build each fixed environment of an entry's verify table at the newest releases of what it
    pins and run the entry's probe there: giving the entry's `expect` again is a regression."""
    try:
        envs = [Env(bump_pins(env.steps, lambda name: released_versions(name)[-1]), env.arch) for env in spec.fixed]
    except (WheelError, IndexError) as exc:
        return {"id": spec.entry.id, "verdict": "error", "why": str(exc) or "no released version"}
    if not envs:
        return {"id": spec.entry.id, "verdict": "error", "why": "the verify table has no fixed environment to move forward"}

    builds = _Builds(venv_root(), log)
    try:
        runs: list[Run] = [_probe_run(spec, "fixed", env, builds) for env in envs]
    finally:
        for venv in builds.fresh:  # built only to look at the newest releases
            shutil.rmtree(venv, ignore_errors=True)
    labels = "; ".join(r.env.label for r in runs)
    if any(r.status == "error" and spec.expect != "error" for r in runs):
        bad = next(r for r in runs if r.status == "error")
        return {"id": spec.entry.id, "verdict": "error", "why": f"[{bad.env.label}]: {bad.detail}"}
    again = [r for r in runs if r.status == spec.expect]
    if again:
        return {"id": spec.entry.id, "verdict": "regression",
                "why": f"the newest releases give {spec.expect} again: [{again[0].env.label}]: {again[0].detail}"}
    return {"id": spec.entry.id, "verdict": "holds", "why": f"the newest releases stay fixed ({labels}): {runs[0].status}"}
