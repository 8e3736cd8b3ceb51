"""`sparkdoctor check`: probe the target (or read a snapshot), judge it against the matrix, report.

`CheckCommand` holds the options, `run()` does the work and returns a Result (kind "report"), `register()`
adds the typer command. Tests call `run()` directly. The target probe is the long pole of a warm check:
the entry point (sparkdoctor/launch.py) started it before typer was imported, and `run` reuses it when it
probes the target the options name.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sparkdoctor.commands.options import (
    arch_option,
    container_option,
    container_python_option,
    format_option,
    matrix_option,
    output_option,
    output_path,
    python_option,
    runtime_option,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result

if TYPE_CHECKING:
    from sparkdoctor.check import CheckOutcome, CheckRequest

DEFAULT_TIMEOUT = 120.0
FORMATS = (Format.console, Format.json, Format.junit, Format.markdown, Format.sarif)
SEVERITIES = ("info", "warn", "error")


@dataclass
class CheckCommand:
    """Everything `check` is told; the defaults are the command line's."""

    python: str | None = None
    container: str | None = None
    container_python: str | None = None
    runtime: str | None = None
    arch: str | None = None
    facts_file: Path | None = None
    save_facts: Path | None = None
    output: Path | None = None
    fmt: Format = Format.console
    fail_on: str | None = None
    strict: bool = False
    ignore: list[str] = field(default_factory=list)
    config: Path | None = None
    constraints: list[Path] = field(default_factory=list)
    matrix: Path | None = None
    kernels: bool = True
    no_cache: bool = False
    timeout: float = DEFAULT_TIMEOUT
    verbose: bool = False

    def refuse_bad_options(self) -> None:
        """Every usage error of `check`, before a single probe starts (exit 2, one line)."""
        from sparkdoctor.targets import choose as check_target

        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise UsageError(f"--timeout {self.timeout}: give a number of seconds above 0")
        if self.python is not None and not self.python.strip():
            raise UsageError("--python '': give an interpreter or a venv folder (leave --python out for the default)")
        if self.output is None and sys.stdout is None:
            raise UsageError("stdout is closed: nowhere to write the report (use -o FILE)")
        Format.parse(self.fmt, FORMATS)
        if self.fail_on is not None and self.fail_on not in SEVERITIES:
            raise UsageError(f"--fail-on {self.fail_on}: choose one of {', '.join(SEVERITIES)}")
        if self.arch is not None:
            from sparkdoctor.arch import real_arch_problem

            problem = real_arch_problem(self.arch)
            if problem:
                raise UsageError(f"--arch {self.arch!r}: {problem}")
        for c in self.constraints:
            if not c.is_file():
                why = "not a regular file (a device, FIFO, socket or folder); sparkdoctor reads only regular files here"
                raise UsageError(f"--constraints {c}: {why if c.exists() else 'no such file'}")
        check_target.refuse_bad_target_options(self.python, self.container, self.container_python, self.facts_file is not None)
        if self.facts_file is not None and self.python:
            raise UsageError("--facts and --python exclude each other: a snapshot is already of one target")


def run(options: CheckCommand) -> Result:
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

        request = CheckRequest(target=target, snapshot=options.facts_file, matrix=options.matrix, arch=options.arch,
                               constraint_files=list(options.constraints), kernels=options.kernels,
                               use_cache=not options.no_cache, deadline=deadline, prestarted=prestarted,
                               fail_on="warn" if options.strict else options.fail_on, ignore=list(options.ignore),
                               config=load_config(options.config), save_facts=options.save_facts)
        outcome = _check_with_progress(request)
        return Result("check", "report", outcome.report, exit_code=outcome.report.exit_code(), notes=outcome.notes,
                      options={"verbose": options.verbose})
    finally:  # the budget is this run's: a caller in the same process (tests, a library) is not bound by it
        proc.set_deadline(None)


def _check_with_progress(request: CheckRequest) -> CheckOutcome:
    from sparkdoctor.check import check

    # Progress goes to stderr, and only to a terminal (and only while a target is probed): stdout stays the document.
    if request.target is None or not sys.stderr.isatty():
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
    app.command("check")(check)


def check(
    python: str | None = python_option(),
    container: str | None = container_option(),
    container_python: str | None = container_python_option(),
    runtime: str | None = runtime_option(),
    arch: str | None = arch_option(),
    facts_file: Path | None = typer.Option(None, "--facts", help="Evaluate a saved snapshot instead of probing a live target."),
    save_facts_name: str | None = typer.Option(None, "--save-facts", metavar="PATH", help="Write the collected Facts snapshot (JSON) to this file."),
    fmt: str = format_option(*FORMATS),
    output_name: str | None = output_option("Write the report here instead of stdout."),
    fail_on: str | None = typer.Option(None, "--fail-on", help="Lowest severity that fails the check: info | warn | error (default error)."),
    strict: bool = typer.Option(False, "--strict", help="Fail on warnings too (same as --fail-on warn)."),
    ignore: list[str] = typer.Option([], "--ignore", help="Entry id to ignore (repeatable)."),
    config: Path | None = typer.Option(None, "--config", help="Config file with permanent ignores (default ./sparkdoctor.toml, then the user config)."),
    constraints: list[Path] = typer.Option([], "--constraints", "-c", help="Constraints/requirements file whose pins to check (repeatable)."),
    matrix_path: Path | None = matrix_option(),
    kernels: bool = typer.Option(True, "--kernels/--no-kernels", help="Run the kernel compile probes (--no-kernels: the fast path)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results and file hashes."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", help="Seconds the whole run may take: every collector and probe shares this budget."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show clear and unevaluated entries and all facts."),
) -> None:
    """Probe the target environment, match it against the matrix, report findings. Exit code gates CI."""
    from sparkdoctor.emit import emit

    options = CheckCommand(
        python=python, container=container, container_python=container_python, runtime=runtime, arch=arch,
        facts_file=facts_file, save_facts=output_path("--save-facts", save_facts_name),
        output=output_path("--output", output_name), fmt=Format(fmt), fail_on=fail_on, strict=strict, ignore=list(ignore),
        config=config, constraints=list(constraints), matrix=matrix_path, kernels=kernels, no_cache=no_cache,
        timeout=timeout, verbose=verbose,
    )
    raise typer.Exit(emit(run(options), options.fmt, options.output))

