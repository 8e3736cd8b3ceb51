"""The entry point commands/matrix.py's `matrix verify` still calls: the command itself is
sparkdoctor/commands/matrix_verify.py (options -> run -> Result -> emit), the modes' work sparkdoctor/verify/modes.py.

Kept only until commands/matrix.py calls `sparkdoctor.commands.matrix_verify.verify_command` itself (then this module
goes: a pipeline must not reach up into the commands)."""

from __future__ import annotations

from pathlib import Path


def run_verify(entry_id: str | None, keep: bool, matrix_path: Path | None, fmt: str, kind: str = "all",
               bisect_id: str | None = None, latest: bool = False, bounds: bool = False, stacks: bool = False) -> int:
    """The exit code of one `matrix verify` invocation; output already written."""
    from sparkdoctor.commands.matrix_verify import verify_command

    return verify_command(entry_id, keep, matrix_path, fmt, kind, bisect_id, latest, bounds, stacks)
