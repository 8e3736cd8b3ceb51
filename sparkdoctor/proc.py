"""Run a subprocess with a hard timeout and turn every way it can go wrong into data.

A probe that hangs, crashes or floods its output is evidence, never a traceback: callers get a
ProcResult whatever happened and decide what it means. Three process-wide guarantees live here,
because every child sparkdoctor starts goes through this module:

- the run's time budget: `set_deadline()` bounds every wait, whatever timeout its caller asked for;
- bounded output: each stream keeps its head and tail and says how many bytes it dropped (pipes.py);
- no orphans: every child gets its own process group and is registered until reaped, so
  `kill_all()` (at exit, on SIGINT/SIGTERM) takes down every group still alive, and what left its group
  (a daemon: setsid) is adopted and stopped there too (orphans.py).
"""

from __future__ import annotations

import atexit
import contextlib
import locale
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from types import FrameType

from sparkdoctor import orphans, pipes
from sparkdoctor.pipes import HEAD_BYTES, TAIL_BYTES

BUDGET_NOTE = "the run's time budget ran out"
MAX_WAIT = 10.0**6  # seconds (about 11 days; epoll waits at most 2**31 ms): any longer limit is taken as this one


def signal_name(number: int) -> str:
    """SIGSEGV for 11; 'signal 99' for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Interrupted(BaseException):
    """SIGTERM/SIGHUP arrived: unwind like KeyboardInterrupt (which `except Exception` cannot swallow)."""

    def __init__(self, signum: int, done: str | None = None):
        super().__init__(signum)
        self.signum = signum
        self.done = done  # what the command had finished when the signal came (fix: an apply), for the one line


@dataclass
class ProcResult:
    argv: list[str]
    returncode: int | None  # None: it never finished (timeout) or never started
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    start_error: str | None = None  # e.g. "No such file or directory"
    out_of_budget: bool = False  # cut short by the run's deadline, not by its own timeout
    dropped: int = 0  # bytes of output dropped between head and tail (both streams)
    stopped: str | None = None  # killed on purpose by its caller, and why
    limit: float | None = None  # the seconds it was allowed (its timeout, or what the run's deadline left)
    ended: str | None = None  # what ended it, said whole (a container stopped under its exec: targets/container.py)

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
        if self.ended:
            return self.ended
        if self.start_error:
            return f"{name} could not start: {self.start_error}"
        if self.stopped:
            return f"{name} was stopped: {self.stopped}"
        if self.timed_out:
            why = f" ({BUDGET_NOTE})" if self.out_of_budget else ""
            after = self.limit if self.limit is not None else self.seconds  # not the reap's variable tail
            return f"{name} timed out after {after:.1f}s{why}"
        if self.signal:
            return f"{name} was killed by {signal_name(self.signal)}"
        tail = (self.stderr or self.stdout).strip().splitlines()
        last = tail[-1] if tail else "no output"
        return f"{name} exited {self.returncode}: {last[:300]}"


# ---- the run's deadline ---------------------------------------------------------------------------
_deadline: float | None = None  # time.monotonic() value; None: no budget


def set_deadline(at: float | None) -> None:
    """Bound every wait in this process by `at` (a time.monotonic() value); None lifts the bound."""
    global _deadline
    _deadline = at


def time_left() -> float | None:
    """Seconds until the run's deadline (0 when past it); None when there is no deadline."""
    return None if _deadline is None else max(0.0, _deadline - time.monotonic())


# ---- the registry of live children ------------------------------------------------------------------
_starting = 0  # the main thread is between starting a child and registering it
_pending_signal: int | None = None
_live: dict[int, subprocess.Popen[bytes]] = {}
_live_lock = threading.Lock()
_closing = False


def _register(popen: subprocess.Popen[bytes]) -> bool:
    """Track a new child; False (and the child killed) when sparkdoctor is already shutting down."""
    with _live_lock:
        if not _closing:
            _live[popen.pid] = popen
            return True
    _kill_group(popen)
    return False


def _unregister(popen: subprocess.Popen[bytes]) -> None:
    with _live_lock:
        _live.pop(popen.pid, None)


def kill_all() -> int:
    """Kill the process group of every child still registered and refuse new ones, then what they started outside
    their groups (orphans.py, where adopted); the count of groups killed."""
    global _closing
    with _live_lock:
        _closing = True
        alive = list(_live.values())
        _live.clear()
    for popen in alive:
        _kill_group(popen)
    orphans.stop()
    return len(alive)


def stop_all(keep: Collection[int] = ()) -> int:
    """Kill the process group of every child still registered, but those in `keep` (what was running before the work
    that wants this began: a library caller's own daemons), and reap it, new children still allowed; the count killed.
    For what must not run beside a child nobody reads any more (fix's automatic rollback after a signal)."""
    with _live_lock:
        alive = [p for pid, p in _live.items() if pid not in keep]
        for popen in alive:
            del _live[popen.pid]
    for popen in alive:
        _kill_group(popen)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)
    return len(alive)


def live_pids() -> list[int]:
    with _live_lock:
        return sorted(_live)


atexit.register(kill_all)


_seen = (0, 0)  # how many SIGINT/SIGTERM/SIGHUP the handlers below took, and the last one


def signals_seen() -> tuple[int, int]:
    """(how many SIGINT/SIGTERM/SIGHUP arrived so far, the last one): code that may swallow the Interrupted one raised
    (asyncio's transports and callbacks let only KeyboardInterrupt and SystemExit through) compares before and after."""
    return _seen


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP unwind the main thread as Interrupted, so the entry point can kill
    every child and exit 128+signal with one line. Not KeyboardInterrupt: typer turns that into a
    silent exit 130 before the entry point sees it. A signal the parent ignores stays ignored."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        global _pending_signal, _seen
        _seen = (_seen[0] + 1, signum)
        if _starting:  # between fork and registration: raise once the child is registered
            _pending_signal = signum
            return
        raise Interrupted(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread, or not settable here
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, handler)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP that arrive inside wait (in the main thread, where the handlers run) and are raised
    as Interrupted on the way out: for a last clean-up that must finish, e.g. a server's forced teardown."""
    global _starting, _pending_signal
    main = threading.current_thread() is threading.main_thread()
    if main:
        _starting += 1
    try:
        yield
    finally:
        if main:
            _starting -= 1
            if not _starting and _pending_signal is not None:
                signum, _pending_signal = _pending_signal, None
                raise Interrupted(signum)


def interrupted(exc: BaseException) -> tuple[int, str]:
    """After SIGINT (KeyboardInterrupt) or SIGTERM/SIGHUP (Interrupted): kill every child; the exit
    code (128 + signal, the shell's convention) and the one line to print."""
    kill_all()
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    name = signal.Signals(signum).name
    done = exc.done if isinstance(exc, Interrupted) else None
    return 128 + signum, f"interrupted ({name}); every process it started was stopped" + (f"; {done}" if done else "")


# ---- running ---------------------------------------------------------------------------------------
class Running:
    """A started process; result() collects it, killing its group at the deadline."""

    def __init__(self, argv: list[str], popen: subprocess.Popen[bytes] | None, started: float, input: str | None = None,
                 start_error: str | None = None, max_output: tuple[int, int] = (HEAD_BYTES, TAIL_BYTES)):
        self.argv, self.popen, self.started, self.input, self.start_error = argv, popen, started, input, start_error
        self.max_output = max_output

    def result(self, timeout: float) -> ProcResult:
        """Wait until `timeout` seconds after the START (not after this call), or the run's deadline
        if that comes first; never raise."""
        if self.popen is None:
            return ProcResult(self.argv, None, "", "", time.monotonic() - self.started, start_error=self.start_error)
        own = self.started + min(timeout, MAX_WAIT)  # past MAX_WAIT the poller's millisecond count overflows
        until = own if _deadline is None else min(own, _deadline)
        encoding = locale.getpreferredencoding(False)
        out, err = pipes.Capped(*self.max_output), pipes.Capped(*self.max_output)
        data = self.input.encode(encoding, errors="replace") if self.input is not None else None
        try:
            pumped = pipes.pump(self.popen, data, out, err, until)
            finished = bool(pumped)
            if finished:
                try:
                    self.popen.wait(timeout=max(0.0, until - time.monotonic()))
                except subprocess.TimeoutExpired:
                    finished = False
            if not finished or pumped == pipes.EXITED_HOLDING:
                # at the limit, or exited while what it left in its group (a fork bomb's children) holds the pipes:
                # the group goes, its last output is read (briefly), and it is gone when the result is
                _kill_group(self.popen)
                pipes.pump(self.popen, None, out, err, time.monotonic() + 2, eof_only=True)
                if not finished:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.popen.wait(timeout=2)
        except BaseException:
            # A signal (Interrupted, KeyboardInterrupt) unwound the wait: nobody will read this child's result,
            # so it dies now, not at the entry point's kill_all(). What runs while the exception unwinds (fix's
            # rollback) must not race a still-running installer.
            self.cancel()
            raise
        _unregister(self.popen)
        _close(self.popen)
        stdout, stderr = out.text(encoding), err.text(encoding)
        return ProcResult(
            self.argv,
            self.popen.returncode if finished else None,
            stdout,
            stderr,
            time.monotonic() - self.started,
            timed_out=not finished,
            out_of_budget=not finished and until < own,
            dropped=out.dropped + err.dropped,
            limit=max(0.0, until - self.started),
        )

    def kill(self) -> None:
        """Kill its process group from another thread; whoever waits in result() sees it end."""
        if self.popen is not None:
            _kill_group(self.popen)

    def forget(self) -> None:
        """Unregister it, its pipes left open: a process that left its group (setsid) still holds them, and closing a
        pipe under a thread blocked reading it waits for that read forever (the buffer's lock is held)."""
        if self.popen is not None:
            _unregister(self.popen)

    def cancel(self) -> None:
        """Kill it (and its children) and reap it: a started probe that turned out not to be wanted."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            _kill_group(self.popen)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=5)
        _unregister(self.popen)
        _close(self.popen)


def _close(popen: subprocess.Popen[bytes]) -> None:
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            pipes.quiet_close(stream)


child_setup: Callable[[], None] | None = None  # a preexec function for every child while set (fix.pdeath: a parent-death signal)


def start(
    argv: list[str],
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    input: str | None = None,
    max_output: tuple[int, int] = (HEAD_BYTES, TAIL_BYTES),
    pass_fds: tuple[int, ...] = (),
) -> Running:
    """Start argv in its own process group (so a timeout can kill its children too); never raise. `pass_fds`:
    descriptors the child keeps open (bwrap's --seccomp FD)."""
    started = time.monotonic()
    if _closing:
        return Running(argv, None, started, start_error="sparkdoctor is shutting down")
    if _deadline is not None and started >= _deadline:
        return Running(argv, None, started, start_error=f"not started: {BUDGET_NOTE}")
    made: list[subprocess.Popen[bytes]] = []
    try:
        with signals_held():  # a signal between fork and registration is raised once the child is registered
            try:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                    preexec_fn=child_setup,
                    pass_fds=pass_fds,
                )
            except (OSError, ValueError) as exc:  # ValueError: e.g. an embedded NUL in an argument
                return Running(argv, None, started, start_error=getattr(exc, "strerror", None) or str(exc))
            made.append(popen)
            if not _register(popen):
                popen.wait()
                _close(popen)
                return Running(argv, None, started, start_error="sparkdoctor is shutting down")
            return Running(argv, popen, started, input=input, max_output=max_output)
    except Interrupted:
        # the signal came while the child started: nobody will read it, so it dies now, not at the entry
        # point's kill_all(); what runs while the exception unwinds (fix's rollback) must not race it
        for popen in made:
            Running(argv, popen, started).cancel()
        raise


def run(
    argv: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    input: str | None = None,
    max_output: tuple[int, int] = (HEAD_BYTES, TAIL_BYTES),
    pass_fds: tuple[int, ...] = (),
) -> ProcResult:
    """Run argv, kill its whole process group at the deadline, never raise."""
    return start(argv, env=env, cwd=cwd, input=input, max_output=max_output, pass_fds=pass_fds).result(timeout)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(OSError):
            proc.kill()
