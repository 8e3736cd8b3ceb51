"""An env file (KEY=VALUE lines, as docker --env-file and systemd EnvironmentFile read them) and a
Target wrapper that runs every script with it, so `check` inside `fix` sees what the server sees.

Its lines end where both of those readers end them, at `\n` (a `\r` before it, or at the end, is dropped as docker's
line scanner drops it and systemd reads it as an empty line end), never at the other breaks str.splitlines knows (a
form feed, `\v`, `\x1c`-`\x1e`, `\x85`, `\u2028`, `\u2029` are part of a value to both). A `\r` inside a line is
refused: docker keeps it in the value, systemd ends the line there. fix's edits (edits.set_env, unset_env) split
the file with the same `env_lines`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.fix.interface import FixError
from sparkdoctor.inputs import read_text
from sparkdoctor.targets.local import Target

MAX_ENV_FILE = 1024 * 1024
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")
_INNER_CR = re.compile(r"\r(?!\n|\Z)")
INNER_CR_WHY = ("line {} holds a carriage return inside it, which docker's --env-file reads as part of the value and "
                "systemd as a line end: remove it")


def env_lines(text: str) -> list[str]:
    """The lines of an env file with their endings (`\n`, `\r\n`, or none for the last), split at `\n` only."""
    return [ln for ln in re.split(r"(?<=\n)", text) if ln]


def inner_cr_line(text: str) -> int | None:
    """The number of the first line that holds a `\r` not at its end: docker and systemd read it differently."""
    m = _INNER_CR.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def read_env_file(path: Path) -> dict[str, str]:
    try:
        text = read_text(path, MAX_ENV_FILE)  # a regular file only, bounded: never /dev/zero or a FIFO
    except (OSError, UnicodeDecodeError) as exc:
        raise FixError(f"{path}: cannot read the env file: {getattr(exc, 'strerror', None) or exc}") from None
    if (line_no := inner_cr_line(text)) is not None:
        raise FixError(f"{path}: {INNER_CR_WHY.format(line_no)}")
    out = {}
    for line in env_lines(text):
        line = line.removesuffix("\n").removesuffix("\r")
        m = _LINE.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        value = m.group(2).strip()
        if value[:1] in ("'", '"'):
            try:
                value = shlex.split(value)[0] if value else ""
            except ValueError:
                value = value.strip("'\"")
        out[m.group(1)] = value
    return out


@dataclass
class EnvFileTarget:
    """`inner` with the env file's variables set for every script it runs (read again each time)."""

    inner: Target
    env_file: Path

    @property
    def kind(self) -> str:
        return self.inner.kind

    def __getattr__(self, name: str) -> Any:  # python, chosen_by, ...: the inner target's
        return getattr(self.inner, name)

    def describe(self) -> dict[str, object]:
        return {**self.inner.describe(), "env_file": str(self.env_file)}

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        return {**read_env_file(self.env_file), **(env or {})}

    def start_script(self, script: Path, args: list[str], env: dict[str, str] | None = None) -> proc.Running:
        return self.inner.start_script(script, args, self._env(env))

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None) -> proc.ProcResult:
        return self.inner.run_script(script, args, timeout, self._env(env))
