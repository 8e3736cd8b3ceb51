"""Run a mod's script against a scratch copy of the files it may touch, isolated, and see what it changed.

The isolation is bubblewrap (`bwrap`). The script sees only what a mod needs, read-only: /usr, /bin, /sbin,
/lib*, and the parts of /etc that programs read to start (the loader's cache, alternatives, nsswitch, a
passwd and group of two lines; never shadow, gshadow, sudoers, ssh host keys, pip.conf or environment).
/run, /var/run, /tmp, /var/tmp, /root and /home are empty tmpfs: no home, no agent socket, no docker.sock.
It has no network, its own host name and process tree (everything it forks dies with it), no capabilities,
a time limit, bounded memory in its tmpfs folders and bounded disk in its scratch folder (scratch_watch), and a
seccomp filter (sparkdoctor.mods.seccomp) that refuses unix sockets and every family a network namespace does not
confine (AF_VSOCK), so no socket file
can be reached even where one is visible. The scratch copy of the site folder is the only writable place,
mounted at every site path the script names (so a script that edits
/usr/local/lib/python3.12/dist-packages/vllm/... edits the copy). Without bwrap, or on a machine whose
seccomp ABI sparkdoctor does not know, a script is not run at all: its verdict is "cannot tell", never a
run on the real target. `mods check`, `recipe check`, `whatif --recipe`, `rerun` and bench's launch gate all
run scripts through run_script() here, and nowhere else.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import platform
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sparkdoctor import proc
from sparkdoctor.inputs import TooBig, read_bytes
from sparkdoctor.mods import named, scratch_dirs, scratch_watch, seccomp
from sparkdoctor.mods.model import ModError
from sparkdoctor.mods.trees import MAX_FILE, NotPatchable, Tree, fits_a_path

SCRIPT_TIMEOUT = 60.0
DEFAULT_SITE = "/usr/local/lib/python3.12/dist-packages"  # where eugr's images keep vLLM
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # read-only, as they are
# What programs read from /etc to start and to find names (not secrets, not credentials: no shadow, sudoers, ssh,
# pip.conf, environment, gitconfig): each bound read-only when it exists. passwd and group are written fresh.
ETC = ("alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "host.conf", "hosts",
       "localtime", "timezone", "protocols", "services", "mime.types", "magic", "os-release", "lsb-release",
       "debian_version", "bash.bashrc", "profile", "inputrc", "locale.alias", "perl")
# Set inside the sandbox before the script starts, hard and soft (it cannot raise them): the address space (KiB) a
# memory bomb would fill the machine with (a Spark's 128 GB are the GPU's too), the largest file (KiB) it may
# write into its scratch folder on the caller's disk, and no core dumps.
# The process count (threads too) counts only the sandbox's own user namespace, so a fork bomb stops at it; the
# kernel exempts root from it, so root's scripts run as `nobody` (NOBODY) where this machine lets them.
LIMITS = "ulimit -v 4194304 && ulimit -f 1048576 && ulimit -c 0 && ulimit -u 1024 && ulimit -n 1024"
NOBODY = 65534
EMPTY = ("/run", "/var/run", "/tmp", "/var/tmp", "/root", "/home")  # tmpfs: sockets, homes, other jobs' files
# Each tmpfs the sandbox makes (EMPTY, /dev/shm, a system folder a site path is made in) holds at most this much: a
# tmpfs is memory, unbounded by `ulimit -v`, and by default half the machine's (a Spark's is the GPU's too). /dev
# itself is read-only.
TMPFS_BYTES = 256 * 2**20
MAX_NAMED_FILES = 512  # files of the serving stack a mod's texts name (a community mod names a few)
MAX_NAMED_SITES = 8  # site folders they name (eugr's mods name one)


@dataclass
class ScriptRun:
    """What one script did to its scratch tree."""

    result: proc.ProcResult | None
    changed: list[str] = field(default_factory=list)   # site-relative paths whose bytes changed
    created: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)   # named by the script, not in the tree
    refused: str | None = None                         # why it was not run at all


def sandbox_available() -> str | None:
    """None when scripts can be run isolated here; else why not, in words."""
    if shutil.which("bwrap") is None:
        return "no sandbox: bubblewrap (bwrap) is not installed, and a script is never run unisolated"
    if seccomp.program() is None:
        return f"no sandbox: no seccomp filter for this machine ({platform.machine()}), and a script is never run unisolated"
    if not _sized_tmpfs(shutil.which("bwrap") or "bwrap"):
        return ("no sandbox: this bubblewrap cannot bound the size of a tmpfs (--size needs bubblewrap 0.7 or later, "
                "not setuid), and a script is never run with the machine's memory open to it")
    return None


@functools.lru_cache(maxsize=4)
def _sized_tmpfs(bwrap: str) -> bool:
    """Does this bwrap take --size (0.7+; refused in setuid mode)? A failure for another reason (no user namespaces)
    is not this one: the script's own run says it."""
    res = proc.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp", "true"],
                   timeout=30, max_output=(4096, 4096))
    return res.ok or "size" not in (res.stderr + res.stdout).lower()


def referenced_files(texts: list[str]) -> list[str]:
    """Site-relative files a script (and the files beside it) name."""
    out: dict[str, None] = {}
    for text in texts:
        for rel in named.package_files(text):
            if ".." not in rel.split("/") and fits_a_path(rel):  # `vllm/../../x.py` would be copied outside the scratch
                out.setdefault(rel)
    return list(out)


def site_paths(texts: list[str]) -> list[str]:
    found = dict.fromkeys(path for t in texts for path in named.site_folders(t))
    return list(found) or [DEFAULT_SITE]


def _digest(root: Path) -> dict[str, str]:
    """site-relative path -> the sha256 of each regular file, read through sparkdoctor.inputs: a file over
    trees.MAX_FILE (a sparse 64 GB one a script left) is stood for by its size, never read; a FIFO or device
    a script made is stood for by its kind, never opened in a way that blocks."""
    out = {}

    def unreadable(exc: OSError) -> None:  # a folder past PATH_MAX (a script that `cd`s down) is said, not an error
        if exc.filename:
            out[os.path.relpath(os.fsdecode(exc.filename), root)] = f"unreadable: {exc.strerror or exc}"

    for folder, _dirs, names in os.walk(root, onerror=unreadable):
        for name in names:
            _digest_file(root, Path(folder) / name, out)
    return out


def _digest_file(root: Path, path: Path, out: dict[str, str]) -> None:
    rel = path.relative_to(root).as_posix()
    try:
        if path.is_symlink():
            return
        size = path.lstat().st_size
        out[rel] = (f"over {MAX_FILE} bytes: {size} bytes, not read" if size > MAX_FILE
                    else hashlib.sha256(read_bytes(path, MAX_FILE)).hexdigest())
    except TooBig:
        out[rel] = f"grew past {MAX_FILE} bytes while read"
    except OSError as exc:
        out[rel] = f"unreadable: {exc.strerror or exc}"


def _copy_mod(mod_dir: Path, work: Path) -> None:
    """The mod folder copied (links as links), or a mod that is one script copied alone (the folder it lies in is
    no part of it: `mods check ~/fix.sh` gave the script the home, ~/.ssh with it); a FIFO, device or socket in it
    is refused in one line, not opened (copying one would block or fail half-way)."""
    if not mod_dir.is_dir():
        work.mkdir()
        shutil.copy2(mod_dir, work / mod_dir.name, follow_symlinks=False)
        return
    for folder, dirs, names in os.walk(mod_dir):
        for name in [*dirs, *names]:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                raise ModError(f"{os.path.join(folder, name)}: not a regular file, folder or link (a FIFO, device or socket); "
                               "a mod folder holds files")
    shutil.copytree(mod_dir, work, symlinks=True)


def _mount_args(target: str, source: Path) -> list[str]:
    """bwrap arguments that make `source` appear, writable, at `target`.

    Outside the read-only system folders bwrap makes the path itself (in its own root, or in a tmpfs). Inside
    them a mount point must exist: when `target` does not, the deepest folder above it that does is covered by a
    tmpfs and its own entries are mounted back read-only, so the new path can be made inside."""
    anchor = Path(target)
    while not anchor.exists() and anchor != anchor.parent:
        anchor = anchor.parent
    if anchor == Path(target) or not any(Path(os.path.realpath(anchor)).is_relative_to(top) for top in SYSTEM):
        return ["--bind", str(source), target]
    args = ["--size", str(TMPFS_BYTES), "--tmpfs", str(anchor)]
    for entry in sorted(os.listdir(anchor)):
        args += _keep(str(anchor / entry))  # a link stays a link: /usr/lib/ssl/private -> /etc/ssl/private shows nothing
    return args + ["--bind", str(source), target]


def _keep(path: str) -> list[str]:
    """`path` as it is here, read-only: a link stays a link (/bin -> usr/bin), a missing one is left out."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path] if os.path.exists(path) else []


def _as_nobody(scratch: Path) -> list[str]:
    """For root: the prefix that runs bwrap as `nobody` (the script still sees itself as root inside), the scratch
    folder given to it. Empty where that cannot start here (no setpriv, no unprivileged user namespaces, a
    TMPDIR `nobody` cannot reach): the script then runs as before, bounded by its time limit alone."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return []
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    _chown_tree(scratch, NOBODY)
    probe = proc.run([*prefix, "bwrap", "--unshare-all", "--ro-bind", "/", "/", "--bind", str(scratch), str(scratch),
                      "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp", "true"], timeout=30)  # as the script's run asks
    if probe.returncode == 0:
        return prefix
    _chown_tree(scratch, 0)  # root's again: without capabilities root could not write a copy `nobody` owns
    return []


def _chown_tree(root: Path, uid: int) -> None:
    for folder, dirs, names in os.walk(root):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + names)]:
            os.chown(name, uid, uid, follow_symlinks=False)


def _identity(scratch: Path) -> list[str]:
    """A passwd and a group that name root and this user only, with the scratch home: `id`, `whoami` and
    Python's getpass work; no other account on the machine is shown."""
    uid, gid = os.getuid(), os.getgid()
    users = ["root:x:0:0:root:/root:/bin/sh"] + ([f"user:x:{uid}:{gid}::{scratch / 'home'}:/bin/sh"] if uid else [])
    groups = ["root:x:0:"] + ([f"user:x:{gid}:"] if gid else [])
    (scratch / "passwd").write_text("\n".join(users) + "\n")
    (scratch / "group").write_text("\n".join(groups) + "\n")
    return ["--ro-bind", str(scratch / "passwd"), "/etc/passwd", "--ro-bind", str(scratch / "group"), "/etc/group"]


def sandbox_argv(scratch: Path, mounts: list[str], seccomp_fd: int, cwd: Path, nobody: list[str]) -> list[str]:
    """The bwrap command line (before the script's own argv): what the script may see, and nothing else."""
    argv = [*nobody, "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "sparkdoctor-mod", "--seccomp", str(seccomp_fd)]
    if nobody:
        argv += ["--uid", "0", "--gid", "0"]
    for top in SYSTEM:
        argv += _keep(top)
    argv += ["--dir", "/etc"]
    for name in ETC:
        argv += _keep(f"/etc/{name}")
    for folder in sorted(glob.glob("/etc/python3*")):  # Debian's sitecustomize for the system Python
        argv += _keep(folder)
    argv += _identity(scratch)
    argv += ["--dev", "/dev", "--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--proc", "/proc"]
    for empty in EMPTY:
        argv += ["--size", str(TMPFS_BYTES), "--tmpfs", empty]
    # the root itself is read-only too: a write to /etc or / fails as it would on the real root
    return [*argv, "--bind", str(scratch), str(scratch), *mounts, "--remount-ro", "/", "--chdir", str(cwd), "--"]


def _too_many(files: list[str], sites: list[str]) -> str | None:
    """Why the names a mod's texts hold are more than a mod's, or None. Each file named is read from the target (over
    the network for a release), each site folder is a mount (one in a system folder mounts back all its entries):
    20,000 names took 20 s against a release, and 5,000 site folders passed bwrap's 9,000 arguments ("fails")."""
    if len(files) > MAX_NAMED_FILES or len(sites) > MAX_NAMED_SITES:
        return (f"it names {len(files)} file(s) of the serving stack in {len(sites)} site folder(s): a mod is run for "
                f"{MAX_NAMED_FILES} files in {MAX_NAMED_SITES} site folders at most; not run")
    return None


def run_script(argv_in_mod: list[str], mod_dir: Path, texts: list[str], tree: Tree,
               timeout: float = SCRIPT_TIMEOUT) -> ScriptRun:
    """Run `argv_in_mod` (e.g. ["bash", "run.sh"]) from a scratch copy of `mod_dir` (a mod folder, or a script alone),
    against a scratch copy of the files the mod names, and report what changed."""
    files, sites = referenced_files(texts), site_paths(texts)
    why = sandbox_available() or _too_many(files, sites)
    if why:
        return ScriptRun(None, refused=why)
    program = seccomp.program()
    assert program is not None
    with scratch_dirs.scratch_folder() as scratch, tempfile.TemporaryFile() as bpf:  # one a SIGKILL left goes next run
        bpf.write(program)
        bpf.flush()
        bpf.seek(0)
        site, work, home = scratch / "site", scratch / "mod", scratch / "home"
        site.mkdir()
        home.mkdir()
        _copy_mod(mod_dir, work)
        missing = []
        for rel in files:
            try:
                data = tree.read(rel)
            except NotPatchable as exc:  # that mod's verdict, as for a diff: the other mods are still judged
                return ScriptRun(None, refused=f"it names {rel}, which in {tree.label} {exc.why}: not run")
            if data is None:
                missing.append(rel)
                continue
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_bytes(data)
        before = _digest(site)
        mounts: list[str] = []
        for target in sites:
            mounts += _mount_args(target, site)
        nobody = _as_nobody(scratch)
        argv = [*sandbox_argv(scratch, mounts, bpf.fileno(), work, nobody), "bash", "-c", f'{LIMITS} && exec "$@"', "mod", *argv_in_mod]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(home), "LANG": "C.UTF-8",
               "PYTHONPATH": sites[0], "PYTHONDONTWRITEBYTECODE": "1"}
        result = scratch_watch.run(argv, timeout, env, (bpf.fileno(),), scratch)
        after = _digest(site)
    return ScriptRun(
        result,
        changed=sorted(k for k in before if k in after and before[k] != after[k]),
        created=sorted(k for k in after if k not in before),
        removed=sorted(k for k in before if k not in after),
        missing=missing,
    )
