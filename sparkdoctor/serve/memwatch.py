"""Memory sampled through a local server's whole life, from launch to teardown: a thread of the launcher reads
MemAvailable and the resident size of the server's process group from /proc every EVERY_S.

What it keeps is bounded: the high-water mark (the group's largest resident size, and when), the lowest
MemAvailable, the memory limit of the server's cgroup when it has one (a container's, a systemd unit's), every process of the group seen (whom an OOM kill may name), and a time series of at most
MAX_SAMPLES points, thinned by half (every second point dropped, the interval doubled) whenever it fills, so a
run of hours keeps an even series of its whole length. One sample costs a listing of /proc (the group's members)
and a read of each member's status file: about a millisecond on a box of a few hundred processes.

A server in a container is not sampled here (its processes are not in the launcher's group).
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from sparkdoctor.serve import groups

LIVE = Path("/")
EVERY_S = 0.5
MAX_SAMPLES = 512  # the time series kept (a ledger row holds it: 512 points are about 15 kB of JSON)

Point = tuple[float, int | None, int | None]  # (seconds since launch, MemAvailable, the group's resident bytes)


class MemoryWatch:
    """Sample the process group `pgid` (led by the supervisor, the server `pid` inside it) until stop()."""

    def __init__(self, pgid: int, pid: int, t0: float, every: float = EVERY_S):
        self.pgid, self.pid, self.t0, self.every = pgid, pid, t0, every
        self._pids: set[int] = {pid}
        self.cgroup_limit_bytes: int | None = None  # the server's memory cgroup's limit, once seen (it may join one late)
        self.high_water_bytes: int | None = None
        self.high_water_at_s: float | None = None
        self.lowest_available_bytes: int | None = None
        self.count = 0
        self._points: list[Point] = []
        self._stride = 1  # keep one sample in `_stride` (doubled each time the series fills)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"memwatch-{pgid}", daemon=True)

    def start(self) -> MemoryWatch:
        self.sample()  # one at once: a server that dies in its first half second still has one
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling, with one last sample (the end of a run shorter than the interval still counts)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        with contextlib.suppress(Exception):  # as in _run: the teardown that follows must happen
            self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a sampler must never take the run down; it stops sampling instead
                return

    def sample(self) -> None:
        from sparkdoctor.memory.have import cgroup_room, sample

        live = set(groups.members(self.pgid))
        available, rss = sample(live, LIVE)  # the server runs here: this machine's /proc, whatever host root is set
        limit = cgroup_room(self.pid, LIVE)[0] if self.pid in live else None
        t = round(time.monotonic() - self.t0, 2)
        with self._lock:
            self._pids.update(live)
            self.cgroup_limit_bytes = limit or self.cgroup_limit_bytes
            self.count += 1
            if rss is not None and (self.high_water_bytes is None or rss > self.high_water_bytes):
                self.high_water_bytes, self.high_water_at_s = rss, t
            if available is not None and (self.lowest_available_bytes is None or available < self.lowest_available_bytes):
                self.lowest_available_bytes = available
            if (self.count - 1) % self._stride == 0:
                self._points.append((t, available, rss))
                if len(self._points) >= MAX_SAMPLES:
                    self._points = self._points[::2]
                    self._stride *= 2

    def processes(self) -> set[int]:
        """Every process of the group seen so far (whom an OOM kill may name)."""
        with self._lock:
            return set(self._pids)

    def points(self) -> list[Point]:
        with self._lock:
            return list(self._points)

    def record(self) -> dict[str, object]:
        """What the ledger keeps with the run (docs/json.md, `memory`)."""
        with self._lock:
            return {"high_water_bytes": self.high_water_bytes, "high_water_at_s": self.high_water_at_s,
                    "lowest_available_bytes": self.lowest_available_bytes, "samples_taken": self.count,
                    "every_s": self.every * self._stride, "processes": len(self._pids),
                    "cgroup_limit_bytes": self.cgroup_limit_bytes,
                    "series": [list(p) for p in self._points]}
