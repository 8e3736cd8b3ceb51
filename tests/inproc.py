"""The real CLI in-process (typer's CliRunner), judged as cli.main() would print it, with each call's CPU time
bounded (never its wall time: the machine may be busy).

invoke() returns (exit code, stdout, the one-line error or ""); an exception that is no documented one-line error
(an internal error) is raised with its traceback, and a call still running after `cpu_seconds` of CPU raises Hung.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

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
    with cpu_bound(cpu_seconds):
        result = CliRunner().invoke(cli.app, [str(a) for a in args], env=env, standalone_mode=False)
    exc = result.exception
    if exc is None:
        return (result.return_value if isinstance(result.return_value, int) else 0), result.stdout, ""
    if isinstance(exc, SystemExit):
        return (exc.code if isinstance(exc.code, int) else 0), result.stdout, ""
    if isinstance(exc, SparkdoctorError):  # every one-line error carries its exit code (sparkdoctor/errors.py)
        return exc.exit_code, result.stdout, str(exc)
    if callable(getattr(exc, "format_message", None)):  # click's usage errors
        return EXIT_USAGE, result.stdout, exc.format_message()
    raise exc  # an internal error: the traceback says where
