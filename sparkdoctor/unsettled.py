"""One small file per target whose fix is under way: state_dir()/fix-unsettled/<key>.json.

Written (atomically) before an apply or a rollback changes the first thing, removed when it ends
settled (applied, or rolled back). A SIGKILL, an OOM kill or a power cut in between leaves it, so
`check` (which reads only this one file, never a journal) and `fix` can say that the target is
half-changed and which command settles it. Standard library and sparkdoctor's base only: check imports this.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from sparkdoctor.inputs import read_text
from sparkdoctor.locations import state_dir

MAX_MARK = 64 * 1024  # a mark is one small JSON object (a few hundred bytes)


def _folder() -> Path:
    return state_dir() / "fix-unsettled"


def _path(target_key: str) -> Path:
    return _folder() / (key_digest(target_key) + ".json")


def key_digest(target_key: str) -> str:
    """A target key's file name part (a path that is not UTF-8 keeps its bytes, as the file system gave them)."""
    return hashlib.sha256(os.fsencode(target_key)).hexdigest()[:16]


def mark(target_key: str, label: str, journal: str, doing: str) -> None:
    """Record that `doing` (apply, rollback) of `journal` is under way on this target."""
    path = _path(target_key)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"target_key": target_key, "target": label, "journal": journal, "doing": doing, "pid": os.getpid(),
                       "started": _started(os.getpid())}).encode()
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(body)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def clear(target_key: str, journal: str) -> None:
    """The apply or rollback of `journal` ended settled; a newer one's mark is left alone."""
    found = read(target_key)
    if found is not None and found.get("journal") == journal:
        with contextlib.suppress(OSError):
            _path(target_key).unlink()


def read(target_key: str) -> dict[str, object] | None:
    """The mark of this target; None when there is none. A mark that is there but cannot be read (damaged, not a
    file) is {"damaged": PATH}: a fix may not have finished, and check must not say the target is fine."""
    path = _path(target_key)
    try:
        data = _load(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError):  # a FIFO, a device, a folder, too big: refused at once, never waited on
        data = None
    if isinstance(data, dict) and isinstance(data.get("journal"), str):
        return data
    return {"damaged": str(path)} if os.path.lexists(path) else None


def _load(path: Path) -> object:
    """A mark's JSON, read as every file input is (sparkdoctor.inputs): a regular file only, opened without blocking
    (a FIFO in its place would hang check and fix past any --timeout), at most MAX_MARK bytes."""
    return json.loads(read_text(path, MAX_MARK))


def message(found: Mapping[str, object]) -> str:
    if found.get("damaged"):
        return (f"a sparkdoctor fix of this target left a damaged state file {found['damaged']}: an apply or rollback may "
                "not have finished; settle one listed as interrupted with its rollback, else delete the file; see "
                "`sparkdoctor fix --history`")
    doing, journal = "apply" if found.get("doing") == "apply" else "rollback", str(found["journal"])
    if _running(found):  # not "did not finish": its lock refuses a rollback now, and it may well end settled
        return (f"a sparkdoctor fix {doing} of this target is running now (process {found['pid']}, journal {journal}): "
                "the environment is half-changed until it ends; check again after it")
    return (f"a sparkdoctor fix {doing} of this target did not finish (journal {journal}): the environment may be "
            f"half-changed; settle it with `sparkdoctor fix --rollback {journal}`")


def _started(pid: int) -> str | None:
    """When process `pid` started (field 22 of /proc/PID/stat): with the pid it names one process, as pids are reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _running(found: Mapping[str, object]) -> bool:
    """The fix that wrote this mark is alive (the same process: pid and start time), on this machine."""
    pid, started = found.get("pid"), found.get("started")
    return isinstance(pid, int) and pid > 0 and isinstance(started, str) and _started(pid) == started


def local_key(python: str) -> str:
    """A local interpreter's key: the environment it runs, so that a venv's bin/python, python3 and python3.11 are
    one target (one lock, one mark): the venv's folder (pyvenv.cfg beside the interpreter's folder or in it, as site
    finds it; resolving the interpreter would make every venv of one Python one target), else the interpreter
    resolved (/usr/bin/python3 is /usr/bin/python3.11)."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(python)))
    for venv in (os.path.dirname(folder), folder):
        if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
            return venv
    return os.path.realpath(python)


def _named_key(python: str) -> str:
    """The key marks were written under before they named the environment (the interpreter's folder and name)."""
    return os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(python))), os.path.basename(python))


def for_target(desc: Mapping[str, object]) -> dict[str, object] | None:
    """The unfinished fix of the target check describes (Target.describe()): a local interpreter by
    its key; a container by its name (the marks folder holds one small file per target)."""
    if desc.get("kind") == "container":
        prefix = f"container:{desc.get('container')}:"
        try:
            names = sorted(_folder().glob("*.json"))
        except OSError:
            return None
        for path in names:
            try:
                data = _load(path)
            except (OSError, ValueError, RecursionError):
                continue
            if isinstance(data, dict) and str(data.get("target_key", "")).startswith(prefix) and isinstance(data.get("journal"), str):
                return data
        return None
    python = desc.get("python")
    if not isinstance(python, str) or not python:
        return None
    return read(local_key(python)) or read(_named_key(python))  # a stat or two, one small read
