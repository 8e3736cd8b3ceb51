"""Memory sampled through a launched server's life (serve/memwatch.py), against real processes: the high-water mark
it keeps against the kernel's own (VmHWM of every process of the group, read from /proc by the test), and the
series bounded however long the run."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sparkdoctor.serve import launch, memwatch
from sparkdoctor.serve.groups import members
from tests.serve.test_launch_fast import fake

HOLD_MIB = 200


def vm(pid: int, key: str) -> int:
    """VmHWM or VmRSS of a live process in bytes, as the kernel reports it."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} for pid {pid}")


def test_the_high_water_mark_is_the_kernels_within_five_percent(tmp_path):
    """A server that takes 200 MiB before it listens: once ready, the launcher's high-water mark of the group is
    within 5% under the sum of the kernel's VmHWM of its processes (a sum of per-process peaks: what the group's
    peak cannot exceed) and holds the 200 MiB."""
    recipe = fake("ready", env={"FAKE_SERVER_HOLD_MIB": str(HOLD_MIB)})
    with launch(recipe, run_dir=tmp_path, matrix=[], ready_timeout=60) as server:
        assert server.watch is not None
        first = server.watch.count
        for _ in range(10_000):  # bounded by samples, not by the clock: three more after ready
            if server.watch.count >= first + 3:
                break
            time.sleep(0.05)
        kernel_peak = sum(vm(pid, "VmHWM") for pid in members(server.pgid))
        record = server.memory()
    assert record is not None and record["samples_taken"] >= first + 3
    high = record["high_water_bytes"]
    assert high >= HOLD_MIB * 2**20, record
    assert 0.95 * kernel_peak <= high <= kernel_peak, (high, kernel_peak)
    assert record["processes"] == 3  # the supervisor, the server, its worker child
    assert record["lowest_available_bytes"] and record["series"] and len(record["series"][0]) == 3


def test_the_series_stays_bounded_and_the_high_water_mark_survives_the_thinning(monkeypatch):
    """More samples than the series keeps: it is thinned by half each time it fills (an even series of the whole
    run), the interval it states doubles, and the high-water mark is kept apart from the thinned points."""
    monkeypatch.setattr(memwatch, "MAX_SAMPLES", 8)
    watch = memwatch.MemoryWatch(os.getpgrp(), os.getpid(), t0=0.0)
    grown = []
    for i in range(40):
        if i == 5:
            grown.append(b"\x01" * (64 * 2**20))  # this process grows at one sample, which the thinning may drop
        watch.sample()
    record = watch.record()
    assert len(record["series"]) < 8 and record["samples_taken"] == 40
    assert record["every_s"] == memwatch.EVERY_S * 8  # thinned three times (at 8, 15 and 29 samples)
    assert record["high_water_bytes"] >= max(p[2] for p in record["series"]) >= 64 * 2**20
    assert os.getpid() in watch.processes()
