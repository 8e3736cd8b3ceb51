"""The file operations `fix` needs on a target, in the standard library only (Python 3.6+), so the
very same code runs in the sparkdoctor process for a local target and, as a script, under the
container's interpreter for a container target (targets/container_files.py sends it in with
`docker exec -i NAME PYTHON -B -c SOURCE`).

As a script it reads one JSON request line on stdin and answers one JSON line on stdout, except
two bulk operations that move raw bytes without base64: `export` writes a tar stream of the named
files on stdout, and `import` reads a tar stream on stdin whose first member (`.request.json`) says
where every other member goes. Every write is atomic (temp + fsync + rename, the mode kept), so a
file in the target is always either its old bytes or its new ones. A rollback's writes (write_under) and removals
(remove with roots) also follow no link: each folder is opened from a root down with O_NOFOLLOW, the file made,
renamed or unlinked by the folder's fd, so a link planted while it runs is refused, not followed. Errors are one line.
"""

import base64
import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import sys
import tarfile
import tempfile

SCRATCH_PREFIX = "sparkdoctor-fix-"
REQUEST_MEMBER = ".request.json"
MAX_READ = 16 * 1024 * 1024  # `read` is for text files a plan edits (pins, env lines), not for wheels


class OpError(Exception):
    """One line: what failed, on which path, why."""


class LinkError(OpError):
    """A write under a root met a symbolic link (or a path outside every root) on its way: refused, not followed."""


def _why(exc):
    return getattr(exc, "strerror", None) or str(exc)


def open_regular(path):
    """A binary handle on `path` (links followed), judged by fstat of what was opened, not by a stat of the name before
    (a FIFO swapped in between): opened without blocking, anything but a regular file is an OSError, never waited on."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a folder)")
    return os.fdopen(fd, "rb")


def sha256_of(path) -> str:
    """A file's sha256 (hex), read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open_regular(path) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_only_fs(path):
    probe = path
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        return bool(os.statvfs(probe).f_flag & getattr(os, "ST_RDONLY", 1))
    except OSError:
        return False


def info(paths, with_hash=False):
    """path -> None (absent) or {kind, size, mode, sha256 (files, when asked), writable, read_only_fs, real}; real: the
    path with every link in it followed (where a write to it lands)."""
    out = {}
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            out[path] = None
            continue
        kind = "link" if stat.S_ISLNK(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"
        row = {"kind": kind, "size": st.st_size, "mode": stat.S_IMODE(st.st_mode),
               "writable": os.access(path, os.W_OK) and os.access(os.path.dirname(path) or "/", os.W_OK),
               "read_only_fs": _read_only_fs(path), "real": os.path.realpath(path)}
        if with_hash and kind in ("file", "link") and os.path.isfile(path):
            try:
                row["sha256"] = sha256_of(path)
            except OSError:
                row["sha256"] = None
        out[path] = row
    return out


def read(path):
    try:
        if os.path.getsize(path) > MAX_READ:
            raise OpError("%s: larger than %d bytes; not a file a plan edits" % (path, MAX_READ))
        with open_regular(path) as fh:
            return fh.read()
    except OSError as exc:
        raise OpError("%s: cannot read: %s" % (path, _why(exc)))


def write(path, data, mode=None):
    """Replace path with data atomically; the mode and owner are kept (or the mode given); parent folders are made.
    A link is written through: the file it names is replaced and the link stays (the server reads that file)."""
    path = os.path.realpath(path) if os.path.islink(path) else path
    folder = os.path.dirname(path) or "."
    tmp = None
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder)
        old = os.stat(path) if os.path.exists(path) else None
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
        _fill(fd, data, old, mode)
        os.replace(tmp, path)
        tmp = None
        fsync_dir(folder)
    except OSError as exc:
        raise OpError("%s: cannot write: %s" % (path, _why(exc)))
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _fill(fd, data, old, mode):
    """The new file's bytes, then by its fd the owner and mode of the file it replaces, `old` (or `mode`; 0o644 for a
    new file), and fsync; the fd is closed."""
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        if old is not None and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(PermissionError):  # root keeps the owner; anyone else cannot give a file away
                os.fchown(fh.fileno(), old.st_uid, old.st_gid)
        if mode is None:
            mode = 0o644 if old is None else stat.S_IMODE(old.st_mode)
        os.fchmod(fh.fileno(), mode)
        os.fsync(fh.fileno())


def _refused(path, why, act=("written", "write")):
    return LinkError("%s: not %s: %s, and this %s follows no link" % (path, act[0], why, act[1]))


def _under(roots, path, act=("written", "write")):
    """The deepest of `roots` that `path` lies under, and the parts of the path below it."""
    root = max((r for r in roots if path.startswith(r.rstrip("/") + "/")), key=len, default=None)
    if root is None:
        raise _refused(path, "it lies outside %s" % ", ".join(roots), act)
    return root, path[len(root.rstrip("/")) + 1:].split("/")


def _folder_fd(root, parts, path, make=True, act=("written", "write")):
    """An fd of root/parts...: root opened as it is, each part below it with O_NOFOLLOW | O_DIRECTORY from the fd of
    the one before (a missing folder is made there when `make`), so no link on the way is followed, whenever it was
    planted."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            if part in ("", ".", ".."):
                raise _refused(path, "its path is not normal", act)
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened as any other
                    os.mkdir(part, 0o777, dir_fd=fd)
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError:
                if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise _refused(path, "%s is a symbolic link" % os.path.join(root, *parts[:i + 1]), act)
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_under(roots, path, data, mode=None):
    """write(), but only inside one of `roots` and through no link: the file's folders are opened one by one from the
    deepest root the path lies under (_folder_fd), the file made under a temporary name in that folder's fd (O_EXCL |
    O_NOFOLLOW), its owner and mode set by fd, then renamed over the old one by fd. A link on the way, or in the file's
    place, is refused (LinkError), whenever it was planted: nothing is written through it."""
    root, parts = _under(roots, path)
    name, tmp, dfd = parts[-1], None, None
    try:
        dfd = _folder_fd(root, parts[:-1], path)
        if name in ("", ".", ".."):
            raise _refused(path, "its path is not normal")
        try:
            old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISLNK(old.st_mode):
            raise _refused(path, "it is a symbolic link")
        tmp = ".%s.%s.tmp" % (name, base64.b32encode(os.urandom(10)).decode("ascii").lower())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        _fill(fd, data, old, mode)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
        with contextlib.suppress(OSError):
            os.fsync(dfd)
    except LinkError:
        raise
    except OSError as exc:
        raise OpError("%s: cannot write: %s" % (path, _why(exc)))
    finally:
        if tmp is not None and dfd is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
        if dfd is not None:
            os.close(dfd)


def fsync_dir(folder):
    """Make a rename in `folder` durable; a file system that cannot fsync a folder is left at that."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.fsync(fd)
    os.close(fd)


def remove(paths, prune=False, roots=None):
    """Unlink the files (a missing one is fine); with prune, then drop their folders that are left
    empty but for a __pycache__ of .pyc files. A folder that keeps anything else keeps its __pycache__
    too: those .pyc files belong to the modules still there (site-packages/__pycache__ holds every
    top-level module's). Returns how many files went. With `roots` (a rollback's), each path's folder is resolved
    (a venv's lib64 -> lib), then opened from its root down through no link (_folder_fd): a link planted on the way,
    before or after the resolving, is refused (LinkError), nothing removed through it."""
    gone, folders = 0, set()
    for path in paths:
        if roots is not None:
            path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        try:
            gone += _unlink(path, None) if roots is None else _at(roots, path, _unlink)
        except LinkError:
            raise
        except OSError as exc:
            raise OpError("%s: cannot remove: %s" % (path, _why(exc)))
        folders.add(os.path.dirname(path))
    for folder in sorted(folders, key=lambda f: f.count(os.sep), reverse=True) if prune else ():
        with contextlib.suppress(OSError, OpError):  # best effort: a folder kept (a link on the way, a root) is no harm
            _prune(folder, None) if roots is None else _at(roots, folder, _prune)
    return gone


def _at(roots, path, fn):
    """fn(name, fd of its folder), the folder opened from its root through no link; 0 where the folder is gone."""
    root, parts = _under(roots, path, ("removed", "removal"))
    try:
        dfd = _folder_fd(root, parts[:-1], path, make=False, act=("removed", "removal"))
    except FileNotFoundError:
        return 0
    try:
        return fn(parts[-1], dfd)
    finally:
        os.close(dfd)


def _unlink(name, dfd):
    try:
        if stat.S_ISDIR(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
            return 0
    except FileNotFoundError:
        return 0
    os.unlink(name, dir_fd=dfd)
    return 1


def _prune(folder, dfd, flags=os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC):
    """Drop `folder` (a name in the folder of fd `dfd`, or a path) if it holds nothing but a __pycache__ of .pyc."""
    fd = os.open(folder, flags, dir_fd=dfd)
    try:
        names = os.listdir(fd)
        if names not in ([], ["__pycache__"]):
            return
        if names:
            cache = os.open("__pycache__", flags, dir_fd=fd)
            try:
                pyc = os.listdir(cache)
                if not all(n.endswith(".pyc") for n in pyc):
                    return
                for name in pyc:
                    os.unlink(name, dir_fd=cache)
            finally:
                os.close(cache)
            os.rmdir("__pycache__", dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(folder, dir_fd=dfd)  # only if now empty


def listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        raise OpError("%s: cannot list: %s" % (path, _why(exc)))


def mkscratch():
    try:
        return tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    except OSError as exc:
        raise OpError("cannot make a temporary folder in the target: %s" % _why(exc))


def rmscratch(path):
    if not os.path.basename(path).startswith(SCRATCH_PREFIX):
        raise OpError("%s: not a sparkdoctor scratch folder; not removed" % path)
    shutil.rmtree(path, ignore_errors=True)


def export_tar(paths, out):
    """A tar stream on `out` of each path that is a regular file, as members "0", "1", ... (index in paths)."""
    with tarfile.open(fileobj=out, mode="w|") as tar:
        for i, path in enumerate(paths):
            if not os.path.isfile(path):
                continue
            try:
                with open_regular(path) as fh:
                    st = os.fstat(fh.fileno())
                    member = tarfile.TarInfo(str(i))
                    member.size, member.mode, member.mtime = st.st_size, stat.S_IMODE(st.st_mode), int(st.st_mtime)
                    tar.addfile(member, fh)
            except OSError as exc:
                raise OpError("%s: cannot read: %s" % (path, _why(exc)))


def import_tar(stream):
    """Write every member of a tar stream to where its request says, atomically (with its `roots`: write_under them);
    returns the count."""
    done = 0
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        where, roots = None, None
        for member in tar:
            data = tar.extractfile(member).read() if member.isfile() else b""
            if where is None:
                if member.name != REQUEST_MEMBER:
                    raise OpError("import: the stream does not start with its request")
                request = json.loads(data.decode("utf-8"))
                where = {name: (path, mode) for name, path, mode in request["items"]}
                roots = request.get("roots")
                continue
            path, mode = where[member.name]
            if roots is None:
                write(path, data, mode)
            else:
                write_under(roots, path, data, mode)
            done += 1
    return done


def handle(request):
    op = request.get("op")
    if op == "info":
        return {"items": info(request["paths"], bool(request.get("hash")))}
    if op == "read":
        return {"data": base64.b64encode(read(request["path"])).decode("ascii")}
    if op == "write":
        write(request["path"], base64.b64decode(request["data"]), request.get("mode"))
        return {}
    if op == "remove":
        return {"removed": remove(request["paths"], bool(request.get("prune")), request.get("roots"))}
    if op == "list":
        return {"names": listdir(request["path"])}
    if op == "mkscratch":
        return {"path": mkscratch()}
    if op == "rmscratch":
        rmscratch(request["path"])
        return {}
    raise OpError("unknown file operation %r" % (op,))


def main():
    seconds = int(os.environ.get("SPARKDOCTOR_FILEOPS_DEADLINE", "0") or 0)
    if seconds > 0 and hasattr(__import__("signal"), "alarm"):
        __import__("signal").alarm(seconds)  # killing `docker exec` does not stop this: it stops itself
    mode = sys.argv[1] if len(sys.argv) > 1 else "json"
    try:
        if mode == "import":
            sys.stdout.write(json.dumps({"imported": import_tar(sys.stdin.buffer)}) + "\n")
        elif mode == "export":
            export_tar(json.loads(sys.stdin.readline())["paths"], sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(json.dumps(handle(json.loads(sys.stdin.readline()))) + "\n")
    except (OpError, KeyError, ValueError, tarfile.TarError) as exc:
        said = ("link: " if isinstance(exc, LinkError) else "") + str(exc).replace("\n", " ")
        sys.stderr.write("sparkdoctor-fileops: %s\n" % said)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
