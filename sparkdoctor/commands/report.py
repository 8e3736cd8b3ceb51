"""`sparkdoctor report`: a bug report to post (GitHub markdown or forum text), anonymized by default.

The BugReport: sparkdoctor/report/posted.py; its view: sparkdoctor/views/bug_report.py. The facts come from the
check pipeline (a live target or a saved snapshot), the judgement from the check service (sparkdoctor/check.py), the
document from sparkdoctor/report/. The exit code says whether the report was written (0), not what it found: `check`
gates CI; 3 when the target could not be probed (the report is still written, with the errors that say why).
"""

from __future__ import annotations

import operator
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sparkdoctor.cli_support import DEFAULT_TIMEOUT
from sparkdoctor.commands.options import (
    NAMES_A_FILE,
    Fmt,
    Matrix,
    Output,
    Parsed,
    format_option,
    output_option,
    refuse_bad_arch,
    refuse_bad_seconds,
    refuse_writing_over_an_input,
    verb,
)
from sparkdoctor.errors import TargetUnprobeable, UsageError
from sparkdoctor.report.posted import BugReport
from sparkdoctor.result import Format, Result
from sparkdoctor.views.bug_report import VIEW

if TYPE_CHECKING:
    from sparkdoctor.check import CheckOutcome
    from sparkdoctor.facts import Facts

FORMATS = VIEW.formats


@dataclass
class ReportCommand:
    python: Annotated[str | None, typer.Option("--python", help="Interpreter (or venv folder) of the environment to report on. Default: $VIRTUAL_ENV, else this interpreter."), NAMES_A_FILE] = None
    facts_file: Annotated[Path | None, typer.Option("--facts", help="Report on a saved snapshot (check --save-facts) instead of probing.")] = None
    fmt: Annotated[Fmt, format_option(*FORMATS, help="github (markdown, long parts folded) | forum (plain text)")] = Format.github
    output: Annotated[Output, output_option("Write the report here (atomically) instead of stdout (- is stdout).")] = None
    redact: Annotated[bool, typer.Option("--no-redact", help="Keep user and host names, home paths, addresses and tokens (default: anonymized)."),
                      Parsed(make=operator.not_, default=False)] = True
    arch: Annotated[str | None, typer.Option("--arch", help="Evaluate as if the target ran on this GPU arch (e.g. sm_121a).")] = None
    kernels: Annotated[bool, typer.Option("--kernels/--no-kernels", help="Run the kernel compile probes (live target only).")] = True
    matrix: Matrix = None
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds probing the live target may take.")] = DEFAULT_TIMEOUT

    def refuse_bad_options(self) -> None:
        """Every usage error of `report` (exit 2, one line), before anything is probed."""
        Format.parse(self.fmt, FORMATS)
        if self.facts_file is not None and self.python:
            raise UsageError("--facts and --python exclude each other: a snapshot is already of one target")
        refuse_bad_seconds("--timeout", self.timeout)
        refuse_bad_arch(self.arch)
        refuse_writing_over_an_input(self.output, {"--facts": self.facts_file})


def run(options: ReportCommand) -> Result[BugReport]:
    """The report in `options.fmt`; when it is too long to paste, the whole report is written beside it first (the
    Result's note says where). Exit 3 (the report still made) when the target's packages could not be read."""
    from sparkdoctor.fit import attachment_name

    options.refuse_bad_options()
    judged = _check(options).report
    output = str(options.output) if options.output is not None else None
    attachment = Path(attachment_name(output, options.fmt.value, judged.facts.taken_at or ""))
    report = BugReport(judged, attachment, redact=options.redact, local=options.facts_file is None)
    report.text(Format(options.fmt).value)
    result = Result("report", "bug-report", report)
    if report.whole is not None:  # too long to paste: the whole report beside it, the pasted one points there
        from sparkdoctor.emit import deliver

        deliver(report.whole, attachment)
        result.notes.append(f"the report is too long to paste whole; the full report is in {attachment} (attach it)")
    if not judged.probed():  # the report is written (its errors say why), but it is not a report on packages
        why = next((e["error"] for e in judged.facts.errors if e["collector"] == "target"), "the target's packages could not be read")
        result.fail(TargetUnprobeable(f"{why}: the report holds only what was observed"))
    return result


def _check(options: ReportCommand) -> CheckOutcome:
    from sparkdoctor.check import CheckRequest, check

    if options.facts_file is not None:
        from sparkdoctor.facts import Facts

        return check(CheckRequest(facts=Facts.load(options.facts_file), matrix=options.matrix, arch=options.arch))
    from sparkdoctor import proc
    from sparkdoctor.targets.interface import TargetError
    from sparkdoctor.targets.local import resolve_python_target

    try:
        target = resolve_python_target(options.python)
    except TargetError as exc:  # nothing to probe: the report is still written, the reason in its errors
        return check(CheckRequest(facts=_unresolved(options.python, str(exc)), matrix=options.matrix, arch=options.arch))
    deadline = time.monotonic() + options.timeout
    proc.set_deadline(deadline)
    try:
        request = CheckRequest(target=target, matrix=options.matrix, arch=options.arch, kernels=options.kernels,
                               deadline=deadline)
        if not sys.stderr.isatty():
            return check(request)
        from rich.console import Console

        with Console(stderr=True).status("probing the target for the report…", spinner="dots"):
            return check(request)
    finally:
        proc.set_deadline(None)


def _unresolved(python: str | None, error: str) -> Facts:
    """The Facts of a --python that names no interpreter: what was asked for, and why nothing was probed."""
    from sparkdoctor import __version__
    from sparkdoctor.facts import Facts

    facts = Facts(tool={"name": "sparkdoctor", "version": __version__, "host_python": sys.version.split()[0]},
                  target={"kind": "python", "python": python, "chosen_by": "--python"})
    facts.add_error("target", error)
    return facts


def register(app: typer.Typer) -> None:
    # the report is written; stderr still says why it is not a report on packages
    app.command("report")(verb(ReportCommand, run, """
        Write a bug report with the facts a maintainer asks for (collect-env, cutlass build, kernels, findings).""",
                               say_errors=True))
