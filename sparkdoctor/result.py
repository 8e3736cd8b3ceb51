"""What every command returns: one typed `Result`, and the vocabulary of output formats.

A command's `run(options)` builds a Result; `sparkdoctor.emit.emit` is the only function that turns it into text on
stdout or a file. Every JSON document starts with the same header (`header()`); the document's own keys follow it,
unchanged, so consumers that read them keep working. docs/json.md describes each kind.

Imports nothing heavy: `check` builds one on its hot path.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from sparkdoctor import __version__
from sparkdoctor.errors import SparkdoctorError, describe
from sparkdoctor.exitcodes import EXIT_OK

D = TypeVar("D", covariant=True)
"""The document's class: a Result[PlanDocument] is a Result[FixDocument] (a document is never replaced)."""

ENVELOPE_VERSION = 1
"""The version of the header every JSON document carries (docs/json.md; CHANGELOG.md records each change)."""


class Format(str, enum.Enum):
    """Every output format any command writes. A command declares the subset it renders."""

    console = "console"
    json = "json"
    junit = "junit"
    markdown = "markdown"
    sarif = "sarif"
    github = "github"
    forum = "forum"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: str | Format, allowed: tuple[Format, ...]) -> Format:
        """The member named `value` if the command renders it; UsageError (one line, the choices) if not."""
        from sparkdoctor.errors import UsageError

        try:
            chosen = cls(value)
        except ValueError:
            chosen = None
        if chosen is None or chosen not in allowed:
            raise UsageError(f"--format {value}: choose one of {', '.join(f.value for f in allowed)}")
        return chosen


@dataclass
class Result(Generic[D]):
    """A command's answer: its document (a typed object whose class has a view) and how the process ends."""

    command: str
    """The verb (and subcommand) that made it: "check", "matrix list", "fix"."""
    kind: str
    """The document kind: the JSON `kind` (unless the document names its own)."""
    data: D
    """The document the renderers draw: a report, a comparison, a run (sparkdoctor/views/ keys views by its class)."""
    exit_code: int = EXIT_OK
    """The documented exit code (sparkdoctor/exitcodes.py) the process ends with."""
    errors: list[dict[str, object]] = field(default_factory=list)
    """Errors that decided the exit code, each as `SparkdoctorError.to_dict()` (code, type, message, exit_code)."""
    notes: list[str] = field(default_factory=list)
    """Warnings for stderr (one line each); never part of the document."""
    verbose: bool = False
    """The console view's verbosity (`-v`): a rendering choice, not data."""

    def fail(self, error: SparkdoctorError | BaseException, exit_code: int | None = None) -> Result[D]:
        """Record `error`, and end with its exit code (or the one given)."""
        entry = describe(error)
        self.errors.append(entry)
        self.exit_code = exit_code if exit_code is not None else int(str(entry["exit_code"]))
        return self


def header(command: str, kind: str, exit_code: int, errors: list[dict[str, object]]) -> dict[str, object]:
    """The keys every JSON document starts with."""
    return {"sparkdoctor": __version__, "envelope": ENVELOPE_VERSION, "command": command, "kind": kind,
            "exit_code": exit_code, "errors": list(errors)}


def with_header(result: Result[object], document: dict[str, object]) -> dict[str, object]:
    """`document` behind the common header. The document keeps every key and value it had, except that the
    header's `exit_code` and `errors` are the run's (for `check` they are the same values as before)."""
    out = header(result.command, str(document.get("kind", result.kind)), result.exit_code, result.errors)
    out.update((key, value) for key, value in document.items() if key not in ("exit_code", "errors"))
    return out


def error_document(command: str, error: BaseException, exit_code: int) -> dict[str, object]:
    """The JSON document of a command that failed before it had anything else to say."""
    return header(command, "error", exit_code, [describe(error)])
