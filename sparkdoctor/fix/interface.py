"""The shapes every stage of `fix` shares: its errors, and the two interfaces (Installer, Action).

A FixError is one line for the user. A Refusal is a FixError that a flag can lift: it says which.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_FIX_FAILED, EXIT_FIX_REFUSED, EXIT_USAGE
from sparkdoctor.text import one_line


class FixError(SparkdoctorError):
    """Why `fix` cannot go on, in one line."""

    exit_code = EXIT_FIX_FAILED
    code = "fix-failed"

    def __init__(self, message: str):
        super().__init__(one_line(message))


class DefinitionError(FixError):
    """A malformed fix file: names the file and the field."""

    exit_code = EXIT_USAGE
    code = "fix-definition"


class NoJournal(FixError):
    """`--rollback ID` of a journal that does not exist (or none at all): a usage error, nothing was touched."""

    exit_code = EXIT_USAGE
    code = "no-journal"


class Refusal(FixError):
    """Something a person would not want done silently; `how` says how to say yes (None: no way)."""

    exit_code = EXIT_FIX_REFUSED
    code = "refused"

    def __init__(self, message: str, how: str | None = None):
        super().__init__(message + (f" (to allow it: {how})" if how else ""))
        self.how = how


@dataclass
class Resolution:
    """What an installer's dry run says one call would do: name -> version after; removed names."""

    installs: dict[str, str] = field(default_factory=dict)
    removes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"installs": dict(sorted(self.installs.items())), "removes": dict(sorted(self.removes.items()))}


class Installer(ABC):
    """The target's own installer. Every call has a timeout and goes through sparkdoctor.proc."""

    name: str

    @abstractmethod
    def dry_run(self, requirements: list[str], *, force_reinstall: bool = False, no_deps: bool = False,
                ignore_installed: bool = False, constraints: list[str] | None = None, env: dict[str, str] | None = None) -> Resolution: ...

    @abstractmethod
    def install(self, requirements: list[str], *, force_reinstall: bool = False, no_deps: bool = False,
                offline_from: str | None = None, constraints: list[str] | None = None) -> None: ...

    @abstractmethod
    def uninstall(self, names: list[str]) -> None: ...

    @abstractmethod
    def download(self, requirements: list[str], dest: str) -> dict[str, str | None]: ...


class Action(ABC):
    """One planned change. describe() is what the plan shows; the apply stage runs it."""

    kind: str
    why: list[str]  # the finding ids that ask for it

    @abstractmethod
    def describe(self) -> list[str]: ...

    @abstractmethod
    def to_dict(self) -> dict[str, Any]: ...
