"""`sparkdoctor fix`: the plan (dry run by default), --yes to apply, --rollback [JOURNAL], --history.

Parses and renders only; the pipeline (sparkdoctor/fix/) loads inside the command, so `check`
never pays for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.commands.options import format_option
from sparkdoctor.exitcodes import (
    EXIT_FIX_FAILED,
    EXIT_FIX_REFUSED,
    EXIT_UNPROBEABLE,
    EXIT_USAGE,
)
from sparkdoctor.result import Format


def _progress(message: str) -> None:
    sys.stderr.write(f"sparkdoctor fix: {message} ...\n")
    sys.stderr.flush()


def register(app: typer.Typer) -> None:
    @app.command("fix")
    def fix(
        journal: str | None = typer.Argument(None, help="With --rollback: the journal id (default: the newest)."),
        python: str | None = typer.Option(None, "--python", help="The target interpreter or venv (default: $VIRTUAL_ENV, else this Python)."),
        container: str | None = typer.Option(None, "--container", help="Fix inside this running container (docker/podman), through the container CLI."),
        container_python: str | None = typer.Option(None, "--container-python", help="The interpreter inside the container (default: the one holding vLLM)."),
        runtime: str | None = typer.Option(None, "--runtime", help="Container CLI for --container: docker or podman (default: $SPARKDOCTOR_CONTAINER_RUNTIME, else docker, else podman)."),
        yes: bool = typer.Option(False, "--yes", help="Apply the plan (journal first), then check again."),
        rollback: bool = typer.Option(False, "--rollback", help="Restore what a journal recorded, byte for byte, offline."),
        history: bool = typer.Option(False, "--history", help="List fix journals, newest first, with their size."),
        prune: bool = typer.Option(False, "--prune", help="Remove old journals (with --keep N and/or --older-than AGE); never one whose apply or rollback did not finish."),
        keep: int | None = typer.Option(None, "--keep", help="With --prune: keep the newest N journals."),
        older_than: str | None = typer.Option(None, "--older-than", help="With --prune: remove journals older than AGE (e.g. 30d, 12h, 90m)."),
        fmt: str = format_option(Format.console, Format.json),
        env_file: Path | None = typer.Option(None, "--env-file", help="The env file the server reads (KEY=VALUE): checked with it, env fixes edit it."),
        recipe: Path | None = typer.Option(None, "--recipe", help="The serving recipe (recipes/*.toml) flag fixes edit."),
        constraints: list[Path] = typer.Option([], "--constraints", help="Extra constraints/requirements files to read (as check)."),
        system: bool = typer.Option(False, "--system", help="Allow changing a system interpreter (not a venv)."),
        allow_replace: list[str] = typer.Option([], "--allow-replace", help="Allow replacing this non-registry dist (repeatable)."),
        allow_downgrade: list[str] = typer.Option([], "--allow-downgrade", help="Allow downgrading this pinned package (repeatable)."),
        kernels: bool = typer.Option(True, "--kernels/--no-kernels", help="Run the kernel compile probes in the checks."),
        arch: str | None = typer.Option(None, "--arch", help="Evaluate as this GPU arch (as check)."),
        matrix: Path | None = typer.Option(None, "--matrix", help="A matrix folder or file instead of the bundled one."),
        fixes: Path | None = typer.Option(None, "--fixes", help="A fixes folder instead of the bundled one."),
    ) -> None:
        """Turn check's findings into a plan; --yes applies it with a journal; --rollback undoes it."""
        from sparkdoctor.fix import render

        if fmt not in ("console", "json"):
            raise Fatal(f"--format {fmt}: use console or json", EXIT_USAGE)
        if sum((yes, rollback, history, prune)) > 1:
            raise Fatal("--yes, --rollback, --history and --prune do not go together", EXIT_USAGE)
        if (keep is not None or older_than is not None) and not prune:
            raise Fatal("--keep and --older-than go with --prune", EXIT_USAGE)
        if journal and not rollback:
            raise Fatal(f"unexpected argument {journal!r} (a journal id goes with --rollback)", EXIT_USAGE)
        from sparkdoctor.target.choose import refuse_bad_target_options

        refuse_bad_target_options(python, container, container_python, facts_given=False)
        chosen = (python, container, container_python, runtime)
        out = _writer(fmt)
        # a FixError (or a MatrixError) is a SparkdoctorError: the CLI turns it into one line and its own exit code
        if history:
            from sparkdoctor.fix.pipeline import history as list_history

            rows = list_history()
            out(render.as_json("history", rows) if fmt == "json" else "\n".join(render.history_lines(rows)), 0)
            return
        if prune:
            _prune(keep, older_than, fmt, out)
            return
        if rollback:
            _rollback(journal, fmt, out, chosen)
            return
        _plan_or_apply(chosen, yes, fmt, out, env_file, recipe, constraints, system, allow_replace, allow_downgrade,
                       kernels, arch, matrix, fixes)


def _writer(fmt: str):
    """How fix writes its document: JSON behind the common header (sparkdoctor.emit), or text lines, once."""

    def out(text: str, exit_code: int, errors: list | None = None) -> None:
        from sparkdoctor.emit import deliver, emit_json

        if fmt == "json":
            emit_json("fix", "fix", text, exit_code, errors)
        else:
            deliver(text + "\n", None)

    return out


def _refused(message: str, fmt: str, out, plan_json: str):
    """A refused plan: under JSON one document (the plan, the refusal in its errors), then exit 4."""
    refused = Fatal(message, EXIT_FIX_REFUSED)
    if fmt != "json":
        return refused
    out(plan_json, EXIT_FIX_REFUSED, [refused.to_dict()])
    from sparkdoctor.cli_support import err

    err(message)
    return typer.Exit(EXIT_FIX_REFUSED)


def _target(chosen, env_file: Path | None):
    """The target --python / --container / --container-python name, as check resolves it (exit 3 when
    it cannot be probed: no such container, a stopped one, one without Python)."""
    from sparkdoctor.target.choose import resolve_target

    target = resolve_target(*chosen)
    if env_file is not None:
        from sparkdoctor.fix.envfile import EnvFileTarget

        return EnvFileTarget(target, env_file)
    return target


def _journal_target(record: dict, chosen):
    """The target a journal was written for, found again; a journal of another target than the one
    the options name, or a container now running another image, is refused in one line."""
    from sparkdoctor.fix.inventory import target_label

    python, container, container_python, runtime = chosen
    label = target_label(record)
    if record.get("kind") == "container":
        if python is not None or (container is not None and container != record.get("container")):
            raise Fatal(f"this journal is of {label}, not of the target named here; roll it back without target options", EXIT_FIX_REFUSED)
        target = _target((None, record.get("container"), container_python or record.get("python"), runtime), None)
        now = (getattr(target, "info", None) or {}).get("image_id")
        if record.get("image_id") and now != record["image_id"]:
            raise Fatal(f"container {record.get('container')} now runs image {str(now)[:19]}, the journal was written on "
                        f"{str(record['image_id'])[:19]}: not the same files; refusing to roll back into it", EXIT_FIX_REFUSED)
        return target
    if container is not None:
        raise Fatal(f"this journal is of {label}, not of a container; roll it back without --container", EXIT_FIX_REFUSED)
    target = _target((record.get("python"), None, None, None), None)
    if python is not None and Path(_target(chosen, None).python).parent.resolve() != Path(target.python).parent.resolve():
        raise Fatal(f"this journal is of {label}, not of {python}", EXIT_FIX_REFUSED)
    return target


def _rollback(journal, fmt, out, chosen) -> None:
    from sparkdoctor.fix import render
    from sparkdoctor.fix.pipeline import rollback

    result = rollback(lambda record: _journal_target(record, chosen), journal)
    verified = result.get("verified") or {}
    code = EXIT_FIX_FAILED if result["status"] == "rolled back" and not verified.get("ok") else 0
    out(render.as_json("rollback", result) if fmt == "json" else "\n".join(render.rollback_lines(result)), code)
    if code:
        raise typer.Exit(code)


def _plan_or_apply(chosen, yes, fmt, out, env_file, recipe, constraints, system, allow_replace, allow_downgrade,
                   kernels, arch, matrix, fixes) -> None:
    from sparkdoctor.fix import render
    from sparkdoctor.fix.pipeline import CheckSettings, apply_and_recheck, make_plan
    from sparkdoctor.fix.plan import FixOptions

    target = _target(chosen, env_file.absolute() if env_file else None)
    settings = CheckSettings(matrix=matrix, fixes=fixes, arch=arch, constraint_files=list(constraints), kernels=kernels, progress=_progress)
    options = FixOptions(env_file=env_file.absolute() if env_file else None, recipe=recipe.absolute() if recipe else None, system=system, allow_replace=set(allow_replace), allow_downgrade=set(allow_downgrade))
    planned = make_plan(target, settings, options)
    if not planned.report.probed():
        raise Fatal("the target's packages could not be read; nothing to plan", EXIT_UNPROBEABLE)
    if yes and planned.plan.refusals and planned.plan.empty:  # e.g. an unfinished fix: never "nothing to fix"
        if fmt != "json":
            out("\n".join(render.plan_lines(planned.plan)), EXIT_FIX_REFUSED)
        raise _refused(planned.plan.refusals[0], fmt, out, render.plan_json(planned.plan, planned.report))
    if not yes or planned.plan.empty:
        out(render.plan_json(planned.plan, planned.report) if fmt == "json" else "\n".join(
            render.plan_lines(planned.plan) + ([] if planned.plan.empty else ["Dry run: nothing was changed. Apply with --yes."])),
            planned.report.exit_code())
        raise typer.Exit(planned.report.exit_code())
    if planned.plan.refusals:
        raise _refused(planned.plan.refusals[0], fmt, out, render.plan_json(planned.plan, planned.report))
    result = apply_and_recheck(target, planned, settings)
    code = EXIT_FIX_FAILED if result["error"] else result["report_after"].exit_code()
    out(render.applied_json(result) if fmt == "json" else "\n".join(render.plan_lines(planned.plan) + render.applied_lines(result)), code)
    raise typer.Exit(code)


def _prune(keep, older_than, fmt, out) -> None:
    from sparkdoctor.fix import render
    from sparkdoctor.fix.pipeline import prune

    if keep is None and older_than is None:
        raise Fatal("--prune needs --keep N and/or --older-than AGE", EXIT_USAGE)
    if keep is not None and keep < 0:
        raise Fatal(f"--keep {keep}: give a number of journals, 0 or more", EXIT_USAGE)
    result = prune(keep, _age_seconds(older_than) if older_than is not None else None)
    out(render.as_json("prune", result) if fmt == "json" else "\n".join(render.prune_lines(result)), 0)


def _age_seconds(text: str) -> float:
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if not m:
        raise Fatal(f"--older-than {text!r}: give an age like 30d, 12h, 90m, 45s or 2w", EXIT_USAGE)
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
