"""Where the test suite's time goes: worker seconds and CPU seconds per folder, per file and per test.

Two halves:

- a pytest plugin (`-p benchmarks.suite_time`): each test's wall time (setup, call and teardown: what its worker
  spent on it) and CPU time (the worker's own user+system time plus that of its child processes, reaped or still
  running, and theirs: installers, servers, the CLI runs) is appended as one JSON line to $SUITE_TIME_OUT (default
  suite-time.jsonl).
  It works under xdist: every worker appends its own lines. A session fixture a test starts counts for that test, and
  a session server's CPU for the tests during which it used it (not all at once for the test that reaps it).
- a report (`python benchmarks/suite_time.py report FILE.jsonl`): sums per folder (tests/x/, and tests/ for the
  files at the top), then the slowest files and tests. `--by cpu` sorts by CPU instead of worker seconds.

    SUITE_TIME_OUT=/tmp/suite.jsonl .venv/bin/python -m pytest -p benchmarks.suite_time            # the whole suite
    SUITE_TIME_OUT=/tmp/fix.jsonl .venv/bin/python -m pytest -p benchmarks.suite_time -n 0 tests/fix  # one folder
    python benchmarks/suite_time.py report /tmp/suite.jsonl --top 30

CPU seconds are the number to compare between runs on a shared machine: worker seconds grow with the other jobs'
load, CPU seconds much less. A test whose CPU is far below its worker seconds waits (a sleep, a lock, the other
worker's `alone` turn); one whose CPU is far above it runs work in parallel child processes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

DEFAULT_OUT = "suite-time.jsonl"


def _cpu() -> float:
    """This process's CPU seconds, its reaped children's, and those its live descendants have used so far. Without
    the live ones a session server's or daemon's whole life landed on the test that reaped it, the last test of its
    worker (the session teardown): 81 s on a 1 s test in run 46."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + _live_descendants_cpu(os.getpid())


def _live_descendants_cpu(root: int) -> float:
    """CPU seconds of root's live descendants (Linux /proc; 0 elsewhere): each one's own time plus that of the
    children it reaped (stat fields 14-17). A child reaped since moves into its parent's count, so nothing counts
    twice; a descendant that outlives its parent and is adopted by init is no longer counted."""
    children: dict[int, list[int]] = defaultdict(list)
    ticks: dict[int, int] = {}
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
        except OSError:  # gone meanwhile
            continue
        children[int(fields[1])].append(pid)  # field 4, ppid
        ticks[pid] = sum(int(f) for f in fields[11:15])  # fields 14-17: utime, stime, cutime, cstime
    total, todo = 0, list(children[root])
    while todo:
        pid = todo.pop()
        total += ticks[pid]
        todo.extend(children[pid])
    return total / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start, wall, cpu = time.time(), time.monotonic(), _cpu()
    try:
        return (yield)
    finally:
        line = json.dumps({"test": item.nodeid, "wall": round(time.monotonic() - wall, 3), "cpu": round(_cpu() - cpu, 3),
                           "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "start": round(start, 3)})
        with open(os.environ.get("SUITE_TIME_OUT", DEFAULT_OUT), "a", encoding="utf-8") as out:
            out.write(line + "\n")


def folder_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0].split("@", 1)[0]
    parts = Path(path).parts
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else (parts[0] + "/" if parts else "?")


def load(path: Path) -> list[dict]:
    rows = []
    for text in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(text))
        except json.JSONDecodeError:  # a worker killed mid-line
            continue
    return rows


def _table(title: str, groups: dict[str, list[dict]], key: str, top: int, total: float) -> None:
    print(f"\n{title}")
    print(f"  {'worker s':>9} {'cpu s':>9} {'share':>6} {'tests':>6}  name")
    ranked = sorted(groups.items(), key=lambda kv: -sum(r[key] for r in kv[1]))
    for name, rows in ranked[:top]:
        wall, cpu = sum(r["wall"] for r in rows), sum(r["cpu"] for r in rows)
        share = (wall if key == "wall" else cpu) / total if total else 0.0
        print(f"  {wall:9.1f} {cpu:9.1f} {share:6.1%} {len(rows):6d}  {name}")


def _timeline(rows: list[dict]) -> None:
    """Per worker: when it ran its first and last test, and the time it sat without one (waiting for a turn
    shows inside a test; this is the time between tests, mostly at the end when the other worker still runs)."""
    timed = [r for r in rows if "start" in r]
    if not timed:
        return
    first = min(r["start"] for r in timed)
    last = max(r["start"] + r["wall"] for r in timed)
    print(f"\ntimeline: {last - first:.0f} s from the first test's start to the last test's end")
    for worker in sorted({r["worker"] for r in timed}):
        mine = sorted((r for r in timed if r["worker"] == worker), key=lambda r: r["start"])
        busy = sum(r["wall"] for r in mine)
        end = mine[-1]["start"] + mine[-1]["wall"]
        print(f"  {worker}: busy {busy:.0f} s, idle between tests {end - mine[0]['start'] - busy:.0f} s, "
              f"done {last - end:.0f} s before the last test ended")


def report(path: Path, top: int, key: str) -> None:
    rows = load(path)
    if not rows:
        sys.exit(f"{path}: no test lines")
    total = sum(r[key] for r in rows)
    wall, cpu = sum(r["wall"] for r in rows), sum(r["cpu"] for r in rows)
    workers = {r.get("worker", "main") for r in rows}
    print(f"{len(rows)} tests, {wall:.0f} worker s, {cpu:.0f} cpu s on {len(workers)} worker(s) "
          f"(about {wall / max(1, len(workers)) / 60:.1f} min of wall time if the workers stay busy)")
    by_folder, by_file = defaultdict(list), defaultdict(list)
    for r in rows:
        by_folder[folder_of(r["test"])].append(r)
        by_file[r["test"].split("::", 1)[0]].append(r)
    _timeline(rows)
    _table("per folder", by_folder, key, 1000, total)
    _table(f"slowest {top} files", by_file, key, top, total)
    _table(f"slowest {top} tests", {r["test"]: [r] for r in rows}, key, top, total)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rep = sub.add_parser("report", help="sum a JSON-lines file the plugin wrote")
    rep.add_argument("file", type=Path)
    rep.add_argument("--top", type=int, default=30)
    rep.add_argument("--by", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args()
    report(args.file, args.top, args.by)


if __name__ == "__main__":
    main()
