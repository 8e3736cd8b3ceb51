"""`sparkdoctor fix`: the plan (dry run by default), --yes to apply, --rollback [JOURNAL], --history.

Parses and renders only; the pipeline (sparkdoctor/fix/) loads inside the command, so `check`
never pays for it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.exitcodes import EXIT_FIX_FAILED, EXIT_FIX_REFUSED, EXIT_UNPROBEABLE, EXIT_USAGE


def _progress(message: str) -> None:
    sys.stderr.write(f"sparkdoctor fix: {message} ...\n")
    sys.stderr.flush()


def register(app: typer.Typer) -> None:
    @app.command("fix")
    def fix(
        journal: Optional[str] = typer.Argument(None, help="With --rollback: the journal id (default: the newest)."),
        python: Optional[str] = typer.Option(None, "--python", help="The target interpreter or venv (default: $VIRTUAL_ENV, else this Python)."),
        yes: bool = typer.Option(False, "--yes", help="Apply the plan (journal first), then check again."),
        rollback: bool = typer.Option(False, "--rollback", help="Restore what a journal recorded, byte for byte, offline."),
        history: bool = typer.Option(False, "--history", help="List fix journals, newest first."),
        fmt: str = typer.Option("console", "--format", help="console or json."),
        env_file: Optional[Path] = typer.Option(None, "--env-file", help="The env file the server reads (KEY=VALUE): checked with it, env fixes edit it."),
        recipe: Optional[Path] = typer.Option(None, "--recipe", help="The serving recipe (recipes/*.toml) flag fixes edit."),
        constraints: List[Path] = typer.Option([], "--constraints", help="Extra constraints/requirements files to read (as check)."),
        system: bool = typer.Option(False, "--system", help="Allow changing a system interpreter (not a venv)."),
        allow_replace: List[str] = typer.Option([], "--allow-replace", help="Allow replacing this non-registry dist (repeatable)."),
        allow_downgrade: List[str] = typer.Option([], "--allow-downgrade", help="Allow downgrading this pinned package (repeatable)."),
        kernels: bool = typer.Option(True, "--kernels/--no-kernels", help="Run the kernel compile probes in the checks."),
        arch: Optional[str] = typer.Option(None, "--arch", help="Evaluate as this GPU arch (as check)."),
        matrix: Optional[Path] = typer.Option(None, "--matrix", help="A matrix folder or file instead of the bundled one."),
        fixes: Optional[Path] = typer.Option(None, "--fixes", help="A fixes folder instead of the bundled one."),
    ) -> None:
        """Turn check's findings into a plan; --yes applies it with a journal; --rollback undoes it."""
        from sparkdoctor.fix import render
        from sparkdoctor.fix.interface import FixError
        from sparkdoctor.matrix import MatrixError

        if fmt not in ("console", "json"):
            raise Fatal(f"--format {fmt}: use console or json", EXIT_USAGE)
        if sum((yes, rollback, history)) > 1:
            raise Fatal("--yes, --rollback and --history do not go together", EXIT_USAGE)
        if journal and not rollback:
            raise Fatal(f"unexpected argument {journal!r} (a journal id goes with --rollback)", EXIT_USAGE)
        out = lambda text: typer.echo(text)  # noqa: E731
        try:
            if history:
                from sparkdoctor.fix.pipeline import history as list_history

                rows = list_history()
                out(render.as_json("history", rows) if fmt == "json" else "\n".join(render.history_lines(rows)))
                return
            if rollback:
                _rollback(journal, fmt, out)
                return
            _plan_or_apply(python, yes, fmt, out, env_file, recipe, constraints, system, allow_replace, allow_downgrade,
                           kernels, arch, matrix, fixes)
        except FixError as exc:
            raise Fatal(str(exc), EXIT_FIX_FAILED) from None
        except MatrixError as exc:
            raise Fatal(str(exc), EXIT_USAGE) from None


def _target(python: Optional[str], env_file: Optional[Path]):
    from sparkdoctor.target import TargetError, resolve_python_target

    try:
        target = resolve_python_target(python)
    except TargetError as exc:
        raise Fatal(str(exc), EXIT_UNPROBEABLE) from None
    if env_file is not None:
        from sparkdoctor.fix.envfile import EnvFileTarget

        return EnvFileTarget(target, env_file)
    return target


def _rollback(journal, fmt, out) -> None:
    from sparkdoctor.fix import render
    from sparkdoctor.fix.pipeline import rollback

    result = rollback(lambda py: _target(py, None), journal)
    out(render.as_json("rollback", result) if fmt == "json" else "\n".join(render.rollback_lines(result)))
    verified = result.get("verified") or {}
    if result["status"] == "rolled back" and not verified.get("ok"):
        raise typer.Exit(EXIT_FIX_FAILED)


def _plan_or_apply(python, yes, fmt, out, env_file, recipe, constraints, system, allow_replace, allow_downgrade,
                   kernels, arch, matrix, fixes) -> None:
    from sparkdoctor.fix import render
    from sparkdoctor.fix.pipeline import CheckSettings, apply_and_recheck, make_plan
    from sparkdoctor.fix.plan import FixOptions

    target = _target(python, env_file.absolute() if env_file else None)
    settings = CheckSettings(matrix=matrix, fixes=fixes, arch=arch, constraint_files=list(constraints), kernels=kernels, progress=_progress)
    options = FixOptions(env_file=env_file.absolute() if env_file else None, recipe=recipe.absolute() if recipe else None, system=system, allow_replace=set(allow_replace), allow_downgrade=set(allow_downgrade))
    planned = make_plan(target, settings, options)
    if not planned.report.probed():
        raise Fatal("the target's packages could not be read; nothing to plan", EXIT_UNPROBEABLE)
    if not yes or planned.plan.empty:
        out(render.plan_json(planned.plan, planned.report) if fmt == "json" else "\n".join(
            render.plan_lines(planned.plan) + ([] if planned.plan.empty else ["Dry run: nothing was changed. Apply with --yes."])))
        raise typer.Exit(planned.report.exit_code())
    if planned.plan.refusals:
        if fmt == "json":
            out(render.plan_json(planned.plan, planned.report))
        raise Fatal(planned.plan.refusals[0], EXIT_FIX_REFUSED)
    result = apply_and_recheck(target, planned, settings)
    out(render.applied_json(result) if fmt == "json" else "\n".join(render.plan_lines(planned.plan) + render.applied_lines(result)))
    if result["error"]:
        raise typer.Exit(EXIT_FIX_FAILED)
    raise typer.Exit(result["report_after"].exit_code())
