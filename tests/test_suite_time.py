"""The suite's CPU accounting (benchmarks/suite_time.py): a child's CPU counts while it runs, not when it is reaped."""

from __future__ import annotations

import subprocess
import sys

from benchmarks import suite_time

BURNER = """
import sys, time
n = 0
while time.process_time() < 0.5:
    n += 1
print(time.process_time(), flush=True)
sys.stdin.read()
"""


def test_a_live_childs_cpu_counts_while_it_runs_and_once():
    """A session server's whole life used to land on the test that reaped it (the last one of its worker: 81 s of
    CPU on a 1 s test in run 46): RUSAGE_CHILDREN grows only when a child is waited for."""
    before = suite_time._cpu()
    child = subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        burned = float(child.stdout.readline())  # its own CPU seconds; it now waits on stdin, alive
        running = suite_time._cpu()
    finally:
        child.communicate("")
    reaped = suite_time._cpu()
    assert running - before >= burned - 0.05  # counted while alive (clock ticks of 10 ms)
    assert reaped - running < burned / 2  # and not a second time once reaped
