"""The keeper of one test dockerd: starts the daemon, then waits until the test process that started it closes the
keeper's stdin (its stop(), or its end: a normal exit, Ctrl-C, a worker killed by xdist, SIGKILL) and then cleans up
everything the daemon left, whatever happened to the test process meanwhile: the daemon stopped (SIGTERM, then its
process group killed), each containerd shim serving this daemon's root and its containers' processes killed, every
mount under the root unmounted, the root removed.

A test process cannot promise its own teardown: a second Ctrl-C interrupts it half-way, and xdist kills a worker
10 s after it told it to stop. The keeper runs in a session of its own (a Ctrl-C at the terminal does not reach it)
and no registry of sparkdoctor's knows it (proc.kill_all at the test process's exit does not kill it).

    python daemon_keeper.py ROOT LOG -- DOCKERD_ARGV...

It prints the daemon's pid on its first line of stdout (or `failed: WHY`), and `stopped` once all is clean.
Standard library only: it must not depend on what the test process had imported.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

STOP_WAIT_S = 30  # dockerd stops its containers in seconds; more on a loaded machine


def kill_shims(root: Path) -> None:
    """SIGKILL each containerd shim serving this daemon (its command line names the daemon's root) and what runs
    under it: a container's init is its pid namespace's first process, so everything in the container goes with it."""
    parents: dict[int, int] = {}
    shims = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat[stat.rfind(")") + 2:].split()[1])
        if b"containerd-shim" in cmdline and str(root).encode() in cmdline:
            shims.append(int(entry.name))
    for shim in shims:
        for pid in [p for p, parent in parents.items() if parent == shim] + [shim]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def unmount_under(root: Path) -> None:
    """Every mount at or under root, deepest (latest) first, lazily: a mount still busy goes when its users do."""
    for line in reversed(Path("/proc/self/mounts").read_text().splitlines()):
        where = line.split()[1]
        if where == str(root) or where.startswith(str(root) + "/"):
            subprocess.run(["umount", "-l", where], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20)


def clean_up(root: Path, daemon: subprocess.Popen[bytes] | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second request to stop must not cut the clean-up short
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if daemon is not None and daemon.poll() is None:
        daemon.send_signal(signal.SIGTERM)  # dockerd stops its containers
        try:
            daemon.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(daemon.pid, signal.SIGKILL)  # its containerd too, if it is still there
        except OSError:
            pass
        daemon.wait()
    kill_shims(root)  # a daemon killed before it stopped its containers leaves their shims running
    unmount_under(root)
    shutil.rmtree(root, ignore_errors=True)


def _wait_for_eof(daemon: subprocess.Popen[bytes]) -> None:
    """Until stdin ends; reaps the daemon if it exits first (start_daemon sees it gone and says why)."""
    watched = [sys.stdin.fileno()]
    pidfd = os.pidfd_open(daemon.pid) if hasattr(os, "pidfd_open") else None
    if pidfd is not None:
        watched.append(pidfd)
    while True:
        ready, _, _ = select.select(watched, [], [], None if pidfd is not None else 1.0)
        if sys.stdin.fileno() in ready and not os.read(sys.stdin.fileno(), 4096):
            return
        if daemon.poll() is not None and pidfd is not None and pidfd in watched:
            watched.remove(pidfd)
            os.close(pidfd)


def main(argv: list[str]) -> int:
    root, log, sep, *dockerd = argv
    assert sep == "--" and dockerd, "usage: daemon_keeper.py ROOT LOG -- DOCKERD_ARGV..."
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the test process's Ctrl-C is not the keeper's to act on
    daemon = None

    def _stop(signum: int, frame: object) -> None:
        raise SystemExit(f"signal {signum}")

    signal.signal(signal.SIGTERM, _stop)  # someone stopping the keeper itself: clean up and go
    signal.signal(signal.SIGHUP, _stop)
    try:
        # pdeathsig: the daemon goes (SIGTERM: it stops its containers) even with the keeper SIGKILLed
        guard = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []
        with open(log, "wb") as out:
            try:
                daemon = subprocess.Popen([*guard, *dockerd], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)
            except OSError as exc:
                print(f"failed: {exc}", flush=True)
                return 1
        print(daemon.pid, flush=True)
        _wait_for_eof(daemon)
    finally:
        clean_up(Path(root), daemon)
        try:
            print("stopped", flush=True)
        except OSError:  # the test process is gone: nobody is reading
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
