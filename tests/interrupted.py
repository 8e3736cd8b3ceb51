"""A real pytest session, interrupted the ways a person or CI interrupts one, for the tests that prove a session
fixture leaves nothing behind (tests/container/test_docker_interrupted.py, tests/fleet/test_ray_interrupted.py).

The session runs one test file of its own (not collected on its own: its name does not start with test_) whose test
writes a JSON line to the FIFO $SD_READY once its fixture is up (the readiness signal), then waits; the test's own
teardown, which runs before the session fixtures', writes a second line and waits too: a teardown slower than the run
is given. Each case then interrupts it:
- `twice-n0`: Ctrl-C to a `-n 0` run, and again during the slow teardown (a person pressing it twice);
- `xdist-controller`: Ctrl-C to the xdist controller only; xdist kills the worker 10 s into its teardown;
- `twice-xdist-worker`: Ctrl-C twice to the xdist worker.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAFETY_S = 300  # a hang guard for each wait, never a verdict: each step takes seconds

# (workers, who gets Ctrl-C, a second Ctrl-C during the slow teardown)
CASES = {
    "twice-n0": (["-n", "0"], "main", True),
    "xdist-controller": (["-n", "1"], "main", False),
    "twice-xdist-worker": (["-n", "1"], "worker", True),
}


class _Lines:
    """JSON lines from the session's FIFO; None once its writer is gone or the pytest ended without writing."""

    def __init__(self, fifo: Path, session: subprocess.Popen[bytes]):
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.ended = os.pidfd_open(session.pid)
        self.buffer = b""

    def next(self) -> dict[str, object] | None:
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd, self.ended], [], [], SAFETY_S)
            assert ready, f"no word from the interrupted session in {SAFETY_S} s"
            try:
                chunk: bytes | None = os.read(self.fd, 4096)
            except BlockingIOError:  # a writer, but nothing written yet
                chunk = None
            if chunk:
                self.buffer += chunk
            elif chunk == b"" and self.fd in ready or self.ended in ready:  # its writer gone, or the pytest ended
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        os.close(self.fd)
        os.close(self.ended)


@dataclass
class Interrupted:
    info: dict[str, object]  # what the session's test said when its fixture was up
    output: str  # the session's output


def say(data: dict[str, object], _fifo: list[int] = []) -> None:  # noqa: B006 (the FIFO's write end, kept open)
    """(in the interrupted session) one JSON line to the outer test; the FIFO stays open until this process ends."""
    if not _fifo:
        _fifo.append(os.open(os.environ["SD_READY"], os.O_WRONLY))
    os.write(_fifo[0], (json.dumps(data) + "\n").encode())


def wait_for_exit(pid: int) -> None:
    """Until process `pid` (not a child) has ended: a keeper finishing its clean-up."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        assert select.select([fd], [], [], SAFETY_S)[0], f"process {pid} did not end in {SAFETY_S} s"
    finally:
        os.close(fd)


def interrupt(case: str, session_file: str, tmp_path: Path, skip_when: str, on_ready=None) -> Interrupted:
    """Run `session_file` in a pytest of its own, interrupt it as `case` says, and return once it has ended.
    `skip_when`: the text of the session's own skip reason (the fixture cannot run here), which skips the caller.
    `on_ready(info)` runs once the fixture is up (to note what must be gone afterwards)."""
    workers, whom, twice = CASES[case]
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "pytest", *workers, "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "bt"), "-q",
            "-rs", session_file]
    out = tmp_path / "session.out"
    # a session of its own, not a part of this one's: under xdist this process is a worker, and a session that took
    # itself for one (PYTEST_XDIST_WORKER) would fail its grouped test as a test that lost its group
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "PYTEST_CURRENT_TEST"))}
    with open(out, "wb") as sink:
        session = subprocess.Popen(argv, cwd=REPO, env={**env, "SD_READY": str(fifo)}, stdout=sink,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    lines = _Lines(fifo, session)
    try:
        info = lines.next()
        if info is None:
            session.wait(timeout=SAFETY_S)
            text = out.read_text(errors="replace")
            if skip_when in text:
                pytest.skip(text.strip().splitlines()[-1])
            raise AssertionError(f"the session never got its fixture up:\n{text[-3000:]}")
        if on_ready is not None:
            on_ready(info)
        target = session.pid if whom == "main" else int(str(info["pid"]))
        os.kill(target, signal.SIGINT)
        said = lines.next()
        assert said is not None and "teardown" in said, f"the session did not reach its teardown: {said}"
        if twice:
            os.kill(target, signal.SIGINT)
        session.wait(timeout=SAFETY_S)
        return Interrupted(info, out.read_text(errors="replace"))
    finally:
        lines.close()
        if session.poll() is None:
            os.killpg(session.pid, signal.SIGKILL)
            session.wait()


@pytest.fixture
def slow_teardown():
    """(in the interrupted session) a teardown that says it has begun, then waits for a signal or xdist's kill."""
    yield
    say({"teardown": os.getpid()})
    while True:
        signal.pause()
