"""Why a bench run cannot go on, one class per exit code (sparkdoctor/exitcodes.py): the class says how the command
ends, nobody picks a number. Every one keeps the stable `code` "bench" its JSON `errors` entry always had; the class
(`type` in that entry) and the exit code say which stage failed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_BENCH_FAILED, EXIT_LEDGER, EXIT_USAGE


class Failure(SparkdoctorError):
    """A bench run that cannot go on (nothing is stored when a measurement did not finish)."""

    code = "bench"
    exit_code = EXIT_BENCH_FAILED


class BadBenchInput(Failure):
    """A workload option or a recipe that cannot be used as given (exit 2)."""

    exit_code = EXIT_USAGE


class ToolchainUnreadable(Failure):
    """The interpreter whose toolchain the run is stored with cannot be resolved or probed: a `--python` that is
    no interpreter is bad input (exit 2, as README's table for bench says), nothing was launched."""

    exit_code = EXIT_USAGE


class RunFailed(Failure):
    """The server could not be launched, reached or measured to the end, or its mods refuse the launch (exit 4).
    `findings`: what judged it, as finding records (the memory preflight's verdict, the post-mortem of a launch that
    died): JSON lists them in the error entry, SARIF writes them as results."""

    def __init__(self, message: str, findings: Sequence[Mapping[str, object]] = ()):
        super().__init__(message)
        self.findings = [dict(f) for f in findings]

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), **({"findings": self.findings} if self.findings else {})}


class StoreFailed(Failure):
    """The ledger could not be opened or written (exit 5): the measurement itself may have finished. `kept`: the
    file that holds a measured run the ledger did not take (`history --import FILE` stores it)."""

    exit_code = EXIT_LEDGER

    def __init__(self, message: str, kept: str | None = None):
        super().__init__(message)
        self.kept = kept

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), **({"kept": self.kept} if self.kept else {})}
