"""A second SIGINT while sparkdoctor cleans up after the first: `timeout -s INT` signals the process and then its
whole group, and a user presses Ctrl-C again. It unwound the clean-up with a traceback and no JSON document (README,
"Exit codes": 130 and one line)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, signal
from sparkdoctor import cli, orphans, proc
proc.install_signal_handlers()
stop = orphans.stop
def again():  # the second signal arrives while every child is being stopped
    os.kill(os.getpid(), signal.SIGINT)
    stop()
orphans.stop = again
cli.interrupted(proc.Interrupted(signal.SIGINT))
"""


def test_a_second_signal_during_the_clean_up_does_not_cut_it_short():
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert p.returncode == 130 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("sparkdoctor: error: interrupted (SIGINT); every process it started was stopped"), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_the_clean_up_as_a_library_call_leaves_the_callers_signal_handlers():
    """proc.interrupted is also called in-process (the tests, a caller's own Ctrl-C): only the CLI's exit path
    ignores further signals, never a process that goes on."""
    p = subprocess.run([sys.executable, "-c", "import signal\nfrom sparkdoctor import proc\nproc.interrupted(KeyboardInterrupt())\n"
                        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
                        "signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)"], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["True", "True"], p.stdout + p.stderr
