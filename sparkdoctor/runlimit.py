"""The run-wide time limit (`--timeout`) for commands whose work is in this process, not in subprocesses.

`check` spends its time in subprocesses, and proc.set_deadline bounds every one of them. `explain`,
`recipe show` and `audit` spend theirs in Python: parsing a user's YAML or JSON, running regexes over a
log, and (audit) matching a checkpoint's own `re:` patterns, which are vLLM's to define and may backtrack.
`run_limit(seconds)` bounds both: it sets proc's deadline (any subprocess or pipe wait ends by then) and
arms SIGALRM, whose handler raises OutOfTime in the main thread wherever it is (the regex engine checks
for signals, so a backtracking pattern is stopped too).

Nesting is safe: an outer SIGALRM timer (a test harness's hang guard) keeps its handler and the time it
had left, and fires at its own time if that comes first.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Iterator

from sparkdoctor import proc
from sparkdoctor.errors import UsageError


class OutOfTime(UsageError):
    """The run's time limit ran out; the message is one line (exit 2, code "timeout")."""

    code = "timeout"


def check_timeout(seconds: float) -> str | None:
    """Why `seconds` is not a usable --timeout (None: it is)."""
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        return f"--timeout {seconds}: give a number of seconds above 0"
    if seconds > 10**7:  # setitimer's range; and nothing a person waits for
        return f"--timeout {seconds}: give at most {10**7} seconds"
    return None


def refuse_bad_timeout(seconds: float) -> None:
    """UsageError (exit 2, one line) when `seconds` is not a usable --timeout."""
    if problem := check_timeout(seconds):
        raise UsageError(problem)


@contextlib.contextmanager
def run_limit(seconds: float, what: str) -> Iterator[None]:
    """Within this block the work must end in `seconds`; OutOfTime ("<what>: ... --timeout N") otherwise."""
    if problem := check_timeout(seconds):
        raise ValueError(problem)
    start = time.monotonic()
    deadline = start + seconds
    proc.set_deadline(deadline)
    if threading.current_thread() is not threading.main_thread():  # signals reach only the main thread
        try:
            yield
        finally:
            proc.set_deadline(None)
        return

    message = f"{what}: the run's time limit ran out (--timeout {seconds:g} s)"
    previous = signal.getsignal(signal.SIGALRM)
    outer_left, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    outer_at = start + outer_left if outer_left else None

    outer_fired = False

    def alarm(signum, frame):
        nonlocal outer_fired
        now = time.monotonic()
        if now >= deadline - 0.001:
            raise OutOfTime(message)
        if outer_at is not None and now >= outer_at - 0.001:
            outer_fired = True
            _rearm(deadline, None)
            if callable(previous):
                previous(signum, frame)  # the outer guard's turn (it usually raises)
            return
        _rearm(deadline, outer_at)

    signal.signal(signal.SIGALRM, alarm)
    _rearm(deadline, outer_at)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        proc.set_deadline(None)
        if outer_at is not None and not outer_fired:  # give the outer timer back what it had left
            signal.setitimer(signal.ITIMER_REAL, max(0.001, outer_at - time.monotonic()), outer_interval)
        elif outer_fired and outer_interval:  # it had its turn; a repeating one goes on repeating
            signal.setitimer(signal.ITIMER_REAL, outer_interval, outer_interval)
        # a one-shot outer timer that had its turn stays spent: armed again it fired a second time (under load, after
        # the caller had already handled the first)


def _rearm(deadline: float, outer_at: float | None) -> None:
    now = time.monotonic()
    due = min(deadline, outer_at) if outer_at is not None and outer_at > now else deadline
    # after it fires, it fires again every 0.5 s: code that swallows the first exception (a finally, a gc
    # callback) does not end the limit
    signal.setitimer(signal.ITIMER_REAL, max(0.001, due - now), 0.5)
