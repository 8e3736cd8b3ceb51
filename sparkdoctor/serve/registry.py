"""Every server sparkdoctor launches is recorded in the state folder until it is proven gone, and the next
launch sweeps what a killed sparkdoctor left behind.

A record (`<state>/servers/<id>.json`) names its owner (sparkdoctor's pid, start time and boot id) and either a
local process group (the supervisor's pid and start time, the server's, and a token every process of the
server carries in its environment) or a container (the CLI, its name and the owner label it was started
with). The supervisor (serve/supervisor.py) writes local records; the container launcher writes its own before
`run`. A clean teardown deletes the record.

The sweep never kills a recycled pid: a process is only signalled when its start time is not before the
supervisor's and it is either a recorded pid with its recorded start time (the supervisor, the server, and every
process of the supervisor's tree it last recorded: a daemon that cleared its environment too) or carries the
record's token in its environment; the signal goes through a pidfd opened before that check where the kernel has them. A local record of
another boot (its owner's boot id) is dropped unread: start times count from boot, so its pairs identify nothing. A container is
only removed when its owner label is the record's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypedDict

from sparkdoctor import proc
from sparkdoctor.files import write_text
from sparkdoctor.locations import state_dir
from sparkdoctor.serve import supervisor
from sparkdoctor.serve.supervisor import signal_pid, start_time, stat_of, token_of
from sparkdoctor.targets.container_inspect import CLI_ENV, RUNTIME_ENV, inspected
from sparkdoctor.targets.interface import TargetError

SWEEP_GRACE_S = 5.0


def servers_dir() -> Path:
    return state_dir() / "servers"


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


class Owner(TypedDict):
    """The sparkdoctor process a record belongs to, as the record keeps it."""

    pid: int
    start: str
    boot: str
    host: str


def me() -> Owner:
    pid = os.getpid()
    return {"pid": pid, "start": start_time(pid) or "", "boot": boot_id(), "host": socket.gethostname()}


def owner_alive(owner: Mapping[str, object]) -> bool:
    if owner.get("host") not in (None, socket.gethostname()):
        return True  # another machine's (a shared state folder): not ours to judge
    if owner.get("boot") and owner.get("boot") != boot_id():
        return False
    pid = owner.get("pid")
    return isinstance(pid, int) and pid > 0 and start_time(pid) == str(owner.get("start"))


def record_path(run_id: str) -> Path | None:
    """Where a new launch's record goes; None when the state folder cannot be written (the launch goes on)."""
    folder = servers_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder / f"{run_id}.json"


def write(path: Path | None, doc: Mapping[str, object]) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            write_text(path, json.dumps(doc) + "\n")


def forget(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def read(path: Path) -> dict[str, object] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("owner"), dict) else None


# ---- local process groups -------------------------------------------------------------------------------------------
def _belongs(pid: int, doc: dict[str, object]) -> bool:
    """Whether live `pid` provably belongs to the launch `doc` records (see the module's rule)."""
    sup = doc.get("supervisor")
    if not isinstance(sup, dict):
        return False
    try:
        floor = int(str(sup.get("start")))
    except (TypeError, ValueError):
        return False
    fields = (stat_of(pid) or ("", []))[1]
    if len(fields) < 20 or fields[0] == "Z" or int(fields[19]) < floor:  # gone, or a zombie, or started before
        return False
    known = {(p.get("pid"), str(p.get("start"))) for p in (sup, doc.get("server") or {}) if isinstance(p, dict)}
    tree = doc.get("tree")  # the supervisor's descendants as it last saw them: [pid, start] pairs
    known |= {(t[0], str(t[1])) for t in (tree if isinstance(tree, list) else []) if isinstance(t, list) and len(t) == 2}
    token = str(doc.get("token") or "")
    return (pid, fields[19]) in known or bool(token and token_of(pid) == token)


def ours(doc: dict[str, object]) -> list[int]:
    """Live pids that provably belong to the launch `doc` records."""
    try:
        names = [e.name for e in Path("/proc").iterdir() if e.name.isdigit()]
    except OSError:
        return []
    return sorted(int(n) for n in names if _belongs(int(n), doc))


def _sweep_local(doc: dict[str, object], grace: float) -> str | None:
    pids = ours(doc)
    if not pids:
        return None
    for pid in pids:
        signal_pid(pid, signal.SIGTERM, lambda p: _belongs(p, doc), by_number=True)
    until = time.monotonic() + grace
    while time.monotonic() < until and ours(doc):
        time.sleep(0.1)
    left = ours(doc)
    for pid in left:
        signal_pid(pid, signal.SIGKILL, lambda p: _belongs(p, doc), by_number=True)
    how = "SIGTERM" + (" then SIGKILL" if left else "")
    return f"process group {doc.get('pgid')} ({doc.get('program') or 'server'}, {len(pids)} process(es)): {how}"


def _remove_ipc_dirs(doc: dict[str, object]) -> None:
    """The private socket folder (launch.py's sd-ipc-*) the dead supervisor's cleanup would have removed: only that
    shape of cleanup, a real folder of this user's; nothing from the record is ever run."""
    cleanup = doc.get("cleanup")
    for argv in cleanup if isinstance(cleanup, list) else []:
        if not (isinstance(argv, list) and len(argv) == 4 and argv[:3] == ["rm", "-rf", "--"] and isinstance(argv[3], str)):
            continue
        path = Path(argv[3])
        try:
            st = path.lstat()
        except OSError:
            continue
        if path.is_absolute() and path.name.startswith("sd-ipc-") and stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)


# ---- containers ---------------------------------------------------------------------------------------------------
def _sweep_container(doc: dict[str, object]) -> tuple[str | None, bool]:
    """(what was removed, whether the record can go)."""
    cli, name, label = doc.get("cli"), doc.get("name"), doc.get("owner_label")
    if not (isinstance(cli, list) and cli and isinstance(name, str) and name and isinstance(label, str)):
        return None, True
    if not _runnable(cli):
        return None, False  # a program no container setting here names: never run, the record kept for a run that has it
    res = proc.run([*cli, "container", "inspect", name], timeout=30)
    if res.start_error:
        return None, False  # the CLI is not here now: keep the record for a run that has it
    if not res.ok:
        return None, "no such" in (res.stderr + res.stdout).lower()
    try:
        labels = (inspected(res.stdout, "").get("Config") or {}).get("Labels") or {}  # type: ignore[attr-defined]
    except (TargetError, AttributeError):
        return None, False
    if labels.get("sparkdoctor.owner") != label:
        return None, True  # a container of that name that is not the one recorded: never ours to remove
    rm = proc.run([*cli, "rm", "-f", "-v", name], timeout=60)
    return (f"container {name}" if rm.ok else None), rm.ok


def _runnable(cli: list[object]) -> bool:
    """The record's container CLI is one this machine would pick (docker, podman, or the runtime its environment
    names): a program named only by a state file (damaged, or written by someone else) is never run."""
    names = [n for n in ("docker", "podman", os.environ.get(RUNTIME_ENV), os.environ.get(CLI_ENV)) if n]
    return len(cli) == 1 and isinstance(cli[0], str) and cli[0] in {shutil.which(n) for n in names} - {None}


def sweep(folder: Path | None = None, grace: float = SWEEP_GRACE_S) -> list[str]:
    """Stop what launches of a sparkdoctor that is gone left running; one line per thing stopped."""
    folder = folder or servers_dir()
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError:
        return []
    done = []
    for path in paths:
        doc = read(path)
        if doc is None:
            if time.time() - _mtime(path) > 60:  # not one being written now
                forget(path)
            continue
        owner = doc["owner"]  # a dict: read() keeps no other record
        if isinstance(owner, dict) and owner_alive(owner):
            continue
        if doc.get("kind") == "container":
            what, drop = _sweep_container(doc)
        elif isinstance(owner, dict) and owner.get("boot") and owner.get("boot") != boot_id():
            what, drop = None, True  # launched before a reboot: none of it runs, and a pid with its start time is
            _remove_ipc_dirs(doc)  # no identity across boots (the same pair may be an unrelated process now)
        else:
            what = _sweep_local(doc, grace)
            drop = not ours(doc)
            if drop:
                _remove_ipc_dirs(doc)
        if what:
            done.append(what)
        if drop:
            forget(path)
    return done


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


# ---- starting under the supervisor ----------------------------------------------------------------------------
def supervised(argv: list[str], record: Path | None, token: str, grace: float, cleanup: list[list[str]] | None = None) -> list[str]:
    """`argv` run under serve/supervisor.py, which stops it (and runs `cleanup`) when this process dies."""
    owner = me()
    return [sys.executable, "-I", "-S", supervisor.__file__, "--owner", str(owner["pid"]), "--owner-start",
            str(owner["start"]), "--boot", owner["boot"], "--record", str(record or ""), "--token", token,
            "--grace", f"{grace:g}", "--cleanup", json.dumps(cleanup or []), "--", *argv]


def wait_record(path: Path, alive: Callable[[], bool], timeout: float = 15.0) -> dict[str, object] | None:
    """The record the supervisor writes once the server started (or could not); None if it never came while
    `alive()` (the supervisor still runs)."""
    until = time.monotonic() + timeout
    while True:
        doc = read(path)
        if doc is not None and ("server" in doc or "start_error" in doc):
            return doc
        if not alive() or time.monotonic() >= until:
            return read(path)
        time.sleep(0.02)
