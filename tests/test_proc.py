import sys
import time

from sparkdoctor import proc


def test_ok_and_exit_code():
    r = proc.run([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"], timeout=10)
    assert r.stdout.strip() == "hi" and r.returncode == 3 and not r.ok
    assert r.describe_failure().endswith("exited 3: hi")


def test_timeout_kills_the_whole_group_quickly():
    start = time.monotonic()
    code = "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    r = proc.run([sys.executable, "-c", code], timeout=0.5)
    assert r.timed_out and r.returncode is None
    assert time.monotonic() - start < 5
    assert "timed out after" in r.describe_failure()


def test_signal_is_named():
    r = proc.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], timeout=10)
    assert r.signal == 11 and "SIGSEGV" in r.describe_failure()


def test_missing_program_is_data_not_exception():
    r = proc.run(["/nonexistent/ptxas", "--version"], timeout=5)
    assert r.start_error and "could not start" in r.describe_failure()
