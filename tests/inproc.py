"""The real CLI in-process (typer's CliRunner), judged as cli.main() would print it, with each call's CPU time
bounded (never its wall time: the machine may be busy).

invoke() returns (exit code, stdout, the one-line error or ""); an exception that is no documented one-line error
(an internal error) is raised with its traceback, and a call still running after `cpu_seconds` of CPU raises Hung.
run() answers the same call as a `python -m sparkdoctor` child's subprocess.run (returncode, stdout, stderr).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import NamedTuple

from typer.testing import CliRunner

from sparkdoctor import cli
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_USAGE


class Hung(Exception):
    """A call still running after its CPU seconds."""


@contextlib.contextmanager
def cpu_bound(seconds: float) -> Iterator[None]:
    def alarm(signum, frame):
        raise Hung(f"still running after {seconds} s of CPU time")

    previous = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds, 1.0)  # then every CPU second, should one land where it is swallowed
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def invoke(*args: object, env: dict[str, str | None] | None = None, cpu_seconds: float = 30) -> tuple[int, str, str]:
    code, stdout, error, _ = _invoked(args, env, cpu_seconds)
    return code, stdout, error


class Ran(NamedTuple):
    """run()'s answer, read as subprocess.run's of `python -m sparkdoctor` is read."""

    returncode: int
    stdout: str
    stderr: str


def run(*args: object, env: dict[str, str | None] | None = None, cpu_seconds: float = 30) -> Ran:
    """invoke(), answered as a `python -m sparkdoctor` child's subprocess.run: stderr holds what the command wrote
    there, then its one-line error as cli.main prints it. For the tests whose point is what a command answers, not
    that the real entry point starts: each such child cost 0.25-0.3 CPU s of start-up (the interpreter and the verb's
    imports), more than most of these commands' own work (docs/evidence/suitetime3-2026-12-03.md)."""
    code, stdout, error, stderr = _invoked(args, env, cpu_seconds)
    return Ran(code, stdout, stderr + (error + "\n" if error else ""))


def _invoked(args: tuple[object, ...], env: dict[str, str | None] | None, cpu_seconds: float) -> tuple[int, str, str, str]:
    """(exit code, stdout, the one-line error or "", what the command itself wrote to stderr)."""
    with cpu_bound(cpu_seconds):
        result = CliRunner().invoke(cli.app, [str(a) for a in args], env=env, standalone_mode=False)
    exc = result.exception
    if exc is None:
        return (result.return_value if isinstance(result.return_value, int) else 0), result.stdout, "", result.stderr
    if isinstance(exc, SystemExit):
        return (exc.code if isinstance(exc.code, int) else 0), result.stdout, "", result.stderr
    if isinstance(exc, SparkdoctorError):  # every one-line error carries its exit code (sparkdoctor/errors.py)
        return exc.exit_code, result.stdout, str(exc), result.stderr
    if callable(getattr(exc, "format_message", None)):  # click's usage errors
        return EXIT_USAGE, result.stdout, exc.format_message(), result.stderr
    raise exc  # an internal error: the traceback says where
