"""A container target's files, through the container CLI: targets/fileops.py runs under the
container's own interpreter (`docker exec -i NAME PYTHON -B -c SOURCE MODE`), so nothing is
installed in the container and nothing stays there but what a fix writes on purpose.

Small operations send one JSON line and read one back. Bulk copies move raw bytes as a tar stream
through a file on the host (written under RLIMIT_FSIZE, and `sh -c 'exec "$@" < FILE'` the other way), so a journal
of a few hundred MB of libraries costs one exec, not one per file and not base64. Every call goes
through proc with a timeout, and the script inside stops itself at a deadline of its own (killing
the container CLI does not stop what it started inside). A container that was removed or stopped
half-way is a FileError of one line, like every other failure here.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import secrets
import shutil
import signal
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.errors import seconds_from_env
from sparkdoctor.inputs import NotJSON, NumberTooLong, json_answer
from sparkdoctor.targets import early
from sparkdoctor.targets import fileops as ops
from sparkdoctor.targets.container_reap import reaped
from sparkdoctor.targets.files import FileError, LinkRefused


def small_timeout() -> float:
    """How long one small file operation may run: $SPARKDOCTOR_FILEOPS_TIMEOUT, default 120 s (read when one runs)."""
    return seconds_from_env("SPARKDOCTOR_FILEOPS_TIMEOUT", 120)


def bulk_timeout() -> float:
    """How long a bulk copy or hashing may run: $SPARKDOCTOR_FILEOPS_BULK_TIMEOUT, default 900 s (read when one runs)."""
    return seconds_from_env("SPARKDOCTOR_FILEOPS_BULK_TIMEOUT", 900)


RESERVE = 2**30  # of the journal's disk that a copy out of a container never takes (half the free space, when less)
# The copy out's stream, written by the container CLI straight into a file: bounded by RLIMIT_FSIZE (the container is
# someone else's image, and sends what it likes), SIGXFSZ back at its default so the CLI dies at the bound.
BOUNDED_WRITE = ("import os, resource, signal, sys; n = int(sys.argv[2]); resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); "
                 "signal.signal(signal.SIGXFSZ, signal.SIG_DFL); fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | "
                 "os.O_TRUNC, 0o600); os.dup2(fd, 1); os.close(fd); os.execvp(sys.argv[3], sys.argv[3:])")


def _index(name: str) -> int | None:
    """The path index a member's name is ("0", "1", ...: never "00", "+1" or another digit)."""
    return int(name) if name.isascii() and name.isdecimal() else None


def export_cap(dest: Path) -> int:
    """The most bytes a copy out's stream may take in `dest`: half its disk's free space less RESERVE (or less half of
    it), as the files unpacked from the stream take as much again beside it."""
    try:
        free = shutil.disk_usage(dest).free
    except OSError:
        return RESERVE // 2
    return max(0, free - min(RESERVE, free // 2)) // 2


@lru_cache(maxsize=1)
def _source() -> str:
    return early.NO_CWD + Path(ops.__file__).read_text(encoding="utf-8")


class ContainerFiles:
    def __init__(self, target: Any):
        self.target = target
        self.where = f"container {target.name}"

    def _argv(self, mode: str, timeout: float, token: str) -> list[str]:
        """The exec of the file operations, bounded in the container past their own deadline (reaped by `token`)."""
        t = self.target
        return t.exec_argv([t.python, "-S", "-B", "-c", _source(), mode], stdin=True, seconds=timeout + 10, token=token,
                           env=(f"SPARKDOCTOR_FILEOPS_DEADLINE={int(timeout) + 5}",))  # -S: stdlib; no .pth code runs

    def _failed(self, res: proc.ProcResult, what: str) -> FileError:
        lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
        said = [ln[len("sparkdoctor-fileops: "):] for ln in lines if ln.startswith("sparkdoctor-fileops: ")]
        if said and not res.timed_out:
            link = said[-1].startswith("link: ")
            return (LinkRefused if link else FileError)(f"{self.where}: {said[-1][len('link: ') if link else 0:]}")
        why = res.describe_failure() if res.timed_out or res.start_error or not lines else lines[-1][:300]
        return FileError(f"{self.where}: {what}: {why}")

    def _call(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        timeout = small_timeout() if timeout is None else timeout
        token = secrets.token_hex(16)
        res = reaped(proc.run(self._argv("json", timeout, token), timeout=timeout, input=json.dumps(request) + "\n"), token)
        if not res.ok:
            raise self._failed(res, f"file operation {request.get('op')}")
        try:
            return json_answer(res.stdout.strip().splitlines()[-1])  # type: ignore[return-value]
        except (NotJSON, IndexError) as exc:
            said = f": its answer {exc}" if isinstance(exc, NumberTooLong) else " gave no answer"
            raise FileError(f"{self.where}: file operation {request.get('op')}{said}") from None

    def info(self, paths, with_hash=False):
        if not paths:
            return {}
        timeout = bulk_timeout() if with_hash else small_timeout()
        return self._call({"op": "info", "paths": list(paths), "hash": with_hash}, timeout)["items"]

    def read(self, path):
        return base64.b64decode(self._call({"op": "read", "path": path})["data"])

    def write(self, path, data, mode=None):
        self._call({"op": "write", "path": path, "data": base64.b64encode(data).decode("ascii"), "mode": mode})

    def remove(self, paths, prune=False, roots=None):
        request = {"op": "remove", "paths": list(paths), "prune": prune, **({} if roots is None else {"roots": roots})}
        return self._call(request)["removed"] if paths else 0

    def listdir(self, path):
        return self._call({"op": "list", "path": path})["names"]

    def export(self, paths, dest):
        """path -> {"name": file in dest, "mode"} for each path that is a regular file: one tar stream."""
        paths = list(paths)
        if not paths:
            return {}
        dest = Path(dest)
        with tempfile.TemporaryDirectory(prefix="sparkdoctor-export-", dir=dest) as tmp:
            stream = Path(tmp) / "out.tar"
            cap = export_cap(dest)
            token, timeout = secrets.token_hex(16), bulk_timeout()
            argv = [sys.executable, "-I", "-S", "-c", BOUNDED_WRITE, str(stream), str(cap), *self._argv("export", timeout, token)]
            res = reaped(proc.run(argv, timeout=timeout, input=json.dumps({"paths": paths}) + "\n"), token)
            if res.signal == signal.SIGXFSZ or (not res.ok and stream.is_file() and stream.stat().st_size >= cap):
                raise FileError(f"{self.where}: copying files out: it sent more than {cap:,} bytes (the free space of "
                                f"{dest} less a reserve): stopped, nothing kept")
            if not res.ok:
                raise self._failed(res, "copying files out")
            out: dict[str, dict[str, Any]] = {}
            written: list[str] = []
            try:
                with tarfile.open(stream, mode="r:") as tar:
                    for member in tar:
                        # plain files only, which unpack to no more than they took in the stream (so twice the cap
                        # in all): a sparse member of a few KB unpacks to whatever size it claims, and a link member
                        # of 512 bytes to a whole copy of the file it names
                        if not member.isreg() or member.issparse() or member.name != str(_index(member.name)):
                            continue
                        src = tar.extractfile(member)
                        if src is None:
                            continue
                        target = dest / member.name
                        written.append(member.name)
                        with open(target, "wb") as fh:
                            shutil.copyfileobj(src, fh, 1 << 20)
                            fh.flush()
                            os.fsync(fh.fileno())
                        out[paths[int(member.name)]] = {"name": member.name, "mode": member.mode}
            except (tarfile.TarError, OSError, IndexError, ValueError) as exc:
                for name in written:  # nothing kept: a half copy out is no copy
                    with contextlib.suppress(OSError):
                        (dest / name).unlink()
                raise FileError(f"{self.where}: the copy out is damaged: {exc}") from None
        return out

    def import_files(self, items, roots=None):
        """Each (host file, target path, mode) written in the container, atomically, in one tar stream; with `roots`,
        by fileops.write_under in the container: its folders opened one by one there, refusing a link on the way."""
        items = list(items)
        if not items:
            return 0
        with tempfile.TemporaryDirectory(prefix="sparkdoctor-import-") as tmp:
            stream = Path(tmp) / "in.tar"
            try:
                with tarfile.open(stream, mode="w") as tar:
                    rows = [[str(i), path, mode] for i, (_src, path, mode) in enumerate(items)]
                    request = json.dumps({"items": rows, **({} if roots is None else {"roots": list(roots)})}).encode()
                    head = tarfile.TarInfo(ops.REQUEST_MEMBER)
                    head.size = len(request)
                    tar.addfile(head, io.BytesIO(request))
                    for i, (src, _path, _mode) in enumerate(items):
                        tar.add(str(src), arcname=str(i), recursive=False)
            except OSError as exc:
                raise FileError(f"cannot pack files for {self.where}: {exc.strerror or exc}") from None
            token, timeout = secrets.token_hex(16), bulk_timeout()
            argv = ["sh", "-c", 'exec "$@" < "$0"', str(stream), *self._argv("import", timeout, token)]
            res = reaped(proc.run(argv, timeout=timeout), token)
            if not res.ok:
                raise self._failed(res, "copying files in")
        return len(items)

    @contextmanager
    def scratch(self) -> Iterator[str]:
        path = self._call({"op": "mkscratch"})["path"]
        try:
            yield path
        finally:
            with contextlib.suppress(FileError):  # the container went away: its temporary folder went with it
                self._call({"op": "rmscratch", "path": path})
