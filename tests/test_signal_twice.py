"""A second SIGINT while sparkdoctor cleans up after the first: `timeout -s INT` signals the process and then its
whole group, and a user presses Ctrl-C again. It unwound the clean-up with a traceback and no JSON document (README,
"Exit codes": 130 and one line)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, signal
from sparkdoctor import orphans, proc
proc.install_signal_handlers()
stop = orphans.stop
def again():  # the second signal arrives while every child is being stopped
    os.kill(os.getpid(), signal.SIGINT)
    stop()
orphans.stop = again
print(proc.interrupted(proc.Interrupted(signal.SIGINT)))
"""


def test_a_second_signal_during_the_clean_up_does_not_cut_it_short():
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout.startswith("(130, 'interrupted (SIGINT); every process it started was stopped"), p.stdout
