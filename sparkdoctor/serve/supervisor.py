"""The small process between sparkdoctor and a server it launches: the server must not outlive sparkdoctor.

sparkdoctor starts this file (stdlib only, `python -I -S supervisor.py ...`) in a session of its own, so its pid
is the process group of everything below it. It starts the server in that same group, writes a record of the
launch (owner, itself, the server, a token) for the sweep (serve/registry.py), and then waits for either:

- the server to exit: it exits the same way (the same status, or killed by the same signal), so sparkdoctor
  sees the server's end as before;
- sparkdoctor to die, SIGKILL and the OOM killer included: it stops the server's whole group (SIGTERM, a
  grace period, SIGKILL) after running any cleanup commands it was given (a container's `stop` and `rm`).

How it knows sparkdoctor died. Linux's parent-death signal (prctl PR_SET_PDEATHSIG) is sent when the THREAD that
started this process ends, not the process: a launch from a worker thread that returns would fire it while
sparkdoctor lives. So the signal is only a wake-up; the proof is getppid(): while sparkdoctor lives, this
process's parent is sparkdoctor's pid (a dead thread's children pass to another thread of the same process);
once the whole process is gone it is reparented to init or a subreaper. getppid() is also polled every
POLL_S (50 ms), so a lost signal (or no prctl: not Linux) only delays the teardown a little. SIGTERM, SIGINT and SIGHUP are
caught and ignored here: sparkdoctor's teardown signals the whole group, and the server gets them itself.

When sparkdoctor dies the group is not all: a process the server started in a session of its own (setsid, a
double fork) has left it, and may have cleared its environment too. This process is a child subreaper (Linux's prctl
PR_SET_CHILD_SUBREAPER): an orphan among its descendants is re-parented to it, never to init, so everything the
server started stays in its process tree. On sparkdoctor's death that tree (walked in /proc: parent pids), the group
and every process that carries the launch's token in its environment, all started no earlier than this one, are
stopped, each through a pidfd opened before the check. When the server exits on its own, this process exits like it
and what it adopted passes to sparkdoctor, a child subreaper too while a server runs (serve/reaper.py).

When this process dies, SIGKILL included, the server gets SIGTERM from its own parent-death signal (set between fork
and exec; this process has one thread, so it fires exactly when this process ends). What the server started is then
re-parented to sparkdoctor (its teardown stops it) or, if sparkdoctor is dead too, to init. For that case every pid of
the tree with its start time is written into the launch record (looked at every TREE_EVERY_S, rewritten when it
changed), and the next launch's sweep stops what is still there by that identity, a daemon with no environment too.
Until a next launch it runs on: nothing that is left when every process of sparkdoctor's is SIGKILLed can stop it
without a PID namespace or a cgroup sparkdoctor does not create (docs/serve.md).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05  # how often the server's exit and getppid() are looked at (two cheap calls)
TOKEN_ENV = "SPARKDOCTOR_SERVER_TOKEN"  # every process of the server inherits it: the sweep's proof of identity
TREE_EVERY_S = 1.0  # how often the tree is looked at for the record (one /proc walk)
KILL_ROUNDS = 200  # SIGKILL walks of the tree at most (a fork bomb aside, the first empties it)


class _Woken(Exception):
    """The parent-death signal arrived."""


def stat_of(pid: int | str) -> tuple[str, list[str]] | None:
    """(comm, the fields after it) of /proc/PID/stat: comm may hold spaces and parentheses, so the fields are split
    after the last ')' (field 3, the state, is the first of them). None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2:].split()


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot): with the pid, a process's identity."""
    found = stat_of(pid)
    return found[1][19] if found else None


def token_of(pid: int) -> str | None:
    """The launch token in the environment of `pid`; None when it has none (or it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    prefix = f"{TOKEN_ENV}=".encode()
    return next((item[len(prefix):].decode(errors="replace") for item in data.split(b"\0") if item.startswith(prefix)),
                None)


def group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes whose process group is pgid, read from /proc, in order."""
    found = []
    for name in os.listdir("/proc"):
        fields = (stat_of(name) or ("", []))[1] if name.isdigit() else []
        if len(fields) >= 3 and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(name))
    return sorted(found)


def _say(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # the pipe's reader was sparkdoctor, which may be gone
        sys.stderr.write(f"[sparkdoctor supervisor] {text}\n")
        sys.stderr.flush()


def _write_record(path: str, doc: dict) -> None:
    if not path:
        return  # no state folder to write to: the parent-death stop still holds
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    except OSError as exc:
        _say(f"cannot write the launch record {path}: {exc.strerror or exc}")


def _prctl(option: int, value: int) -> bool:
    try:  # not Linux: getppid() polling alone, and no subreaper
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _die_with(parent: int) -> None:
    """In the server, between fork and exec: SIGTERM when `parent` (this process) ends, whatever ended it."""
    if _prctl(PR_SET_PDEATHSIG, signal.SIGTERM) and os.getppid() != parent:
        os._exit(70)  # it died before the signal was armed


def tree(root: int, floor: int) -> dict[int, str]:
    """Live (non-zombie) descendants of `root` started no earlier than `floor` (clock ticks): pid -> start time."""
    kids: dict[int, list[tuple[int, str]]] = {}
    for name in os.listdir("/proc"):
        fields = (stat_of(name) or ("", []))[1] if name.isdigit() else []
        if len(fields) >= 20 and fields[0] != "Z" and int(fields[19]) >= floor:
            kids.setdefault(int(fields[1]), []).append((int(name), fields[19]))
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for pid, start in kids.get(todo.pop(), []):
            if pid not in found:
                found[pid] = start
                todo.append(pid)
    return found


def _descends(pid: int, root: int) -> bool:
    """Whether `root` is an ancestor of `pid` (parent pids in /proc)."""
    for _ in range(4096):  # a chain ends at init; the bound only guards against a loop read mid-change
        fields = (stat_of(pid) or ("", []))[1]
        if len(fields) < 2 or int(fields[1]) <= 1:
            return False
        pid = int(fields[1])
        if pid == root:
            return True
    return False


def _reap_adopted(server: int) -> None:
    """Reap what ended among the orphans re-parented here; the server is left to its Popen."""
    for _ in range(64):
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except (ChildProcessError, AttributeError, OSError):
            return
        if info is None or info.si_pid in (0, server):
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, os.WNOHANG)


def carriers(token: str, floor: int, pids: list[int] | None = None) -> list[int]:
    """Live pids (of `pids`, else all), started no earlier than `floor` (clock ticks), whose environment carries
    `token`: the server's processes wherever they went (setsid, a double fork; its group too)."""
    found = []
    for pid in pids if pids is not None else [int(n) for n in os.listdir("/proc") if n.isdigit()]:
        fields = (stat_of(pid) or ("", []))[1]
        if len(fields) >= 20 and fields[0] != "Z" and int(fields[19]) >= floor and token_of(pid) == token:
            found.append(pid)
    return found


def signal_pid(pid: int, sig: int, still: Callable[[int], bool], by_number: bool = False) -> None:
    """`sig` to `pid` if `still(pid)` holds once a pidfd to it is open: a recycled pid is never signalled. Without a
    pidfd it is gone, or there is none (the group's signal and the next launch's sweep are left); `by_number` (the
    sweep: nothing is left after it) then signals the pid that `still` holds for."""
    try:
        fd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        if not by_number:
            return
        fd = None
    try:
        if still(pid):
            os.kill(pid, sig) if fd is None else signal.pidfd_send_signal(fd, sig)
    except OSError:
        pass
    finally:
        if fd is not None:
            os.close(fd)


def _stop_group(pgid: int, grace: float, cleanup: list[list[str]], token: str, floor: int) -> None:
    for argv in cleanup:
        try:  # its own session: the group kill below must not cut it short
            subprocess.run(argv, check=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=grace + 30, start_new_session=True)
        except (OSError, subprocess.SubprocessError) as exc:
            _say(f"cleanup {argv[:3]} failed: {exc}")
    me = os.getpid()

    def ours() -> set[int]:  # what this process adopted or started (any session, any environment), what carries the
        return {*tree(me, floor), *carriers(token, floor), *group_members(pgid)} - {me}  # token, the group

    def still(pid: int) -> bool:
        fields = (stat_of(pid) or ("", []))[1]
        if len(fields) < 20 or fields[0] == "Z" or int(fields[19]) < floor:
            return False
        return int(fields[2]) == pgid or _descends(pid, me) or bool(carriers(token, floor, [pid]))

    def send(sig: int) -> None:
        for pid in ours():
            signal_pid(pid, sig, still)

    send(signal.SIGTERM)
    until = time.monotonic() + grace
    while time.monotonic() < until:
        _reap_adopted(0)  # the server and what was re-parented here, or they stay zombies (which are skipped anyway)
        if not ours():
            return
        time.sleep(0.1)
    for _ in range(KILL_ROUNDS):  # before the group's SIGKILL, which ends this process too: its orphans must not
        send(signal.SIGKILL)  # pass to init first
        _reap_adopted(0)
        if not ours():
            break
        time.sleep(0.01)
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)  # this process included: nothing of it is left


def _exit_like(code: int) -> None:
    if code < 0:
        sig = -code
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)
        os._exit(128 + sig)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="sparkdoctor-supervisor")
    ap.add_argument("--owner", type=int, required=True, help="sparkdoctor's pid (this process's parent)")
    ap.add_argument("--owner-start", default="")
    ap.add_argument("--boot", default="")
    ap.add_argument("--record", default="")
    ap.add_argument("--token", required=True)
    ap.add_argument("--grace", type=float, default=15.0)
    ap.add_argument("--cleanup", default="[]", help="JSON list of argv lists run when the owner dies")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    cleanup = json.loads(args.cleanup)

    waiting = [False]

    def wake(_signum, _frame):
        if waiting[0]:  # only out of the wait (anywhere else the loop's next check comes soon anyway)
            raise _Woken  # the parent may be gone: checked below, not assumed

    # ignored (the group's teardown signals the server itself; this process waits for it to end) by a handler, not
    # SIG_IGN: handlers do not pass through exec to the server
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda _signum, _frame: None)
    signal.signal(signal.SIGUSR1, wake)
    _prctl(PR_SET_PDEATHSIG, signal.SIGUSR1)
    adopting = _prctl(PR_SET_CHILD_SUBREAPER, 1)  # before the server starts: a daemon may leave its group at once
    me = os.getpid()
    pgid = os.getpgrp()
    record = {"record_version": 1, "kind": "local", "token": args.token, "pgid": pgid,
              "owner": {"pid": args.owner, "start": args.owner_start, "boot": args.boot},
              "supervisor": {"pid": me, "start": start_time(me)}, "cleanup": cleanup,
              "program": os.path.basename(command[0]) if command else ""}
    if os.getppid() != args.owner:  # died before the signal was armed
        _write_record(args.record, record)
        sys.exit(70)
    try:
        server = subprocess.Popen(command, env={**os.environ, TOKEN_ENV: args.token},
                                  preexec_fn=lambda: _die_with(me))  # safe here: this process has one thread
    except (OSError, ValueError, IndexError) as exc:
        record["start_error"] = getattr(exc, "strerror", None) or str(exc)
        _write_record(args.record, record)
        _say(f"{os.path.basename(command[0]) if command else '(no command)'} could not start: {record['start_error']}")
        sys.exit(127)
    record["server"] = {"pid": server.pid, "start": start_time(server.pid)}
    _write_record(args.record, record)
    floor, looked = int(start_time(me) or 0), time.monotonic()
    while True:
        code = server.poll()
        if code is not None:
            _exit_like(code)  # what it adopted passes to sparkdoctor, whose teardown stops it
        if os.getppid() != args.owner:
            _say(f"sparkdoctor (pid {args.owner}) is gone: stopping the server (process group {pgid})")
            _stop_group(pgid, args.grace, cleanup, args.token, floor)
            sys.exit(0)
        if adopting:
            _reap_adopted(server.pid)
        if time.monotonic() - looked >= TREE_EVERY_S:  # for a sweep should this process be SIGKILLed
            looked, now = time.monotonic(), sorted([pid, start] for pid, start in tree(me, floor).items())
            if now != record.get("tree"):
                record["tree"] = now
                _write_record(args.record, record)
        with contextlib.suppress(_Woken):  # raised only in here (waiting is set only here), it only cuts a sleep short
            waiting[0] = True
            try:
                time.sleep(POLL_S)
            finally:
                waiting[0] = False


if __name__ == "__main__":
    main()
