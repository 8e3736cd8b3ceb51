"""Progress on stderr for the commands that run long (bench, recipe check, rerun, conclusions): the one helper,
light to import (rich is loaded only for a terminal).

A message may carry what a server printed (its last log line while it starts): every control character is escaped
(sparkdoctor.text.one_line) and, on a terminal, rich's markup too, so a log line never reaches the terminal raw (an
escape sequence, a `[/INST]` of a chat template that rich took for a closing tag and failed on). A terminal that
cannot be written (closed, or hung up: EIO) loses the progress, never what the command was doing when it said it."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.markup import escape

from sparkdoctor.text import one_line

PLAIN_PROGRESS_AFTER_S = 15.0  # a plain progress line only once a command has run this long (env overrides)
PLAIN_REPEAT_S = 20.0  # a stage's ticking status (its elapsed seconds in parentheses) as a plain line at most this often
PLAIN_STILL_S = 60.0  # the last plain line said again when nothing else was said for this long (a pip resolution)


@contextlib.contextmanager
def progress_line(enabled: bool = True, command: str = "bench") -> Iterator[Callable[[str], None]]:
    """Progress on stderr (never stdout: JSON owns it): a rich status line on a terminal; otherwise (CI, a
    pipe, a log file) plain lines, `sparkdoctor: [mm:ss] message`, one per stage (a stage's ticking status, its
    seconds in parentheses, once every PLAIN_REPEAT_S; a stage that says nothing, again every PLAIN_STILL_S), starting once the command has run PLAIN_PROGRESS_AFTER_S seconds (SPARKDOCTOR_PROGRESS_AFTER_S; "off" never; a stage said earlier and still running then is named then), so a quick answer or
    a one-line error stays alone while a 20-minute A/B is never silent. `command` names the verb on the terminal's
    status line."""
    if not enabled:
        yield lambda _msg: None
        return
    if sys.stderr is not None and sys.stderr.isatty():  # rich only for a terminal (importing it costs ~0.1 s)
        console = Console(stderr=True)
        if console.is_terminal:
            status = console.status(command)
            with contextlib.suppress(OSError, ValueError):  # a terminal that went away (hung up: EIO) or closed
                status.start()

            def show(msg: str) -> None:
                with contextlib.suppress(OSError, ValueError):  # progress is lost, not the teardown that says it
                    status.update(f"{command}: {escape(one_line(msg))}")

            try:
                yield show
            finally:
                with contextlib.suppress(OSError, ValueError):  # nor the outcome (exit 128+N after SIGHUP)
                    status.stop()
            return
    setting = os.environ.get("SPARKDOCTOR_PROGRESS_AFTER_S", "")
    if setting.strip().lower() == "off":
        yield lambda _msg: None
        return
    try:
        after = float(setting) if setting.strip() else PLAIN_PROGRESS_AFTER_S
    except ValueError:
        after = PLAIN_PROGRESS_AFTER_S
    started = time.monotonic()
    last_stage, last_at, last_msg = "", 0.0, ""
    held: list[str] = []  # the last stage said before `after` seconds: named when the command is still running then
    lock = threading.Lock()
    ended = False

    def write(msg: str, now: float) -> None:
        nonlocal last_stage, last_at, last_msg
        last_stage, last_at, last_msg = msg.split(" (", 1)[0], now, msg  # "starting x (12s): ..." ticks each second within one stage
        minutes, seconds = divmod(int(now - started), 60)
        with contextlib.suppress(OSError, ValueError, AttributeError):  # a full or closed stderr: progress is lost, not the outcome
            sys.stderr.write(f"sparkdoctor: [{minutes:02d}:{seconds:02d}] {one_line(msg)}\n")
            sys.stderr.flush()

    def plain(msg: str) -> None:
        with lock:
            now = time.monotonic()
            if now - started < after:
                held[:] = [msg]
                return
            held.clear()
            if msg.split(" (", 1)[0] == last_stage and now - last_at < PLAIN_REPEAT_S:
                return
            write(msg, now)

    stop = threading.Event()

    def keep_the_log_alive() -> None:
        """A stage said early that is still running once the command has run `after` seconds (a pip resolution
        that says nothing for minutes) is named then, not only when the next stage begins; the last line is said
        again every PLAIN_STILL_S while nothing else is, so a long stage never reads as a hung run."""
        if stop.wait(max(after, 0.0)):
            return
        with lock:
            if held and not ended:
                write(held.pop(), time.monotonic())
        while not stop.wait(PLAIN_STILL_S):
            with lock:
                if last_msg and not ended and time.monotonic() - last_at >= PLAIN_STILL_S:
                    write(last_msg, time.monotonic())

    if math.isfinite(after) and after < 86400:  # nan, inf or a day and more: no timer (nor an overflow in one)
        threading.Thread(target=keep_the_log_alive, daemon=True).start()
    try:
        yield plain
    finally:
        with lock:
            ended = True
        stop.set()
