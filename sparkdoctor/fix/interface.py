"""The shapes every stage of `fix` shares: its errors (each carrying its exit code), and the Installer
interface.

A FixError is one line for the user. Its class says what happened to the target, and so which exit
code it gets (sparkdoctor/exitcodes.py): UnchangedError (6) and its kin changed nothing; a Refusal
(4) is something a flag can lift or a journal that is not trusted; a plain FixError (5) is an apply
that failed and was rolled back.
"""

from __future__ import annotations

import signal
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from sparkdoctor.errors import OneLine
from sparkdoctor.exitcodes import (
    EXIT_FIX_FAILED,
    EXIT_FIX_REFUSED,
    EXIT_FIX_UNCHANGED,
    EXIT_USAGE,
)
from sparkdoctor.vocab import Word


class StepKind(Word):
    """What one plan step does to the target (Step.op): the key of the action that executes it
    (sparkdoctor.fix.actions), of the journal's step rows and of the plan's rendering. The words are the plan's
    JSON and journal values."""

    edit = "edit"  # write a file's new text (a pin file, an env file, a recipe)
    uninstall = "uninstall"  # remove these dists
    install = "install"  # these requirements in one resolver call, with constraint lines
    restore = "restore"  # force-reinstall exact versions, no dependencies

    @property
    def changes_packages(self) -> bool:
        return self is not StepKind.edit


class ActionKind(Word):
    """The fixed vocabulary of a fix file's actions (fixes/<id>.toml `kind`; sparkdoctor.fix.definitions checks each
    one's fields): what the plan builder turns into steps, and the word each step carries (Step.kind) into the plan's
    JSON, the journal and the rendering."""

    install = "install"
    uninstall = "uninstall"
    reinstall_family = "reinstall-family"
    restore_files = "restore-files"
    pin = "pin"
    set_env = "set-env"
    unset_env = "unset-env"
    add_flag = "add-flag"
    drop_flag = "drop-flag"


class FixError(OneLine):
    """Why `fix` cannot go on, in one line."""

    exit_code: int = EXIT_FIX_FAILED
    code: str = "fix-failed"


def failure_text(exc: BaseException) -> str:
    """What stopped an action, in words: a FixError's line, `interrupted (SIGINT)` for Ctrl-C or a signal (never the
    bare signal number), else the exception's type and text."""
    if isinstance(exc, FixError):
        return str(exc)
    signum = getattr(exc, "signum", signal.SIGINT if isinstance(exc, KeyboardInterrupt) else None)
    if isinstance(signum, int):
        try:
            return f"interrupted ({signal.Signals(signum).name})"
        except ValueError:
            return f"interrupted (signal {signum})"
    return f"{type(exc).__name__}: {exc}"


class DefinitionError(FixError):
    """A malformed fix file: names the file and the field."""

    exit_code = EXIT_USAGE
    code = "fix-definition"


class Refusal(FixError):
    """Something a person would not want done silently; the line says how to say yes, where there is a way."""

    exit_code = EXIT_FIX_REFUSED
    code = "fix-refused"


class UnchangedError(FixError):
    """fix stopped before it changed anything: a plan that cannot be made or resolved, an index that
    cannot be reached, a journal that cannot be written (a full disk), a lock another fix holds."""

    exit_code = EXIT_FIX_UNCHANGED
    code = "fix-unchanged"


class ResolutionError(UnchangedError):
    """The installer's dry run found no set of versions (it names the conflicting requirements)."""

    code = "fix-resolution"


class JournalError(Refusal):
    """A journal that is not trusted (damaged, half-written after changes, saved files that cannot
    restore): nothing is done from it."""

    code = "fix-journal"


class NoSuchJournal(FixError):
    """`fix --rollback ID` of a journal that does not exist: a usage error."""

    exit_code = EXIT_USAGE
    code = "fix-no-such-journal"


@dataclass
class Resolution:
    """What an installer's dry run says one call would do: name -> version after."""

    installs: dict[str, str] = field(default_factory=dict)


class Installer(ABC):
    """The target's own installer. Every call has a timeout and goes through sparkdoctor.proc."""

    name: str

    @abstractmethod
    def dry_run(self, requirements: list[str], *, no_deps: bool = False, ignore_installed: bool = False,
                constraints: list[str] | None = None, env: dict[str, str] | None = None,
                offline_from: str | None = None) -> Resolution: ...

    @abstractmethod
    def install(self, requirements: list[str], *, force_reinstall: bool = False, no_deps: bool = False,
                offline_from: str | None = None, constraints: list[str] | None = None) -> None: ...

    @abstractmethod
    def uninstall(self, names: list[str]) -> None: ...

    @abstractmethod
    def download(self, requirements: list[str], dest: str) -> dict[str, str | None]: ...

    def describe(self) -> str:
        """The installer as the plan names it (pip with its version, uv, a container's pip)."""
        return self.name

    def set_aside(self) -> list[str]:
        """The plan's notes on the user's installer settings this installer runs without."""
        return []
