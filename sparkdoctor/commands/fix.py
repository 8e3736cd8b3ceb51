"""`sparkdoctor fix`: the plan (dry run by default), --yes to apply, --rollback [JOURNAL], --history, --prune.

One document per mode (sparkdoctor/fix/documents.py). The pipeline (sparkdoctor/fix/) loads inside `run`, so
`check` never pays for it. Every failure is an error class with its own exit code: a FixError and
its kin (sparkdoctor/fix/interface.py), a UsageError (2), TargetUnprobeable (3).
"""

from __future__ import annotations

import re
import sys
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sparkdoctor.commands.options import (
    NAMES_A_FILE,
    ContainerPython,
    Fmt,
    Output,
    Runtime,
    format_option,
    refuse_bad_constraints,
    refuse_bad_seconds,
    refuse_unwritable_output,
    verb,
)
from sparkdoctor.errors import InputError, UsageError
from sparkdoctor.fix.documents import FixDocument
from sparkdoctor.result import Format, Result
from sparkdoctor.views.fix import VIEW

if TYPE_CHECKING:
    from sparkdoctor.fix.pipeline import Planned
    from sparkdoctor.targets.interface import Target

FORMATS = VIEW.formats
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass
class FixCommand:
    journal: Annotated[str | None, typer.Argument(help="With --rollback: the journal id (default: the newest)."), NAMES_A_FILE] = None
    python: Annotated[str | None, typer.Option("--python", help="The target interpreter or venv (default: $VIRTUAL_ENV, else this Python)."), NAMES_A_FILE] = None
    container: Annotated[str | None, typer.Option("--container", metavar="NAME", help="Fix inside this running container (docker/podman), through the container CLI.")] = None
    container_python: ContainerPython = None
    runtime: Runtime = None
    yes: Annotated[bool, typer.Option("--yes", help="Apply the plan (journal first), then check again.")] = False
    rollback: Annotated[bool, typer.Option("--rollback", help="Restore what a journal recorded, byte for byte, offline.")] = False
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --rollback: check that the journal can restore, say what it would restore, change nothing.")] = False
    history: Annotated[bool, typer.Option("--history", help="List fix journals, newest first, with their size.")] = False
    prune: Annotated[bool, typer.Option("--prune", help="Remove old journals (with --keep N and/or --older-than AGE); never one whose apply or rollback did not finish.")] = False
    keep: Annotated[int | None, typer.Option("--keep", help="With --prune: keep the newest N journals.")] = None
    older_than: Annotated[str | None, typer.Option("--older-than", help="With --prune: remove journals older than AGE (e.g. 30d, 12h, 90m).")] = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    env_file: Annotated[Path | None, typer.Option("--env-file", help="The env file the server reads (KEY=VALUE): checked with it, env fixes edit it.")] = None
    recipe: Annotated[Path | None, typer.Option("--recipe", help="The serving recipe (recipes/*.toml) flag fixes edit.")] = None
    constraints: Annotated[list[Path], typer.Option("--constraints", help="Extra constraints/requirements files to read (as check).")] = field(default_factory=list)
    system: Annotated[bool, typer.Option("--system", help="Allow changing a system interpreter (not a venv).")] = False
    allow_replace: Annotated[list[str], typer.Option("--allow-replace", help="Allow replacing this non-registry dist (repeatable).")] = field(default_factory=list)
    allow_downgrade: Annotated[list[str], typer.Option("--allow-downgrade", help="Allow downgrading this pinned package (repeatable).")] = field(default_factory=list)
    kernels: Annotated[bool, typer.Option("--kernels/--no-kernels", help="Run the kernel compile probes in the checks.")] = True
    arch: Annotated[str | None, typer.Option("--arch", help="Evaluate as this GPU arch (as check).")] = None
    matrix: Annotated[Path | None, typer.Option("--matrix", help="A matrix folder or file instead of the bundled one.")] = None
    fixes: Annotated[Path | None, typer.Option("--fixes", help="A fixes folder instead of the bundled one.")] = None
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds one pip call may run (the plan's dry run, the apply's, the rollback's; default $SPARKDOCTOR_FIX_INSTALL_TIMEOUT, else 1800).")] = None

    def refuse_bad_options(self) -> None:
        """Every usage error of `fix`, before anything is read or changed (exit 2, one line)."""
        from sparkdoctor.targets.choose import refuse_bad_target_options

        Format.parse(self.fmt, FORMATS)
        if sum((self.yes, self.rollback, self.history, self.prune)) > 1:
            raise UsageError("--yes, --rollback, --history and --prune do not go together")
        if (self.keep is not None or self.older_than is not None) and not self.prune:
            raise UsageError("--keep and --older-than go with --prune")
        if self.dry_run and not self.rollback:
            raise UsageError("--dry-run goes with --rollback (a plan, without --yes, is already a dry run)")
        if self.journal and not self.rollback:
            raise UsageError(f"unexpected argument {self.journal!r} (a journal id goes with --rollback)")
        if self.prune:
            if self.keep is None and self.older_than is None:
                raise UsageError("--prune needs --keep N and/or --older-than AGE")
            if self.keep is not None and self.keep < 0:
                raise UsageError(f"--keep {self.keep}: give a number of journals, 0 or more")
            if self.older_than is not None:
                age_seconds(self.older_than)
        refuse_bad_target_options(self.python, self.container, self.container_python, facts_given=False)
        if self.timeout is not None:
            refuse_bad_seconds("--timeout", self.timeout)
        refuse_bad_constraints(self.constraints)
        refuse_unwritable_output(self.output)
        if not (self.history or self.prune or self.rollback):
            if self.env_file is not None:
                refuse_unreadable_env_file(self.env_file)
            if self.recipe is not None:
                refuse_unreadable_recipe(self.recipe)

    @property
    def chosen(self) -> tuple[str | None, str | None, str | None, str | None]:
        return self.python, self.container, self.container_python, self.runtime


def refuse_unreadable_env_file(path: Path) -> None:
    """`--env-file` that is not a regular file of 1 MiB at most, not UTF-8 text, or holds a carriage return inside a line
    (fix/envfile.py): one line, exit 2 (docs/inputs.md), before the check runs with it."""
    from sparkdoctor.fix.envfile import INNER_CR_WHY, MAX_ENV_FILE, inner_cr_line
    from sparkdoctor.inputs import read_text

    try:
        text = read_text(path, MAX_ENV_FILE)  # a regular file only, bounded: never /dev/zero, a FIFO or a folder
    except UnicodeDecodeError as exc:
        raise InputError(f"--env-file {path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise InputError(f"--env-file {path}: cannot read the env file: {exc.strerror or exc}") from None
    if (line_no := inner_cr_line(text)) is not None:
        raise InputError(f"--env-file {path}: {INNER_CR_WHY.format(line_no)}")


def refuse_unreadable_recipe(path: Path) -> None:
    """`--recipe` that is not a TOML recipe with a `command` argv (what the flag fixes edit), read with the recipe
    reader's bounds (a regular file of 16 MiB at most): one line naming the option, exit 2, before anything runs."""
    from sparkdoctor.recipes.model import RecipeError
    from sparkdoctor.recipes.ours import read_toml

    try:
        doc = read_toml(path)
    except RecipeError as exc:
        raise RecipeError(f"--recipe {exc}") from None
    command = doc.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise RecipeError(f"--recipe {path}: field 'command' must be a non-empty list of strings (the argv the flag fixes edit)")


def age_seconds(text: str) -> float:
    """`--older-than 30d` in seconds; UsageError for anything that is not a number and one of s m h d w."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if not m:
        raise UsageError(f"--older-than {text!r}: give an age like 30d, 12h, 90m, 45s or 2w")
    return float(m.group(1)) * AGE_UNITS[m.group(2)]


def run(options: FixCommand) -> Result[FixDocument]:
    """The document of the mode the options choose; its exit code is the check's verdict (plan), the apply's or the
    rollback's outcome. An apply refused (4) is a Result whose errors name the refusal."""
    options.refuse_bad_options()
    if options.history:
        from sparkdoctor.fix.documents import HistoryDocument
        from sparkdoctor.fix.pipeline import history

        return Result("fix", "fix", HistoryDocument(history()))
    if options.prune:
        from sparkdoctor.fix.documents import PruneDocument
        from sparkdoctor.fix.pipeline import prune

        return Result("fix", "fix", PruneDocument(prune(options.keep, age_seconds(options.older_than)
                                                        if options.older_than is not None else None)))
    if options.rollback:
        from sparkdoctor.fix.documents import RollbackDocument
        from sparkdoctor.fix.pipeline import rollback

        rolled = rollback(lambda record: _journal_target(record, options.chosen), options.journal, _progress, options.timeout,
                          options.dry_run)
        return Result("fix", "fix", RollbackDocument(rolled), exit_code=rolled.exit_code)
    from sparkdoctor.fix.pipeline import held_for_apply

    env_file = options.env_file.absolute() if options.env_file else None
    target = _target(options.chosen, env_file)
    # --yes: the target's lock first, so a second apply is refused before its check and plan; a plan alone takes none
    with held_for_apply(target) if options.yes else nullcontext():
        return _planned_and_applied(options, target, env_file)


def _planned_and_applied(options: FixCommand, target: Target, env_file: Path | None) -> Result[FixDocument]:
    from sparkdoctor.check import CheckRequest, target_notes
    from sparkdoctor.fix.documents import ApplyDocument, PlanDocument
    from sparkdoctor.fix.interface import Refusal
    from sparkdoctor.fix.pipeline import apply_and_recheck, make_plan
    from sparkdoctor.fix.plan import FixOptions

    request = CheckRequest(target=target, matrix=options.matrix, fixes=options.fixes, strict_fixes=True, arch=options.arch,
                           constraint_files=list(options.constraints), kernels=options.kernels)
    planned: Planned = make_plan(request, FixOptions(
        env_file=env_file, recipe=options.recipe.absolute() if options.recipe else None, system=options.system,
        allow_replace=set(options.allow_replace), allow_downgrade=set(options.allow_downgrade), timeout=options.timeout),
        _progress)
    plan = planned.plan
    if options.yes and plan.refusals:  # an unfinished fix refuses an empty plan too: never "nothing to fix"
        shown = PlanDocument(plan, planned.report, dry_run=False, shown=plan.empty)
        return Result("fix", "fix", shown).fail(Refusal(plan.refusals[0]))
    notes = target_notes(target, planned.report.facts)  # a copied venv, pipx's venv for sparkdoctor: as check says
    if not options.yes or plan.empty:
        return Result("fix", "fix", PlanDocument(plan, planned.report), exit_code=planned.report.exit_code(), notes=notes)
    applied = apply_and_recheck(request, planned, _progress)
    return Result("fix", "fix", ApplyDocument(plan, applied), exit_code=applied.exit_code, notes=notes)


def _progress(message: str) -> None:
    with suppress(OSError, ValueError, AttributeError):  # a full or closed stderr: progress is lost, not the outcome
        sys.stderr.write(f"sparkdoctor fix: {message} ...\n")
        sys.stderr.flush()


def _target(chosen: tuple[str | None, str | None, str | None, str | None], env_file: Path | None) -> Any:
    """The target --python / --container / --container-python name, as check resolves it (exit 3 when
    it cannot be probed: no such container, a stopped one, one without Python)."""
    from sparkdoctor.targets.choose import resolve_target

    target = resolve_target(*chosen)
    if env_file is not None:
        from sparkdoctor.fix.envfile import EnvFileTarget

        return EnvFileTarget(target, env_file)
    return target


def _journal_target(record: dict[str, Any], chosen: tuple[str | None, str | None, str | None, str | None]) -> Any:
    """The target a journal was written for, found again; a journal of another target than the one
    the options name, or a container now running another image, is refused in one line (exit 4)."""
    from sparkdoctor.fix.interface import Refusal
    from sparkdoctor.fix.inventory import target_label

    python, container, container_python, runtime = chosen
    label = target_label(record)
    if record.get("kind") == "container":
        if python is not None or (container is not None and container != record.get("container")):
            raise Refusal(f"this journal is of {label}, not of the target named here; roll it back without target options")
        target = _target((None, record.get("container"), container_python or record.get("python"), runtime), None)
        now = (getattr(target, "info", None) or {}).get("image_id")
        if record.get("image_id") and now != record["image_id"]:
            raise Refusal(f"container {record.get('container')} now runs image {str(now)[:19]}, the journal was written on "
                          f"{str(record['image_id'])[:19]}: not the same files; refusing to roll back into it")
        return target
    if container is not None:
        raise Refusal(f"this journal is of {label}, not of a container; roll it back without --container")
    target = _target((record.get("python"), None, None, None), None)
    if python is not None and Path(_target(chosen, None).python).parent.resolve() != Path(target.python).parent.resolve():
        raise Refusal(f"this journal is of {label}, not of {python}")
    return target


def register(app: typer.Typer) -> None:
    # a refusal: the plan is the document, the refusal its one line on stderr
    app.command("fix")(verb(FixCommand, run, """
        Turn check's findings into a plan; --yes applies it with a journal; --rollback undoes it.""", say_errors=True))
