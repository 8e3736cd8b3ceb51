import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkdoctor import proc

REPO = Path(__file__).resolve().parent.parent


def test_ok_and_exit_code():
    # a limit only as a safety net: an interpreter's start on a loaded machine must not read as a hang
    r = proc.run([sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"], timeout=600)
    assert r.stdout.strip() == "hi" and r.returncode == 3 and not r.ok
    assert r.describe_failure().endswith("exited 3: hi")


def test_timeout_kills_the_whole_group_quickly():
    start = time.monotonic()
    code = "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    r = proc.run([sys.executable, "-c", code], timeout=0.5)
    assert r.timed_out and r.returncode is None
    assert time.monotonic() - start < 30  # not the 60 s its sleeps would take; wide enough for a loaded machine
    assert "timed out after" in r.describe_failure()


def test_a_timeout_names_the_limit_it_hit_not_the_time_killing_took(monkeypatch):
    """Killing and reaping a hung process takes longer on a loaded machine; the message must not move with it
    (a 5 s ptxas limit once read "timed out after 5.1s" under load)."""
    real_kill = proc._kill_group

    def slow_kill(popen):
        time.sleep(0.4)  # a loaded machine: the kill comes late
        real_kill(popen)

    monkeypatch.setattr(proc, "_kill_group", slow_kill)
    r = proc.run(["sleep", "30"], timeout=0.3)
    assert r.timed_out and r.seconds >= 0.7 and r.limit == pytest.approx(0.3)
    assert r.describe_failure() == "sleep timed out after 0.3s"


def test_a_timeout_too_large_for_the_poller_is_waited_not_raised():
    """`timeout: 1e308` in a sparkrun recipe's sparkdoctor item reached here: the poller's millisecond conversion
    overflowed and the plugin raised inside sparkrun. run() never raises: the child's result comes back."""
    r = proc.run([sys.executable, "-c", "print('ok')"], timeout=1e308)
    assert r.returncode == 0 and r.stdout.strip() == "ok" and not r.timed_out


def test_signal_is_named():
    r = proc.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], timeout=600)
    assert r.signal == 11 and "SIGSEGV" in r.describe_failure()


def test_missing_program_is_data_not_exception():
    r = proc.run(["/nonexistent/ptxas", "--version"], timeout=5)
    assert r.start_error and "could not start" in r.describe_failure()


def _alive(pid: int) -> bool:
    try:  # a zombie is dead for our purpose; a pid reaped between two looks is dead too
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _dies(pid: int, limit_s: float = 30.0) -> bool:
    """Whether `pid` is dead within `limit_s`: a SIGKILLed process still has to be scheduled to die, which a loaded
    machine can delay past any short sleep. The limit is a safety net, far under the 60 s its sleep would live."""
    until = time.monotonic() + limit_s
    while _alive(pid):
        if time.monotonic() > until:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def deadline():
    yield proc.set_deadline
    proc.set_deadline(None)


def test_the_run_deadline_cuts_a_longer_timeout(deadline):
    deadline(time.monotonic() + 0.5)
    start = time.monotonic()
    r = proc.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=30)
    assert time.monotonic() - start < 20  # the deadline (0.5 s), not the timeout (30 s), on a loaded machine too
    assert r.timed_out and r.out_of_budget
    assert "time budget ran out" in r.describe_failure()
    late = proc.run([sys.executable, "-c", "print(1)"], timeout=30)
    assert late.start_error and "time budget" in late.describe_failure()


def test_a_flood_is_capped_to_head_and_tail_and_cheap():
    # 400 MB on stdout, then a last line: kept are the head, the tail and the count between.
    code = (
        "import sys; w = sys.stdout.buffer.write; w(b'first line\\n');"
        "[w(b'x' * 1048576) for _ in range(400)]; w(b'\\nlast line\\n')"
    )
    cpu = time.process_time()  # this process's CPU (the reader threads'): a busy machine stretches wall time, not this
    r = proc.run([sys.executable, "-c", code], timeout=600, max_output=(1024, 1024))  # 400 MB through a pipe: load-proof
    spent = time.process_time() - cpu
    assert r.ok and spent < 5, spent
    assert r.stdout.startswith("first line\n") and r.stdout.endswith("last line\n")
    assert len(r.stdout) < 4096
    assert r.dropped > 399 * 1048576 and f"[... {r.dropped} bytes of output dropped ...]" in r.stdout


def test_a_flood_that_never_ends_stops_at_the_timeout():
    start = time.monotonic()
    r = proc.run(["yes"], timeout=1)
    assert r.timed_out and time.monotonic() - start < 20  # its 1 s timeout, with room for a loaded machine
    assert len(r.stdout) < proc.HEAD_BYTES + proc.TAIL_BYTES + 100


def test_input_reaches_the_child_and_stdout_is_text():
    r = proc.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], timeout=600, input="héllo\r\n" * 3)
    assert r.ok and r.stdout == "HÉLLO\n" * 3 + "\n"


def test_kill_all_kills_every_registered_group(tmp_path):
    pidfile = tmp_path / "grandchild"
    # written whole, then renamed into place: the poking thread must never read a file that exists but is still empty
    code = (
        "import os, subprocess, time; p = subprocess.Popen(['sleep', '60']); "
        f"open({str(pidfile) + '.part'!r}, 'w').write(str(p.pid)); os.rename({str(pidfile) + '.part'!r}, {str(pidfile)!r}); "
        "time.sleep(60)"
    )
    script = tmp_path / "run.py"
    # A fresh interpreter: kill_all() closes the registry for good, which this test process must not do.
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from sparkdoctor import proc\n"
        f"r = proc.start([sys.executable, '-c', {code!r}])\n"
        f"while not __import__('os').path.exists({str(pidfile)!r}): time.sleep(0.01)\n"
        "print(r.popen.pid, proc.kill_all(), flush=True)\n"
        "print(proc.start(['true']).start_error)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)  # a safety net: three interpreter starts
    lines = out.stdout.split("\n")
    child, killed = map(int, lines[0].split())
    assert killed == 1 and lines[1] == "sparkdoctor is shutting down"
    assert _dies(child) and _dies(int(pidfile.read_text()))


def test_children_are_killed_at_exit(tmp_path):
    pidfile = tmp_path / "child"
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from sparkdoctor import proc\n"
        "r = proc.start(['sleep', '60'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(r.popen.pid))\n"
    )
    subprocess.run([sys.executable, str(script)], timeout=120, check=True)
    assert _dies(int(pidfile.read_text()))


def test_a_check_run_in_process_leaves_no_deadline_behind(tmp_path):
    # The fuzz suite runs `check` in-process; its budget used to stay set, and every later
    # subprocess of the test session timed out at once.
    from typer.testing import CliRunner

    from sparkdoctor.cli import app

    snapshot = Path(__file__).parent / "data" / "facts" / "nogpu-clean.json"
    config = tmp_path / "empty.toml"
    config.write_text("")
    result = CliRunner().invoke(app, ["check", "--facts", str(snapshot), "--config", str(config), "--timeout", "0.5"])
    assert result.exit_code in (0, 1), result.output
    assert proc.time_left() is None


def test_a_signal_during_a_wait_kills_that_child_before_the_exception_unwinds(tmp_path):
    """What runs while Interrupted unwinds (fix's rollback) must not race the interrupted child: a SIGINT during
    `fix --yes` used to leave the installer running until the entry point's kill_all(), and it finished its
    install after the rollback had removed the package (found by QA: the target ended half-rolled-back)."""
    pidfile = tmp_path / "grandchild"
    # written whole, then renamed into place: the poking thread must never read a file that exists but is still empty
    code = (
        "import os, subprocess, time; p = subprocess.Popen(['sleep', '60']); "
        f"open({str(pidfile) + '.part'!r}, 'w').write(str(p.pid)); os.rename({str(pidfile) + '.part'!r}, {str(pidfile)!r}); "
        "time.sleep(60)"
    )
    script = tmp_path / "run.py"
    script.write_text(
        "import os, signal, sys, threading, time\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from sparkdoctor import proc\n"
        "proc.install_signal_handlers()\n"
        f"def poke():\n    while not os.path.exists({str(pidfile)!r}): time.sleep(0.01)\n    os.kill(os.getpid(), signal.SIGTERM)\n"
        "threading.Thread(target=poke, daemon=True).start()\n"
        "try:\n"
        f"    proc.run([sys.executable, '-c', {code!r}], timeout=600)\n"  # a safety net: the child must start, however loaded
        "except proc.Interrupted:\n"
        # still inside the handler: kill_all() has not run. The killed grandchild is polled until it is gone, not
        # looked at once after a short sleep: a loaded machine may not have let it die yet (it would live 60 s)
        "    def alive(p):\n"
        "        try:\n"
        "            return open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z'\n"
        "        except FileNotFoundError:\n"
        "            return False\n"
        f"    grandchild, until = int(open({str(pidfile)!r}).read()), time.monotonic() + 30\n"
        "    while alive(grandchild) and time.monotonic() < until:\n"
        "        time.sleep(0.02)\n"
        "    print('registered', proc.live_pids(), 'alive', [grandchild] if alive(grandchild) else [], flush=True)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900)  # a safety net
    assert out.stdout.strip() == "registered [] alive []", (out.stdout, out.stderr)


def test_a_child_that_exits_is_done_though_a_process_it_left_holds_its_pipes():
    """`check --python fork.sh` (an interpreter whose start-up leaves `setsid sleep 300 &` behind, as a .pth or a
    sitecustomize starting a background agent would) took 77 s and reported timeouts: the run read the pipes until EOF,
    which the process left behind held open. The child's own output is in the pipes when it exits; that is its end."""
    import signal

    r = proc.run(["sh", "-c", "setsid sleep 300 & echo $!; echo done; exit 0"], timeout=120)
    try:
        assert r.ok and not r.timed_out and r.stdout.split()[1:] == ["done"], (r.returncode, r.stdout, r.stderr)
    finally:
        with contextlib.suppress(ValueError, ProcessLookupError, IndexError):
            os.kill(int(r.stdout.split()[0]), signal.SIGKILL)
