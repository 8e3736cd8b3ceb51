"""One error base for every sparkdoctor error: the exit code and a stable code travel on the class.

Every error class of the engine derives from `SparkdoctorError` and says, as class attributes, which
documented exit code (sparkdoctor/exitcodes.py) it ends a command with and a stable `code` for JSON
consumers. `cli.main` catches the base once: it prints the message as one line on stderr (and, under
`--format json`, an error document on stdout) and exits with `exit_code`. Nothing translates one error
into another to pick an exit code.

An instance may carry another exit code than its class (a bench failure that knows whether the launch or the
store failed), set by whoever raises it.

Imports only the exit codes and the one-line helper: anything may import this module (and so the reader of a
setting in seconds, whose bad value is a UsageError).
"""

from __future__ import annotations

import math
import os
import signal

from sparkdoctor.exitcodes import (
    EXIT_BENCH_FAILED,
    EXIT_BENCH_UNCHECKED,
    EXIT_BENCH_WRONG,
    EXIT_LEDGER,
    EXIT_NO_VLLM,
    EXIT_UNPROBEABLE,
    EXIT_USAGE,
    EXIT_VERIFY_ERROR,
)
from sparkdoctor.text import error_line, one_line


class SparkdoctorError(Exception):
    """Why a command cannot go on, in one line; `exit_code` and `code` say how it ends."""

    exit_code: int = EXIT_USAGE
    """The documented exit code (sparkdoctor/exitcodes.py) a command that stops on this error ends with."""
    code: str = "error"
    """A stable name for JSON consumers: it never changes when the message's wording does."""

    def to_dict(self) -> dict[str, object]:
        """The error as it appears in a JSON document's `errors` list."""
        return {"code": self.code, "type": type(self).__name__, "message": error_line(str(self)), "exit_code": self.exit_code}


class OneLine(SparkdoctorError):
    """An error whose message is made one line when it is raised (a file's keys, a path or a tool's output may hold
    line breaks): the snapshot, matrix, recipe, config and fix errors."""

    def __init__(self, message: str):
        super().__init__(one_line(message))


class UsageError(SparkdoctorError):
    """A bad option, option combination or argument (exit 2)."""

    exit_code = EXIT_USAGE
    code = "usage"


def seconds_from_env(name: str, default: float, *, zero: bool = False) -> float:
    """$name as a number of seconds (default when unset or empty), read where it is used: a value that is no finite
    positive number (`zero`: or 0) is a UsageError of one line naming the variable, and stops only what uses it."""
    raw = os.environ.get(name, "")
    if not raw:
        return float(default)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and (seconds > 0 or (zero and seconds == 0))):
        raise UsageError(f"{name}={raw}: give seconds, e.g. {default:g}")
    return seconds


class InputError(SparkdoctorError):
    """A file or value given to sparkdoctor that it cannot read (a snapshot, a matrix, a recipe, a config): the
    message names the file and the field (exit 2)."""

    exit_code = EXIT_USAGE
    code = "bad-input"


class TargetUnprobeable(SparkdoctorError):
    """The target environment could not be probed at all (exit 3)."""

    exit_code = EXIT_UNPROBEABLE
    code = "unprobeable"


class NoVllmToJudge(SparkdoctorError):
    """recipe check: neither --python nor the recipe's command named an environment, and the one used by default
    has no vLLM: nothing to judge the recipe's flags and env against. One line; exit EXIT_NO_VLLM."""

    exit_code = EXIT_NO_VLLM
    code = "no-vllm"


class LedgerFailure(SparkdoctorError):
    """The ledger cannot be opened, read or written (exit 5)."""

    exit_code = EXIT_LEDGER
    code = "ledger"


class BenchFailure(SparkdoctorError):
    """A server could not be launched, reached or measured to the end (exit 4)."""

    exit_code = EXIT_BENCH_FAILED
    code = "bench-failed"


class VerifyIncomplete(SparkdoctorError):
    """`matrix verify` could not build, download or probe what it was to prove (exit 2)."""

    exit_code = EXIT_VERIFY_ERROR
    code = "verify-error"


class WrongAnswers(SparkdoctorError):
    """bench measured a server whose answers the correctness gate judged wrong (exit 1; `--allow-wrong`: 0)."""

    exit_code = EXIT_BENCH_WRONG
    code = "wrong-answers"


class AnswersUnchecked(SparkdoctorError):
    """bench had a reference to judge the answers by (--reference-file, the one stored for the model, or the one being
    marked) and could not judge them against it: `unchecked` (the probe or scoring requests failed, the reference could
    not be read) or `unscored` (no log-probabilities) (exit 3, as check's target it could not probe; `--allow-wrong`:
    0)."""

    exit_code = EXIT_BENCH_UNCHECKED
    code = "answers-unchecked"


def describe(exc: BaseException) -> dict[str, object]:
    """Any exception as an `errors` entry (an unexpected one is an internal error, exit 2)."""
    if isinstance(exc, SparkdoctorError):
        return exc.to_dict()
    # Ctrl-C (KeyboardInterrupt) or proc.Interrupted (SIGTERM/SIGHUP, a BaseException carrying signum)
    signum = signal.SIGINT if isinstance(exc, KeyboardInterrupt) else getattr(exc, "signum", None)
    if not isinstance(exc, Exception) and isinstance(signum, int):
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        done = getattr(exc, "done", None)  # what a command had finished when the signal came (fix: an apply)
        return {"code": "interrupted", "type": type(exc).__name__,
                "message": f"interrupted ({name})" + (f"; {done}" if done else ""), "exit_code": 128 + int(signum)}
    return {"code": "internal", "type": type(exc).__name__, "message": error_line(str(exc)), "exit_code": EXIT_USAGE}
