"""The keeper of what a session fixture started outside the test process (a test dockerd, a Ray cluster): it waits
until the test process closes the keeper's stdin (the fixture's teardown, or the process's end: a normal exit,
Ctrl-C, a worker killed by xdist, SIGKILL) and then cleans up, whatever happened to the test process meanwhile:
the daemon it started stopped (SIGTERM, then its process group killed), every process that names one of its paths
(in its command line, a file it holds open, its working folder) killed with everything it started, every mount under a path unmounted, the
paths removed.

A test process cannot promise its own teardown: a second Ctrl-C interrupts it half-way, and xdist kills a worker
10 s after it told it to stop. The keeper runs in a session of its own (a Ctrl-C at the terminal does not reach it)
and no registry of sparkdoctor's knows it (proc.kill_all at the test process's exit does not kill it).

    python keeper.py PATH [LOG -- DAEMON_ARGV...]

More paths come as lines on stdin. It prints the daemon's pid on its first line of stdout (0 without a daemon, or
`failed: WHY`), and `stopped` once all is clean. Standard library only: it runs with -S, beside no test code.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_WAIT_S = 30  # dockerd stops its containers in seconds; more on a loaded machine
KILL_WAIT_S = 60  # a process SIGKILLed ends in well under a second
CLEAN_TRIES = 10  # rounds of kill, unmount, remove until every path is gone


def _holds(proc: Path) -> list[str]:
    """The files a process holds open and its working folder (Ray's workers and per-node processes retitle themselves
    `ray::DashboardAgent`, `ray::IDLE`, overwriting their command line and environment, but write their logs to
    files under the cluster's temp folder)."""
    held = []
    for link in [proc / "cwd", *(proc / "fd").iterdir()]:
        try:
            held.append(os.readlink(link))
        except OSError:
            continue
    return held


def _names(path: str, cmdline: bytes, held: list[str]) -> bool:
    """A process names `path`: in its command line, or as a file it holds or its working folder."""
    return path.encode() in cmdline or any(h == path or h.startswith(path + "/") for h in held)


def kill_naming(paths: list[str]) -> list[int]:
    """SIGKILL every process that names one of `paths`, and everything it started (a container's init is its pid
    namespace's first process: everything in the container goes with it); the pids killed."""
    parents: dict[int, int] = {}
    named = set()
    spared = {os.getpid(), os.getppid()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spared:
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
            held = _holds(entry)
        except OSError:
            continue
        parents[int(entry.name)] = int(stat[stat.rfind(")") + 2:].split()[1])
        if any(_names(path, cmdline, held) for path in paths):
            named.add(int(entry.name))
    grown = True
    while grown:
        grown = False
        for pid, parent in parents.items():
            if pid not in named and parent in named and pid not in spared:
                named.add(pid)
                grown = True
    ending = []
    for pid in named:
        try:
            fd = os.pidfd_open(pid)  # this process, not a later one given its pid
        except OSError:
            continue
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            ending.append(fd)
        except OSError:
            os.close(fd)
    while ending:  # until each has ended (a large process takes a moment to die); a safety net, not a verdict
        ready, _, _ = select.select(ending, [], [], KILL_WAIT_S)
        for fd in ready or ending:
            ending.remove(fd)
            os.close(fd)
    return sorted(named)


def alive(pid: int) -> bool:
    """Whether process `pid` is there and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def unmount_under(root: Path) -> None:
    """Every mount at or under root, deepest (latest) first, lazily: a mount still busy goes when its users do."""
    for line in reversed(Path("/proc/self/mounts").read_text().splitlines()):
        where = line.split()[1]
        if where == str(root) or where.startswith(str(root) + "/"):
            subprocess.run(["umount", "-l", where], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20)


def clean_up(paths: list[str], daemon: subprocess.Popen[bytes] | None) -> None:
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
    for _ in range(CLEAN_TRIES):  # podman's conmon starts `podman container cleanup` as its container dies, which
        kill_naming(paths)  # writes into the root again (a run 60 left it); shims, a Ray cluster's processes
        for path in paths:
            unmount_under(Path(path))
            shutil.rmtree(path, ignore_errors=True)
        if not any(os.path.lexists(path) for path in paths):
            return
        time.sleep(0.5)


def _wait_for_eof(paths: list[str], daemon: subprocess.Popen[bytes] | None) -> None:
    """Until stdin ends, adding the paths it names; reaps the daemon if it exits first."""
    stdin = sys.stdin.fileno()
    watched = [stdin]
    pidfd = os.pidfd_open(daemon.pid) if daemon is not None else None
    if pidfd is not None:
        watched.append(pidfd)
    pending = b""
    while True:
        ready, _, _ = select.select(watched, [], [])
        if stdin in ready:
            chunk = os.read(stdin, 4096)
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\n")
            paths.extend(line.decode() for line in lines if line.strip())
        if pidfd is not None and pidfd in ready and daemon is not None and daemon.poll() is not None:
            watched.remove(pidfd)
            os.close(pidfd)
            pidfd = None


def start(path: Path, log: Path | None = None, daemon_argv: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """(in the test process) a keeper of `path`, starting `daemon_argv` if given; it and its first line (the daemon's
    pid, 0, or `failed: WHY`)."""
    argv = [sys.executable, "-S", "-B", str(Path(__file__).resolve()), str(path)]
    if daemon_argv:
        argv += [str(log), "--", *daemon_argv]
    keeper = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    assert keeper.stdout is not None
    return keeper, keeper.stdout.readline().decode(errors="replace").strip()


def keep(keeper: subprocess.Popen[bytes], path: str) -> None:
    """(in the test process) one more path for the keeper to clean up."""
    assert keeper.stdin is not None
    keeper.stdin.write(path.encode() + b"\n")
    keeper.stdin.flush()


def finish(keeper: subprocess.Popen[bytes], paths: list[str], wait_s: float = 120) -> None:
    """(in the test process) let the keeper clean up now and wait for it; a keeper stuck past `wait_s` (a safety net)
    is killed and its clean-up done here."""
    if keeper.stdin is not None:
        keeper.stdin.close()
    try:
        keeper.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        keeper.kill()
        keeper.wait()
        clean_up(paths, None)
    if keeper.stdout is not None:
        keeper.stdout.close()


def main(argv: list[str]) -> int:
    paths, daemon_argv = [argv[0]], argv[3:]
    assert len(argv) == 1 or (len(argv) > 3 and argv[2] == "--"), "usage: keeper.py PATH [LOG -- DAEMON_ARGV...]"
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the test process's Ctrl-C is not the keeper's to act on

    def _stop(signum: int, frame: object) -> None:
        raise SystemExit(f"signal {signum}")

    signal.signal(signal.SIGTERM, _stop)  # someone stopping the keeper itself: clean up and go
    signal.signal(signal.SIGHUP, _stop)
    daemon = None
    try:
        if daemon_argv:
            # pdeathsig: the daemon goes (SIGTERM: dockerd stops its containers) even with the keeper SIGKILLed
            guard = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []
            with open(argv[1], "wb") as out:
                try:
                    daemon = subprocess.Popen([*guard, *daemon_argv], stdin=subprocess.DEVNULL, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True)
                except OSError as exc:
                    print(f"failed: {exc}", flush=True)
                    return 1
        print(daemon.pid if daemon is not None else 0, flush=True)
        _wait_for_eof(paths, daemon)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second request to stop must not cut the clean-up short
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        clean_up(paths, daemon)
        try:
            print("stopped", flush=True)
        except OSError:  # the test process is gone: nobody is reading
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
