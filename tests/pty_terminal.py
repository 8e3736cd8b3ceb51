"""The real CLI at a real terminal: a pseudo-terminal of a given size (TIOCSWINSZ) as its stdin, stdout and stderr,
read with a time limit and a byte cap. What a person sees, less the escape codes (colour, the status line's erasing)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CAP = 4 << 20
"""Bytes read from the terminal at most: a runaway output fails the test instead of filling the memory."""


@dataclass(frozen=True)
class Seen:
    code: int
    text: str
    """What the terminal showed, escape codes removed, `\\r\\n` as `\\n`."""

    @property
    def lines(self) -> list[str]:
        # a status line is drawn, then erased with `\r` + ESC[2K: only what follows the last `\r` stays on screen
        return [line.rsplit("\r", 1)[-1] for line in self.text.split("\n")]


def at_terminal(argv: Sequence[str], columns: int, env: dict[str, str], cwd: str | None = None,
                timeout: float = 180) -> Seen:
    """Run `argv` with a pseudo-terminal `columns` wide (and no COLUMNS or LINES in `env`, so it is the terminal's
    own size that counts)."""
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    main, child = os.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    try:
        p = subprocess.Popen(list(argv), stdin=child, stdout=child, stderr=child, env=env, cwd=cwd, close_fds=True,
                             start_new_session=True)
    finally:
        os.close(child)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and len(out) < CAP:
            ready, _, _ = select.select([main], [], [], 0.5)
            if not ready:
                if p.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            out += chunk
        code = p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
        os.close(main)
    assert len(out) < CAP, f"{argv}: more than {CAP} bytes at the terminal"
    return Seen(code, ESCAPES.sub("", out.decode("utf-8", "replace")).replace("\r\n", "\n"))
