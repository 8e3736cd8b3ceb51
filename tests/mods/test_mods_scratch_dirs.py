"""A `mods check` ended by SIGKILL left its script's scratch folder (up to 2 GiB) in $TMPDIR, every time. The next run
now removes the folders of runs that are gone (their owner file can be locked), and only those: a live run's, a link,
a folder without an owner file, an owner file that is a link are left as they are."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sparkdoctor.mods.scratch_dirs import OWNER, PREFIX

HOLD = """
import sys, time
from sparkdoctor.mods.scratch_dirs import scratch_folder
with scratch_folder() as scratch:
    (scratch / "site").mkdir()
    (scratch / "site" / "big.bin").write_bytes(b"x" * 65536)
    (scratch / "home").mkdir(mode=0)  # what a script may leave: a folder it shut
    print(scratch, flush=True)
    time.sleep(600)
"""


def _hold(env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    run = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True, env=env)
    assert run.stdout is not None
    return run, Path(run.stdout.readline().strip())


def test_the_next_run_removes_the_scratch_folder_a_sigkill_left_and_nothing_else(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    killed, killed_scratch = _hold(env)
    alive, alive_scratch = _hold(env)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        assert killed_scratch.is_dir() and killed_scratch.parent.parent == tmpdir, "the SIGKILL left nothing: no test"

        # look-alikes that are no dead run's: a link to a folder shaped like one, a folder without an owner file,
        # and one whose owner file is a link to an unlocked file
        victim = tmp_path / "victim"
        (victim / "scratch").mkdir(parents=True)
        (victim / OWNER).write_text("pid 1\n")
        (tmpdir / f"{PREFIX}link").symlink_to(victim)
        (tmpdir / f"{PREFIX}foreign" / "scratch").mkdir(parents=True)
        linked = tmpdir / f"{PREFIX}ownerlink"
        (linked / "scratch").mkdir(parents=True)
        (linked / OWNER).symlink_to(victim / OWNER)

        nxt = subprocess.run([sys.executable, "-c", "from sparkdoctor.mods.scratch_dirs import scratch_folder\n"
                              "with scratch_folder() as s: print(s)"], capture_output=True, text=True, env=env, timeout=120)
        assert nxt.returncode == 0, nxt.stderr
        assert not killed_scratch.parent.exists(), "the dead run's scratch folder stayed"
        assert alive_scratch.is_dir() and (alive_scratch / "site" / "big.bin").stat().st_size == 65536, "a live run's went"
        assert not Path(nxt.stdout.strip()).parent.exists(), "the next run's own folder stayed"
        assert (victim / "scratch").is_dir() and (victim / OWNER).read_text() == "pid 1\n"
        assert (tmpdir / f"{PREFIX}link").is_symlink()
        assert (tmpdir / f"{PREFIX}foreign" / "scratch").is_dir() and (linked / "scratch").is_dir()
    finally:
        alive.kill()
        alive.wait(timeout=60)
