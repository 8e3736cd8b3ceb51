"""The last log line an error quotes is what the server's terminal would show.

A progress bar redraws itself with carriage returns: a finished bar is one line holding every state, and the error
quoted its first 300 characters (`0% Completed | 0/4`), not its last. A bar still being drawn (no newline yet, as a
server stuck loading its weights leaves it) was not read at all: the error quoted the line before it. A real pipe."""

from __future__ import annotations

import os

from sparkdoctor.serve.logpump import LogPump

BAR = "".join(f"\rLoading safetensors checkpoint shards: {p:3d}% Completed | {p // 25}/4" for p in range(0, 101, 5))


def _pump(tmp_path):
    read_end, write_end = os.pipe()
    pump = LogPump(tmp_path / "server.log", [])
    pump.start(os.fdopen(read_end, "rb"))
    return pump, os.fdopen(write_end, "wb", buffering=0)


def test_a_finished_progress_bar_is_quoted_at_its_last_state(tmp_path):
    pump, out = _pump(tmp_path)
    out.write(f"INFO starting\n{BAR}\n".encode())
    out.close()
    assert pump.join(60)
    assert pump.last_line() == "Loading safetensors checkpoint shards: 100% Completed | 4/4"
    assert BAR.encode() in (tmp_path / "server.log").read_bytes()  # the log keeps every byte as printed


def test_a_bar_still_being_drawn_is_the_last_line(tmp_path):
    pump, out = _pump(tmp_path)
    out.write(b"INFO loading the weights\n\rLoading safetensors checkpoint shards:  50% Completed | 2/4")
    for _ in range(10_000):  # the pump reads in a thread: wait until it took what was written (a bounded safety net)
        if "50%" in pump.last_line():
            break
        os.sched_yield()
        pump.join(0.01)
    assert pump.last_line() == "Loading safetensors checkpoint shards:  50% Completed | 2/4"
    pump.add("[sparkdoctor] a note")  # a line after it is newer
    assert pump.last_line() == "[sparkdoctor] a note"
    out.close()
    assert pump.join(60)
    assert pump.lines == 3  # the unfinished line is kept when the stream ends
