"""`sparkdoctor check`: probe the target (or read a snapshot), judge it against the matrix, report.

The target probe is the long pole of a warm check: the entry point (sparkdoctor/launch.py) started it before typer
was imported, and `run` reuses it when it probes the target the options name.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sparkdoctor.cli_support import DEFAULT_TIMEOUT
from sparkdoctor.commands.options import (
    Arch,
    Container,
    ContainerPython,
    Fmt,
    Ignore,
    Matrix,
    Output,
    Parsed,
    Python,
    Runtime,
    format_option,
    output_option,
    output_path,
    refuse_bad_arch,
    refuse_bad_constraints,
    refuse_bad_seconds,
    verb,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.findings import Report
from sparkdoctor.result import Format, Result
from sparkdoctor.views.check import VIEW

if TYPE_CHECKING:
    from sparkdoctor.check import CheckOutcome, CheckRequest

FORMATS = VIEW.formats
SEVERITIES = ("info", "warn", "error")


@dataclass
class CheckCommand:
    python: Python = None
    container: Container = None
    container_python: ContainerPython = None
    runtime: Runtime = None
    arch: Arch = None
    facts_file: Annotated[Path | None, typer.Option("--facts", help="Evaluate a saved snapshot instead of probing a live target.")] = None
    save_facts: Annotated[Path | None, typer.Option("--save-facts", metavar="PATH", help="Write the collected Facts snapshot (JSON) to this file."),
                          Parsed(str | None, functools.partial(output_path, "--save-facts"))] = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Annotated[Output, output_option("Write the report here instead of stdout (- is stdout).")] = None
    fail_on: Annotated[str | None, typer.Option("--fail-on", help="Lowest severity that fails the check: info | warn | error (default error).")] = None
    strict: Annotated[bool, typer.Option("--strict", help="Fail on warnings too (same as --fail-on warn).")] = False
    ignore: Ignore = field(default_factory=list)
    config: Annotated[Path | None, typer.Option("--config", help="Config file with permanent ignores (default ./sparkdoctor.toml, then the user config).")] = None
    constraints: Annotated[list[Path], typer.Option("--constraints", "-c", help="Constraints/requirements file whose pins to check (repeatable).")] = field(default_factory=list)
    matrix: Matrix = None
    kernels: Annotated[bool, typer.Option("--kernels/--no-kernels", help="Run the kernel compile probes (--no-kernels: the fast path).")] = True
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Ignore cached probe results and file hashes.")] = False
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds the whole run may take: every collector and probe shares this budget.")] = DEFAULT_TIMEOUT
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show clear and unevaluated entries and all facts.")] = False

    def refuse_bad_options(self) -> None:
        """Every usage error of `check`, before a single probe starts (exit 2, one line)."""
        from sparkdoctor.targets import choose as check_target

        refuse_bad_seconds("--timeout", self.timeout)
        if self.python is not None and not self.python.strip():
            raise UsageError("--python '': give an interpreter or a venv folder (leave --python out for the default)")
        if self.output is None and sys.stdout is None:
            raise UsageError("stdout is closed: nowhere to write the report (use -o FILE)")
        Format.parse(self.fmt, FORMATS)
        if self.fail_on is not None and self.fail_on not in SEVERITIES:
            raise UsageError(f"--fail-on {self.fail_on}: choose one of {', '.join(SEVERITIES)}")
        refuse_bad_arch(self.arch)
        refuse_bad_constraints(self.constraints)
        check_target.refuse_bad_target_options(self.python, self.container, self.container_python, self.facts_file is not None)
        if self.runtime is not None and self.container is None:  # it was accepted and did nothing
            raise UsageError("--runtime needs --container: it names the CLI that runs the container")
        if self.facts_file is not None and self.python:
            raise UsageError("--facts and --python exclude each other: a snapshot is already of one target")
        if self.facts_file is not None and self.save_facts is not None:  # it wrote nothing, silently
            raise UsageError("--save-facts and --facts exclude each other: the snapshot is already a file (copy it)")
        if self.facts_file is not None and self.constraints:  # a snapshot holds the pins read when it was taken
            raise UsageError("--constraints and --facts exclude each other: a snapshot holds the pins read when it was "
                             "taken (pass --constraints when you take it)")


def run(options: CheckCommand) -> Result[Report]:
    """The report on the target (or snapshot) `options` name; its exit code is the verdict's."""
    from sparkdoctor import proc
    from sparkdoctor.targets import choose as check_target

    options.refuse_bad_options()
    deadline = time.monotonic() + options.timeout
    proc.set_deadline(deadline)  # every subprocess of this run, whoever starts it, ends by then
    try:
        prestarted = {}
        target = None
        if options.facts_file is None:
            from sparkdoctor.collect import targetenv

            target = check_target.resolve_target(options.python, options.container, options.container_python, options.runtime)
            prestarted = targetenv.start_probes(target, options.no_cache)
        else:
            check_target.drop_early_probe()

        from sparkdoctor.check import CheckRequest
        from sparkdoctor.config import load_config

        config = load_config(options.config)
        fail_on = options.fail_on or config.fail_on or "error"
        if options.strict and fail_on == "error":  # --strict adds the warnings; it never drops info from the gate
            fail_on = "warn"
        request = CheckRequest(target=target, snapshot=options.facts_file, matrix=options.matrix, arch=options.arch,
                               constraint_files=list(options.constraints), kernels=options.kernels,
                               use_cache=not options.no_cache, deadline=deadline, prestarted=prestarted,
                               fail_on=fail_on, ignore=list(options.ignore), config=config, save_facts=options.save_facts)
        outcome = _check_with_progress(request)
        result = Result("check", "report", outcome.report, exit_code=outcome.report.exit_code(), notes=outcome.notes,
                        verbose=options.verbose)
        why = outcome.report.unprobed_why()
        if why is not None:  # exit 3: the reason in the JSON `errors` (code "target", as a missing --python) and on stderr
            from sparkdoctor.targets.interface import TargetError

            result.fail(TargetError(f"the target could not be probed: {why}"))
            result.notes.append(f"the target could not be probed (exit 3): {why}")
        return result
    finally:  # the budget is this run's: a caller in the same process (tests, a library) is not bound by it
        proc.set_deadline(None)


def _check_with_progress(request: CheckRequest) -> CheckOutcome:
    from sparkdoctor.check import check

    # Progress goes to stderr, and only to a terminal (and only while a target is probed): stdout stays the document.
    if request.target is None or sys.stderr is None or not sys.stderr.isatty():  # None: started with stderr closed
        return check(request)
    from rich.console import Console

    err = Console(stderr=True)
    finished: list[str] = []
    with err.status("probing the target…", spinner="dots") as status:

        def progress(name: str) -> None:
            finished.append(name)
            status.update(f"probing the target… ({', '.join(finished)} done)")

        request.progress = progress
        return check(request)


def register(app: typer.Typer) -> None:
    app.command("check")(verb(CheckCommand, run, """
        Probe the target environment, match it against the matrix, report findings. Exit code gates CI."""))
