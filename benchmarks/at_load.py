"""Run a command while the machine's 1-minute load average is held near a target: the suite "at load 4".

    python benchmarks/at_load.py --load 4 --report /tmp/at-load.json -- bash .ci/run

The load is made of plain busy-loop processes ("hogs": `python -c` spinning at normal priority). Every `--every`
seconds the controller reads /proc/loadavg and adds one hog when the 1-minute average is below the target by more
than `--band`, removes one when it is above it by more than the band, never running more than `--max-hogs`. The
command's own processes count towards the load, so the hogs only fill what it leaves. The 1-minute average lags
(it moves about 8% of the way to the present load every 5 s), so the controller steps one hog at a time and waits
`--settle` seconds after a change before the next.

Every `--sample` seconds (30) the load average and the number of hogs are recorded. When the command ends, on
SIGINT or SIGTERM (the command's process group gets SIGTERM, then SIGKILL after 10 s), or if this script fails,
the hogs are killed, and each hog also stops by itself once this script is gone (it watches its parent), so a
SIGKILL leaves no busy loop behind. The report (JSON, and one line on stderr): the command's exit code, its wall
seconds, the load samples (min, median, max, and each one) and the hogs' count over time. The exit status is the
command's (128 + the signal's number when this script was stopped by one).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Spins at normal priority; every few million steps it checks that the process that started it (its argv[1]: read
# at its start, the parent could already be gone) is still its parent.
HOG = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    for _ in range(3_000_000):\n        pass\n"
STOP_GRACE_S = 10.0


def read_loadavg(path: str = "/proc/loadavg") -> float:
    """The 1-minute load average."""
    with open(path, encoding="ascii") as f:
        return float(f.read().split()[0])


def next_count(load: float, target: float, hogs: int, cap: int, band: float) -> int:
    """How many hogs to run next: one more when the load is below the target by more than `band`, one fewer when
    above it by more than `band`, within 0..cap."""
    if load < target - band and hogs < cap:
        return hogs + 1
    if load > target + band and hogs > 0:
        return hogs - 1
    return min(hogs, cap)


class Hogs:
    """Busy-loop processes, started and stopped one at a time."""

    def __init__(self, python: str = sys.executable):
        self.python = python
        self.procs: list[subprocess.Popen] = []

    def __len__(self) -> int:
        return len(self.procs)

    def set(self, count: int) -> None:
        while len(self.procs) < count:
            self.procs.append(subprocess.Popen([self.python, "-c", HOG, str(os.getpid())], stdin=subprocess.DEVNULL))
        while len(self.procs) > count:
            self._kill(self.procs.pop())

    def stop(self) -> None:
        while self.procs:
            self._kill(self.procs.pop())

    @staticmethod
    def _kill(p: subprocess.Popen) -> None:
        p.kill()
        p.wait()


@dataclass
class Controller:
    """The control loop's state: call `tick(now)` every second or so; it reads the load through `read` and sets the
    hogs' count through `hogs.set` (the tests give both fakes)."""

    target: float
    cap: int
    hogs: Hogs
    read: Callable[[], float] = read_loadavg
    band: float = 0.3
    every: float = 5.0
    settle: float = 15.0
    sample: float = 30.0
    samples: list[tuple[float, float, int]] = field(default_factory=list)  # (seconds, load, hogs)
    changes: list[tuple[float, int]] = field(default_factory=list)  # (seconds, hogs from then on)
    _next_step: float = 0.0
    _next_sample: float = 0.0

    def tick(self, now: float) -> None:
        if now >= self._next_sample:
            self.samples.append((round(now, 1), self.read(), len(self.hogs)))
            self._next_sample = now + self.sample
        if now < self._next_step:
            return
        want = next_count(self.read(), self.target, len(self.hogs), self.cap, self.band)
        self._next_step = now + self.every
        if want != len(self.hogs):
            self.hogs.set(want)
            self.changes.append((round(now, 1), want))
            self._next_step = now + self.settle

    def summary(self) -> dict:
        loads = [load for _, load, _ in self.samples]
        return {"target": self.target, "max_hogs": self.cap,
                "load": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)} if loads else None,
                "samples": [{"s": s, "load1": load, "hogs": h} for s, load, h in self.samples],
                "hogs_over_time": [{"s": s, "hogs": h} for s, h in self.changes]}


class Stopped(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def _stop_command(child: subprocess.Popen) -> None:
    """SIGTERM to the command's process group, SIGKILL after a grace period."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        if child.poll() is not None:
            return
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(wait)
        except subprocess.TimeoutExpired:
            continue


def run(command: list[str], ctl: Controller, tick_s: float = 1.0) -> tuple[int, float]:
    """Run `command` (in a process group of its own) with the controller ticking beside it; the hogs always go.
    Returns (exit status, wall seconds)."""
    t0 = time.monotonic()
    child = None
    old = {s: signal.signal(s, _raise_stopped) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        child = subprocess.Popen(command, start_new_session=True)
        while child.poll() is None:
            ctl.tick(time.monotonic() - t0)
            try:
                child.wait(tick_s)
            except subprocess.TimeoutExpired:
                pass
        ctl.samples.append((round(time.monotonic() - t0, 1), ctl.read(), len(ctl.hogs)))
        code = child.returncode
        return (128 - code if code < 0 else code), time.monotonic() - t0
    except Stopped as stop:
        return 128 + stop.signum, time.monotonic() - t0
    finally:
        ctl.hogs.stop()
        if child is not None:
            _stop_command(child)
        for s, handler in old.items():
            signal.signal(s, handler)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load", type=float, required=True, help="the 1-minute load average to hold (e.g. 4)")
    ap.add_argument("--max-hogs", type=int, default=4, help="never more busy loops than this (default 4)")
    ap.add_argument("--band", type=float, default=0.3, help="no change while the load is this close to the target")
    ap.add_argument("--every", type=float, default=5.0, help="seconds between control steps (default 5)")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds to wait after a change (default 15)")
    ap.add_argument("--sample", type=float, default=30.0, help="seconds between recorded samples (default 30)")
    ap.add_argument("--report", type=Path, default=Path("at-load.json"), help="where the JSON report goes")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given (put it after --)")
    ctl = Controller(target=args.load, cap=args.max_hogs, hogs=Hogs(), band=args.band, every=args.every,
                     settle=args.settle, sample=args.sample)
    code, wall = run(command, ctl)
    doc = {"command": command, "exit_code": code, "wall_s": round(wall, 1), **ctl.summary()}
    args.report.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    load = doc["load"] or {}
    print(f"at_load: exit {code} after {wall:.0f}s; load1 min {load.get('min')} median {load.get('median')} "
          f"max {load.get('max')} (target {args.load}); report {args.report}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
