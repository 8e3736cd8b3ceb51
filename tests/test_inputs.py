"""The two mechanisms every file input and in-process command share: sparkdoctor/inputs.py (read a regular
file, or a pipe with a writer; never block on a FIFO) and sparkdoctor/runlimit.py (the run-wide --timeout for
work done in this process, nested safely inside another SIGALRM timer)."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from sparkdoctor import proc
from sparkdoctor.inputs import (
    TooBig,
    UnreadableInput,
    open_regular,
    read_bytes,
    read_text,
)
from sparkdoctor.runlimit import OutOfTime, run_limit


def test_a_regular_file_is_read_and_its_limit_kept(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    assert read_bytes(path) == b"x" * 1000 and read_bytes(path, 1000) == b"x" * 1000
    with pytest.raises(TooBig, match="larger than 999 bytes"):
        read_bytes(path, 999)
    with open_regular(path) as fh:
        assert fh.read(3) == b"xxx"
    (tmp_path / "u").write_bytes(b"\xff")
    with pytest.raises(UnicodeDecodeError):
        read_text(tmp_path / "u")
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "missing")


def test_a_fifo_is_never_waited_on(tmp_path, monkeypatch):
    from sparkdoctor import inputs

    # a wait would be the pipe's limit, made 600 s here: the bound below is far from it and far from a loaded machine's
    # few milliseconds stretched (it was 5 s against the 120 s limit)
    monkeypatch.setattr(inputs, "PIPE_SECONDS", 600.0)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(UnreadableInput, match="is a FIFO with no writer"):
        read_bytes(fifo, stream=True)
    with pytest.raises(UnreadableInput, match=r"is a FIFO \(named pipe\), not a regular file"):
        read_bytes(fifo)
    with pytest.raises(UnreadableInput, match="not a regular file"):
        open_regular(fifo)
    assert time.monotonic() - started < 300


def test_a_fifo_with_a_writer_is_read_as_a_stream(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer open without blocking
    writer = os.open(fifo, os.O_WRONLY)
    os.write(writer, b"hello\n")
    os.close(writer)
    try:
        # our own open of the same FIFO sees the data the writer left and then its EOF
        assert read_bytes(f"/dev/fd/{reader}", stream=True) == b"hello\n"
    finally:
        os.close(reader)


def _writer(chunks: int, size: int, pause: float) -> tuple[str, int]:
    """A pipe with a live writer (a thread) that writes `chunks` of `size` bytes, `pause` s apart, then closes it."""
    import threading

    r, w = os.pipe()

    def write() -> None:
        try:
            for _ in range(chunks):
                os.write(w, b"{" * size)
                time.sleep(pause)
        except BrokenPipeError:
            pass
        finally:
            os.close(w)

    threading.Thread(target=write, daemon=True).start()
    return f"/dev/fd/{r}", r


def test_a_pipe_that_trickles_ends_outside_any_run_limit(monkeypatch):
    """`diff <(...)`, `fleet check --inventory <(...)` run with no run limit: a writer that sends a byte now and
    then kept them waiting forever (poll woke at each byte). Now the read ends after PIPE_SECONDS."""
    from sparkdoctor import inputs

    monkeypatch.setattr(inputs, "PIPE_SECONDS", 0.5)
    path, r = _writer(chunks=100, size=1, pause=0.05)  # 5 s of trickle, past the 0.5 s
    try:
        with pytest.raises(UnreadableInput, match="did not finish in 0.5 s"):
            read_bytes(path, stream=True)
    finally:
        os.close(r)


def test_a_pipe_read_with_no_limit_of_its_callers_is_capped(monkeypatch):
    """A snapshot read from a pipe (`--facts <(yes)`) had no byte limit: it filled memory."""
    from sparkdoctor import inputs

    monkeypatch.setattr(inputs, "STREAM_BYTES", 1024 * 1024)
    path, r = _writer(chunks=3, size=1024 * 1024, pause=0)
    try:
        with pytest.raises(TooBig, match="larger than 1 MiB"):
            read_bytes(path, stream=True)
    finally:
        os.close(r)



@pytest.mark.parametrize("path, why", [("/dev/null", "a device"), ("/", "is a directory")])
def test_devices_and_folders_are_refused(path, why):
    with pytest.raises(UnreadableInput, match=why) as info:
        read_bytes(path, stream=True)
    assert isinstance(info.value, OSError) and info.value.strerror and "\n" not in info.value.strerror


def test_the_run_limit_stops_a_backtracking_regex_and_sets_the_subprocess_deadline():
    started = time.process_time()  # CPU seconds: the regex backtracks for hours unless stopped
    with pytest.raises(OutOfTime, match=r"test: the run's time limit ran out \(--timeout 0.3 s\)"):
        with run_limit(0.3, "test"):
            assert proc.time_left() is not None and proc.time_left() <= 0.3
            re.match(r"(a|aa)+$", "a" * 80 + "b")
    assert time.process_time() - started < 10
    assert proc.time_left() is None and signal.getitimer(signal.ITIMER_REAL)[0] == 0


class Hung(Exception):
    pass


def test_an_outer_timer_keeps_its_handler_and_its_time():
    def outer(signum, frame):
        raise Hung()

    previous = signal.signal(signal.SIGALRM, outer)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Hung):  # the outer guard fires first, inside the inner limit
            with run_limit(30, "inner"):
                time.sleep(5)
        # a one-shot outer timer that had its turn is spent: it was armed again for 1 ms and fired a second time
        # (CI, under load, after the first Hung was already handled)
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        signal.setitimer(signal.ITIMER_REAL, 600)  # far from the inner 30 s, and from a stall of a busy machine
        with run_limit(30, "inner"):
            pass
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 500 < left <= 600 and signal.getsignal(signal.SIGALRM) is outer  # given back
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("args", [["check", "--facts", "{fifo}"], ["diff", "{fifo}", "{snap}"],
                                  ["check", "--facts", "{snap}", "--matrix", "{fifo}"]])
def test_snapshots_and_matrices_named_by_a_fifo_are_refused_not_waited_on(tmp_path, args):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    snap = root / "tests" / "data" / "facts" / "gb10-broken.json"
    argv = [a.format(fifo=fifo, snap=snap) for a in args]
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", *argv], capture_output=True, text=True, timeout=120, cwd=root)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "FIFO" in p.stderr, p.stderr


def test_a_snapshot_from_a_pipe_with_a_writer_is_read():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    read, write = os.pipe()
    os.write(write, (root / "tests" / "data" / "facts" / "gb10-broken.json").read_bytes())
    os.close(write)
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", f"/dev/fd/{read}", "-f", "json"],
                       capture_output=True, text=True, timeout=120, cwd=root, pass_fds=(read,))
    os.close(read)
    assert p.returncode in (0, 1) and '"exit_code"' in p.stdout, p.stderr


@pytest.mark.parametrize("args", [["check", "--facts", "{big}"], ["diff", "{big}", "{snap}"]])
def test_a_snapshot_file_larger_than_a_snapshot_is_refused_not_read_whole(tmp_path, args):
    """A sparse 8 GB file as --facts or a diff side was read whole into memory (MemoryError under a 3 GB limit, an OOM
    without one): the 256 MiB bound applied to pipes only. A file is bounded the same way now."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(8 * 1024**3)  # sparse: no disk is used
    snap = root / "tests" / "data" / "facts" / "gb10-broken.json"
    argv = [a.format(big=big, snap=snap) for a in args]
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", *argv], capture_output=True, text=True, timeout=300, cwd=root)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "larger than 256 MiB" in p.stderr, p.stderr


def test_a_regular_file_over_the_limit_is_refused_by_its_size_before_a_byte_is_read(tmp_path):
    """A sparse 20 GB file as `history --import` read 256 MiB (4 s, 289 MB of memory) before it was refused: a regular
    file says its size, so the refusal comes first. A file within the limit is read as before."""
    import time

    from sparkdoctor.inputs import TooBig, read_bytes

    big = tmp_path / "sparse.json"
    with open(big, "wb") as f:
        f.truncate(20 * 1024**3)
    started = time.process_time()
    with pytest.raises(TooBig):
        read_bytes(big, 256 * 1024**2)
    assert time.process_time() - started < 0.5  # reading 256 MiB of zeros took seconds of CPU
    small = tmp_path / "small.json"
    small.write_bytes(b"{}")
    assert read_bytes(small, 2) == b"{}"
    with pytest.raises(TooBig):
        read_bytes(small, 1)


def test_a_kernel_file_is_known_by_its_tree_and_by_its_file_system_mounted_elsewhere(tmp_path, monkeypatch):
    """/proc's files are "regular files" whose read can wait for the kernel (/proc/kmsg); a bind mount of /proc
    elsewhere (a container's /host/proc) is the same file system: one device."""
    from sparkdoctor import inputs

    (tmp_path / "link").symlink_to("/proc/self/environ")
    assert inputs.kernel_file(tmp_path / "link") == os.path.realpath("/proc/self/environ")
    assert inputs.kernel_file(tmp_path / "missing") is None
    plain = tmp_path / "plain.yaml"
    plain.write_text("a: 1\n")
    assert inputs.kernel_file(plain) is None
    (tmp_path / "tree").mkdir()  # stands for /proc: a file on its device, under another path, is on that file system
    monkeypatch.setattr(inputs, "KERNEL_TREES", (str(tmp_path / "tree"),))
    assert inputs.kernel_file(plain) == str(plain)
