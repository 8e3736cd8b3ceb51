"""`sparkdoctor report`: a bug report to post (GitHub markdown or forum text), anonymized by default.

Parse and deliver only: the facts come from the check pipeline (a live target or a saved
snapshot), the judgement from findings.build_report, the document from sparkdoctor/report/.
The exit code says whether the report was written (0), not what it found: `check` gates CI; 3
when the target could not be probed (the report is still written, with the errors that say why).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.commands.options import format_option
from sparkdoctor.exitcodes import EXIT_UNPROBEABLE
from sparkdoctor.result import Format

DEFAULT_TIMEOUT = 120.0


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    python: str | None = typer.Option(None, "--python", help="Interpreter (or venv folder) of the environment to report on. Default: $VIRTUAL_ENV, else this interpreter."),
    facts_file: Path | None = typer.Option(None, "--facts", help="Report on a saved snapshot (check --save-facts) instead of probing."),
    fmt: str = format_option(Format.github, Format.forum, default=Format.github, help="github (markdown, long parts folded) | forum (plain text)"),
    output_name: str | None = typer.Option(None, "--output", "-o", metavar="PATH", help="Write the report here (atomically) instead of stdout."),
    no_redact: bool = typer.Option(False, "--no-redact", help="Keep user and host names, home paths, addresses and tokens (default: anonymized)."),
    arch: str | None = typer.Option(None, "--arch", help="Evaluate as if the target ran on this GPU arch (e.g. sm_121a)."),
    kernels: bool = typer.Option(True, "--kernels/--no-kernels", help="Run the kernel compile probes (live target only)."),
    matrix_path: Path | None = typer.Option(None, "--matrix", help="Matrix folder or file to use instead of the bundled one."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", help="Seconds probing the live target may take."),
) -> None:
    """Write a bug report with the facts a maintainer asks for (collect-env, cutlass build, kernels, findings)."""
    from sparkdoctor.report import REPORT_FORMATS

    if fmt not in REPORT_FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(REPORT_FORMATS)}")
    if facts_file is not None and python:
        raise Fatal("--facts and --python exclude each other: a snapshot is already of one target")
    if not (timeout > 0 and timeout != float("inf")):
        raise Fatal(f"--timeout {timeout}: give a number of seconds above 0")
    output = _output(output_name)
    if arch is not None:
        from sparkdoctor.arch import real_arch_problem

        problem = real_arch_problem(arch)
        if problem:
            raise Fatal(f"--arch {arch!r}: {problem}")

    from sparkdoctor.findings import build_report
    from sparkdoctor.matrix import load

    matrix = load(matrix_path)
    facts = _facts(facts_file, python, arch, kernels, timeout)
    from sparkdoctor.render.fit import attachment_name
    from sparkdoctor.report import build_bug_report_fitted

    judged = build_report(facts, matrix)
    attachment = attachment_name(output_name, fmt, judged.facts.fingerprint())
    text, whole = build_bug_report_fitted(judged, fmt, Path(attachment).name, redact=not no_redact,
                                          local=facts_file is None)
    if whole is not None:  # too long to paste: the whole report beside it, the pasted one points there
        _deliver(whole, Path(attachment))
        sys.stderr.write(f"sparkdoctor: the report is too long to paste whole; the full report is in {attachment} "
                         "(attach it)\n")
    _deliver(text, output)
    if not judged.probed():  # the report is written (its errors say why), but it is not a report on packages
        raise Fatal("the target's packages could not be read: the report holds only what was observed", EXIT_UNPROBEABLE)


def _output(name: str | None) -> Path | None:
    from sparkdoctor.commands.options import output_path

    return output_path("--output", name)


def _facts(facts_file: Path | None, python: str | None, arch: str | None, kernels: bool, timeout: float):
    from sparkdoctor.check import apply_arch_override
    from sparkdoctor.facts import Facts

    if facts_file is not None:
        return apply_arch_override(Facts.load(facts_file), arch)
    from sparkdoctor import proc
    from sparkdoctor.check import CheckOptions, collect_facts
    from sparkdoctor.target.local import resolve_python_target

    target = resolve_python_target(python)  # a TargetError is exit 3 by itself
    deadline = time.monotonic() + timeout
    proc.set_deadline(deadline)
    try:
        options = CheckOptions(arch=arch, kernels=kernels, deadline=deadline)
        if not sys.stderr.isatty():
            return collect_facts(target, options)
        from rich.console import Console

        with Console(stderr=True).status("probing the target for the report…", spinner="dots"):
            return collect_facts(target, options)
    finally:
        proc.set_deadline(None)


def _deliver(text: str, output: Path | None) -> None:
    from sparkdoctor.emit import deliver

    deliver(text, output)  # an OutputError (exit 2) names --output or stdout
