"""A second `fix` on a target another fix is changing is refused at once (its plan was made before the first one
changed the environment), in one line that says who holds the lock, since when, and what to do. Before, it said the pid
and "wait for it": not since when, nor that the second fix must be run again (it does not wait)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from sparkdoctor.fix.interface import UnchangedError
from sparkdoctor.fix.journal import key_digest, target_lock

HOLD = "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)"


def test_a_second_fix_is_refused_naming_the_holder_since_when_and_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    lock = tmp_path / "state" / "locks" / f"{key_digest('venv:/x')}.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(UnchangedError) as caught, target_lock("venv:/x", "/x/bin/python"):
            pass
    finally:
        holder.kill()
        holder.wait()
    message = str(caught.value)
    assert message.startswith(f"another sparkdoctor fix or rollback is running on /x/bin/python: pid {holder.pid} ("), message
    since = re.search(r"running since (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", message)
    assert since, message
    started = time.mktime(time.strptime(since.group(1), "%Y-%m-%d %H:%M:%S")) - time.mktime(time.gmtime(0))
    assert abs(started - time.time()) < 24 * 3600, message  # the holder's start, not the boot or the epoch
    assert message.endswith("; wait for it to end, then run this again (a plan is made from what the environment holds)"), message
    with target_lock("venv:/x", "/x/bin/python"):  # the lock goes with the process that held it
        pass
