"""Run a subprocess with a hard timeout and turn every way it can go wrong into data.

A probe that hangs or crashes is evidence, never a traceback: callers get a ProcResult whatever
happened and decide what it means.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass


@dataclass
class ProcResult:
    argv: list[str]
    returncode: int | None  # None: it never finished (timeout) or never started
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    start_error: str | None = None  # e.g. "No such file or directory"

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def signal(self) -> int | None:
        """The signal that killed the process (e.g. 11 for a segfault), if any."""
        if self.returncode is not None and self.returncode < 0:
            return -self.returncode
        return None

    def describe_failure(self) -> str:
        """One line saying why this did not succeed."""
        name = os.path.basename(self.argv[0]) if self.argv else "?"
        if self.start_error:
            return f"{name} could not start: {self.start_error}"
        if self.timed_out:
            return f"{name} timed out after {self.seconds:.1f}s"
        if self.signal:
            try:
                signame = signal.Signals(self.signal).name
            except ValueError:
                signame = f"signal {self.signal}"
            return f"{name} was killed by {signame}"
        tail = (self.stderr or self.stdout).strip().splitlines()
        last = tail[-1] if tail else "no output"
        return f"{name} exited {self.returncode}: {last[:300]}"


class Running:
    """A started process; result() collects it, killing its group at the deadline."""

    def __init__(self, argv: list[str], popen: subprocess.Popen | None, started: float, input: str | None = None,
                 start_error: str | None = None):
        self.argv, self.popen, self.started, self.input, self.start_error = argv, popen, started, input, start_error

    def result(self, timeout: float) -> ProcResult:
        """Wait until `timeout` seconds after the START (not after this call); never raise."""
        if self.popen is None:
            return ProcResult(self.argv, None, "", "", time.monotonic() - self.started, start_error=self.start_error)
        remaining = max(0.0, timeout - (time.monotonic() - self.started))
        try:
            out, err = self.popen.communicate(input=self.input, timeout=remaining)
            return ProcResult(self.argv, self.popen.returncode, out, err, time.monotonic() - self.started)
        except subprocess.TimeoutExpired:
            _kill_group(self.popen)
            try:
                out, err = self.popen.communicate(timeout=2)
            except subprocess.TimeoutExpired:
                out, err = "", ""
            return ProcResult(self.argv, None, out or "", err or "", time.monotonic() - self.started, timed_out=True)


    def cancel(self) -> None:
        """Kill it (and its children) and reap it: a started probe that turned out not to be wanted."""
        if self.popen is not None and self.popen.poll() is None:
            _kill_group(self.popen)
            self.popen.communicate()


def start(
    argv: list[str],
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    input: str | None = None,
) -> Running:
    """Start argv in its own process group (so a timeout can kill its children too); never raise."""
    started = time.monotonic()
    try:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return Running(argv, None, started, start_error=exc.strerror or str(exc))
    return Running(argv, popen, started, input=input)


def run(
    argv: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    input: str | None = None,
) -> ProcResult:
    """Run argv, kill its whole process group at the deadline, never raise."""
    return start(argv, env=env, cwd=cwd, input=input).result(timeout)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
