"""Sandbox escapes a mod's script tries, as a hostile mod would: a unix socket server outside the sandbox (docker.sock,
a D-Bus or ssh-agent socket are such servers), the machine's secrets (/etc/shadow, keys in a home), and making unix
sockets at all. Each is a real attempt from a real run.sh under bwrap; the server side is a real listening socket."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkdoctor.mods import sandbox, scratch_watch
from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import Verdict
from sparkdoctor.mods.trees import SiteTree
from tests.mods.test_mods_recipe import target_venv
from tests.mods.test_mods_scripts import EUGR_SITE, folder
from tests.mods.test_mods_static import BEFORE, sd


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


@pytest.fixture
def tree(tmp_path) -> SiteTree:
    root = tmp_path / "site"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "toy.py").write_text(BEFORE)
    return SiteTree([root], str(root))


def _run_dir() -> Path:
    """/run where this user may make a folder there (root; docker.sock's neighbourhood), else /dev/shm: both are
    outside every folder the sandbox is given."""
    return Path("/run") if os.access("/run", os.W_OK) else Path("/dev/shm")


@contextlib.contextmanager
def listening(base: Path) -> Iterator[tuple[Path, socket.socket]]:
    """A listening unix socket in a new folder under `base`, removed again."""
    where = base / f"sd-sock-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    path = where / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o777)
    listener.listen(8)
    listener.setblocking(False)
    try:
        yield path, listener
    finally:
        listener.close()
        shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(params=["tmp", "var-tmp", "run"])
def server(request) -> Iterator[tuple[Path, socket.socket]]:
    """A listening unix socket outside the sandbox: in the machine's temp folder ($TMPDIR: the test's own folder
    can be deeper than a unix socket's 108-byte path allows), in /var/tmp, under /run."""
    base = {"tmp": Path(tempfile.gettempdir()), "var-tmp": Path("/var/tmp"), "run": _run_dir()}[request.param]
    with listening(base) as found:
        yield found


def connections(listener: socket.socket) -> list[bytes]:
    """What reached the server: a connect() is queued in the backlog whether or not it was accepted yet."""
    got = []
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return got
        conn.settimeout(5)
        try:
            got.append(conn.recv(100))
        except OSError:
            got.append(b"")
        conn.close()


CONNECT = ("python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
           "s.sendall(b'GET /containers/json')\" {path} || true\n")


def test_a_unix_socket_server_outside_the_sandbox_is_not_reached(tmp_path, tree, server):
    path, listener = server
    mod = folder(tmp_path, CONNECT.format(path=path))
    judge_mod(mod, tree)
    assert connections(listener) == []


def test_no_unix_socket_can_be_made_inside(tmp_path, tree):
    """The seccomp filter: socket(AF_UNIX) and a datagram socketpair (which could be re-pointed at any socket
    file) fail; a stream socketpair, which nothing can re-point, still works (asyncio makes one)."""
    probe = ("import socket, sys\n"
             "for make in (lambda: socket.socket(socket.AF_UNIX),\n"
             "             lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM),\n"
             "             lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)):\n"
             "    try:\n"
             "        make()\n"
             "    except PermissionError:\n"
             "        continue\n"
             "    sys.exit(3)\n"
             "import asyncio\n"
             "asyncio.run(asyncio.sleep(0))\n")
    mod = folder(tmp_path, "set -e\npython3 probe.py\n", probe_py=probe)
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.NO_EFFECT, result


@pytest.fixture
def planted_key() -> Iterator[Path]:
    """A private key in this user's home (a folder of its own, removed again), as ~/.ssh/id_ed25519 would be."""
    where = Path.home() / f".sparkdoctor-test-{uuid.uuid4().hex[:8]}" / ".ssh"
    where.mkdir(parents=True)
    key = where / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
                   "AAAECWJvYkBzcGFyaw==\n-----END OPENSSH PRIVATE KEY-----\n")
    try:
        yield key
    finally:
        shutil.rmtree(where.parent, ignore_errors=True)


def test_secrets_of_the_machine_are_not_in_the_sandbox(tmp_path, tree, planted_key):
    secret_files = ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/environment", "/etc/pip.conf",
                    str(planted_key)]
    checks = "".join(f"[ -e {p} ] && {{ echo 'visible: {p}' >&2; exit 3; }}\n" for p in secret_files)
    mod = folder(tmp_path, checks + f"cat {planted_key} /etc/shadow ~/.ssh/id_* 2>/dev/null\n"
                 "[ -z \"$(find /root /home /run /var/run -mindepth 1)\" ] || { echo 'a home or /run is visible' >&2; exit 3; }\n"
                 "[ \"$(hostname)\" = sparkdoctor-mod ] || exit 4\n")
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.NO_EFFECT, result
    assert "PRIVATE KEY" not in json.dumps(result.to_dict())


def test_a_script_cannot_take_the_machines_memory_or_disk(tmp_path, tree):
    """A memory bomb in a mod filled the host (a Spark's memory is the GPU's too): no limit but the time limit was
    set. Now the script's address space and the files it writes are bounded, and it cannot raise the limits.
    (A 6 GiB bytearray is calloc'ed lazily: without the limit it succeeds without touching the machine's memory.)"""
    mod = folder(tmp_path, "set -e\npython3 -c 'bytearray(6 * 2**30)'\n")
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.FAILS and "MemoryError" in result.detail, result
    mod = folder(tmp_path / "again", "ulimit -v unlimited 2>/dev/null && exit 3\nulimit -f unlimited 2>/dev/null && exit 4\n"
                                     "[ \"$(ulimit -f)\" != unlimited ] || exit 5\nexit 0\n")
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.NO_EFFECT, result


FORKS = """python3 - {marker} <<'EOF'
import os, sys, time
n = 0
try:
    while n < 3000:
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        n += 1
except BlockingIOError:  # EAGAIN: the process count
    sys.exit(0 if n < 1024 else 7)
sys.exit(7)
EOF
"""


def test_a_fork_bomb_stops_at_the_process_count(tmp_path, tree):
    """A fork bomb in a mod ran until the time limit: the kernel exempts root from RLIMIT_NPROC, and the suite (like
    many a container) runs as root. Now a root caller's script runs as `nobody` (still root inside), so the count
    binds; the forks stop at 1,024 processes with EAGAIN and everything forked dies with the sandbox."""
    marker = f"sparkdoctor-fork-bomb-{uuid.uuid4().hex}"  # this test's forks, no other `python3 -`
    result = judge_mod(folder(tmp_path, "set -e\n" + FORKS.format(marker=marker)), tree)
    assert result.verdict is Verdict.NO_EFFECT, result
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).startswith(f"python3 - {marker}")]
    assert not left, left


def test_where_nobody_cannot_start_the_sandbox_a_roots_script_still_edits_its_copy(tmp_path, tree, monkeypatch):
    """The scratch folder under a folder `nobody` cannot reach (pytest's own, mode 0700): the sandbox runs as root as
    before, and the copy it was given back is root's again, so the script's edit is seen."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mod = folder(tmp_path, f"sed -i 's/splits = 4/splits = max(4, n)/' {EUGR_SITE}/vllm/toy.py\n")
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.APPLIES, result


def _cmdline(pid: Path) -> str:
    try:
        return (pid / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_the_system_a_mod_needs_is_there(tmp_path, tree):
    """What the sandbox keeps: the tools a mod runs (bash, sed, awk through /etc/alternatives, patch, python3), a
    user name, a writable /tmp, and the read-only root (a write to /etc fails)."""
    mod = folder(tmp_path, "set -e\nsed --version >/dev/null\necho x | awk '{print $1}' >/dev/null\npatch --version >/dev/null\n"
                           "id -un >/dev/null\npython3 -c 'import getpass, json; getpass.getuser()'\n"
                           "t=$(mktemp)\necho ok > \"$t\"\nif touch /etc/x 2>/dev/null; then exit 3; fi\n")
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.NO_EFFECT, result


def test_recipe_check_runs_mods_in_the_same_sandbox(tmp_path):
    """`recipe check` (and whatif --recipe, rerun, bench's launch gate: sparkdoctor.mods.recipe) judge a recipe's
    mods through the one sandbox: its run.sh cannot reach the socket either."""
    with listening(_run_dir()) as (path, listener):
        _recipe_check_with_a_socket_mod(tmp_path, path)
        assert connections(listener) == []


def _recipe_check_with_a_socket_mod(tmp_path: Path, path: Path) -> None:
    python = target_venv(tmp_path, BEFORE)
    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    (repo / "mods" / "fix-sock").mkdir(parents=True)
    (repo / "mods" / "fix-sock" / "run.sh").write_text("#!/bin/bash\n" + CONNECT.format(path=path))
    recipe = repo / "recipes" / "toy.yaml"
    recipe.write_text('recipe_version: "1"\nname: toy\nmodel: org/toy\ncontainer: vllm-node\n'
                      'mods: ["mods/fix-sock"]\ncommand: vllm serve org/toy --port 8000\n')
    done = sd("recipe", "check", str(recipe), "--python", str(python), "-f", "json")
    assert json.loads(done.stdout)["kind"], done.stderr


def test_only_the_sandbox_starts_bwrap():
    """One sandbox function: no other module of sparkdoctor builds a bwrap command line, and mods are judged
    (mods check, recipe check, whatif --recipe, rerun, bench) only through judge_mod, which runs scripts there."""
    root = Path(__file__).resolve().parents[2] / "sparkdoctor"
    starts = [p.relative_to(root).as_posix() for p in root.rglob("*.py") if re.search(r"[\"']bwrap[\"']", p.read_text())]
    assert starts == ["mods/sandbox.py"]
    runs = [p.relative_to(root).as_posix() for p in root.rglob("*.py") if "sandbox import run_script" in p.read_text()]
    assert runs == ["mods/judge.py"]


def _link_into_hidden_etc() -> Path | None:
    """A link in /usr/lib to a part of /etc the sandbox hides (Debian's /usr/lib/ssl/private -> /etc/ssl/private)."""
    from sparkdoctor.mods.sandbox import ETC

    for link in sorted(Path("/usr/lib").glob("*/*")):
        target = os.path.realpath(link)
        if link.is_symlink() and target.startswith("/etc/") and target.split("/")[2] not in ETC and os.path.isdir(target):
            return link
    return None


def test_a_site_path_in_a_system_folder_shows_no_hidden_file_through_a_link(tmp_path, tree):
    """A site path that is not there (`/usr/lib/ssl/sd/site-packages`) makes the sandbox cover its nearest folder with
    a tmpfs and put that folder's entries back: a link among them stays a link, so /usr/lib/ssl/private does not
    become the machine's /etc/ssl/private."""
    link = _link_into_hidden_etc()
    if link is None:
        pytest.skip("no link from /usr/lib into a hidden part of /etc on this machine")
    mod = folder(tmp_path, f": {link.parent}/sd-absent/site-packages\n[ -e {link}/. ] && exit 3\nexit 0\n")
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.NO_EFFECT, result


def test_a_file_a_script_names_through_dot_dot_is_never_written_outside_the_scratch_folder(tmp_path, monkeypatch):
    """The files a script names are copied into its scratch site folder: `vllm/../../../x.py` was written wherever
    it pointed when the tree answered for it (a released wheel's member names are not checked for `..`)."""

    class AnyTree:  # stands for a tree (a hostile wheel) that has every file it is asked for
        label = "any"

        def read(self, rel: str) -> bytes:
            return b"planted\n"

    scratch_parent = tmp_path / "tmp"
    scratch_parent.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_parent))
    escape = "vllm/../../../escaped.py"  # from <tmp>/sparkdoctor-mod-XXXX/site: <tmp>/escaped.py
    mod = folder(tmp_path, f"cat /usr/local/lib/python3.12/dist-packages/{escape} || true\n")
    judge_mod(mod, AnyTree())
    assert not (tmp_path / "escaped.py").exists() and not list(tmp_path.rglob("escaped.py"))


def test_a_script_cannot_fill_the_machines_memory_through_a_tmpfs(tmp_path, tree, monkeypatch):
    """`ulimit -v` does not count a tmpfs: /tmp, /dev/shm, /run, /home and the rest were each half the machine's
    memory, so a script writing files there filled it (on a Spark, the GPU's too). Now each is bounded, and /dev
    itself (a tmpfs as well) is read-only."""
    monkeypatch.setattr(sandbox, "TMPFS_BYTES", 8 * 2**20)
    places = ["/tmp", "/dev/shm", "/run", "/home", "/root", "/var/tmp"]
    lines = "".join(f"head -c 12M /dev/zero > {p}/big 2>/dev/null && echo 'FILLED {p}'\n" for p in places)
    mod = folder(tmp_path, lines + "{ echo x > /dev/new; } 2>/dev/null && echo 'FILLED /dev'\nexit 0\n")
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.NO_EFFECT, result
    assert "FILLED" not in json.dumps(result.to_dict()), result


def test_a_script_cannot_fill_the_callers_disk_one_file_under_the_limit_after_another(tmp_path, tree, monkeypatch):
    """`ulimit -f` bounds each file; a script writing file after file into its home (the scratch folder, on the
    caller's disk) filled the disk in its 60 s. Now the scratch folder is measured while the script runs and the
    sandbox is stopped once it holds more than scratch_watch.MAX_BYTES; a folder the script keeps making unreadable
    does not hide what it holds (from root; another caller stops the script at such a folder, the test below)."""
    monkeypatch.setattr(scratch_watch, "MAX_BYTES", 16 * 2**20)
    run_sh = ('mkdir "$HOME/hid"\nfor i in $(seq 1 400); do head -c 1M /dev/urandom > "$HOME/hid/f$i"; '
              'chmod 000 "$HOME/hid"; sleep 0.01; chmod 700 "$HOME/hid"; done\nchmod 000 "$HOME/hid"\nsleep 30\nexit 0\n')
    result = judge_mod(folder(tmp_path, run_sh), tree)
    assert result.verdict is Verdict.FAILS and "was stopped: wrote more than 16 MiB" in result.detail, result


def test_files_deleted_while_held_open_count_too(tmp_path, tree, monkeypatch):
    """A file deleted while the script holds it open has no name in the scratch folder, and writing through the
    descriptor filled the disk past every named-file bound. Such files are found through the open descriptors of the
    sandbox's processes and count towards the bound too (no reading of the disk's free space, which the rest of the
    machine moves)."""
    monkeypatch.setattr(scratch_watch, "MAX_BYTES", 16 * 2**20)
    run_sh = ('exec 3>"$HOME/held"\nrm "$HOME/held"\n'
              'for i in $(seq 1 1000); do head -c 1M /dev/zero >&3 || break; done\nsleep 30\nexit 0\n')
    result = judge_mod(folder(tmp_path, run_sh), tree)
    assert result.verdict is Verdict.FAILS and "in files deleted while still open" in result.detail, result


MAPPED = """python3 - <<'PYEOF'
import ctypes, mmap, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
path = os.path.join(os.environ["HOME"], "mapped")
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, 32 << 20)
at = libc.mmap(None, 32 << 20, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
os.close(fd)  # only the mapping holds it now: no descriptor names it
os.unlink(path)
ctypes.memset(at, 1, 32 << 20)
time.sleep(30)
PYEOF
exit 0
"""


def test_a_deleted_file_held_only_by_a_mapping_counts_too(tmp_path, tree, monkeypatch):
    """A file mapped shared, its descriptor closed and its name removed, is in no folder and behind no descriptor:
    written through the mapping it took the disk unseen. The sandbox's processes' maps name it."""
    monkeypatch.setattr(scratch_watch, "MAX_BYTES", 16 * 2**20)
    result = judge_mod(folder(tmp_path, MAPPED), tree)
    assert result.verdict is Verdict.FAILS and "in files deleted while still open" in result.detail, result


def test_processes_whose_files_cannot_be_read_stop_the_script(tmp_path, tree, monkeypatch):
    """Root without CAP_SYS_PTRACE (a container's default) cannot read the open files of a script running as nobody:
    they were counted as none. What cannot be measured is not let run on."""
    def refused(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(scratch_watch, "_listdir", refused)
    result = judge_mod(folder(tmp_path, "sleep 30\nexit 0\n"), tree)
    assert result.verdict is Verdict.FAILS and "open files cannot be read here" in result.detail, result


def test_a_disk_filled_by_something_else_stops_the_script_without_blaming_the_mod(tmp_path, tree, monkeypatch):
    """The backstop for what no count reaches: the disk's free space falling far beyond what the script can be shown
    to hold stops it, as cannot-tell (a download beside a mod check is no fault of the mod)."""
    free = iter([100 * 2**30] + [90 * 2**30] * 10_000)
    monkeypatch.setattr(scratch_watch, "_free", lambda _root: next(free))
    result = judge_mod(folder(tmp_path, "sleep 30\nexit 0\n"), tree)
    assert result.verdict is Verdict.CANNOT_TELL and scratch_watch.DISK_FILLED in result.detail, result


def test_a_folder_that_shuts_the_caller_out_stops_the_script_and_is_never_chmodded(tmp_path, monkeypatch):
    """The watcher made such a folder readable with a chmod by name; a script swapping a symlink in at that name
    turned the chmod onto any file the caller owns (0600 -> 0777). The caller here is root, whom no mode shuts out:
    the refusal is stood in for at that one name."""
    root = tmp_path / "scratch"
    (root / "hid").mkdir(parents=True)
    (root / "hid").chmod(0o000)
    real_open = os.open

    def refusing(path, flags, mode=0o777, *, dir_fd=None):
        if path == "hid":
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(scratch_watch.os, "open", refusing)
    reason, _size = scratch_watch.over(root)
    assert reason is not None and "shuts the caller out" in reason, reason
    assert stat.S_IMODE((root / "hid").stat().st_mode) == 0, "the watcher changed a mode"
    # the scratch folder itself, shut by the script (`chmod 000 $SCRATCH`): every bound was skipped
    monkeypatch.setattr(scratch_watch.os, "open", lambda path, *a, **k: refusing("hid", 0) if path == root else real_open(path, *a, **k))
    reason, _size = scratch_watch.over(root)
    assert reason is not None and "cannot be measured" in reason, reason


def test_a_script_cannot_fill_the_disks_inodes(tmp_path, tree, monkeypatch):
    monkeypatch.setattr(scratch_watch, "MAX_ENTRIES", 500)
    run_sh = 'for i in $(seq 1 2000); do : > "$HOME/f$i"; done\nsleep 30\nexit 0\n'
    result = judge_mod(folder(tmp_path, run_sh), tree)
    assert result.verdict is Verdict.FAILS and "more than 500 files" in result.detail, result


KEYS = """python3 - <<'PYEOF'
import ctypes, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
keyctl = 219 if platform.machine() == "aarch64" else 250
found = libc.syscall(keyctl, ctypes.c_long(10), ctypes.c_long(-3), b"user", b"NAME", ctypes.c_long(0))  # KEYCTL_SEARCH
if found > 0:
    buf = ctypes.create_string_buffer(64)
    n = libc.syscall(keyctl, ctypes.c_long(11), ctypes.c_long(found), buf, ctypes.c_long(64))  # KEYCTL_READ
    sys.exit(7 if n > 0 else 0)
PYEOF
"""


def test_the_callers_session_keyring_is_not_reachable(tmp_path, tree):
    """bwrap does not namespace the kernel's keyrings: a script (as `nobody` too) inherited this process's session
    keyring and read a key put there. Now the keyring calls are refused by the seccomp filter."""
    import ctypes
    import platform

    libc = ctypes.CDLL(None, use_errno=True)
    add_key, keyctl = (217, 219) if platform.machine() == "aarch64" else (248, 250)
    name = f"sparkdoctor-test-{uuid.uuid4().hex}".encode()
    key = libc.syscall(add_key, b"user", name, b"PLANTED-KEY", ctypes.c_size_t(11), ctypes.c_long(-3))
    if key <= 0:
        pytest.skip(f"no session keyring here (errno {ctypes.get_errno()})")
    try:
        result = judge_mod(folder(tmp_path, KEYS.replace("NAME", name.decode())), tree)
        assert result.verdict is Verdict.NO_EFFECT, result
    finally:
        libc.syscall(keyctl, ctypes.c_long(9), ctypes.c_long(key), ctypes.c_long(-3))  # KEYCTL_UNLINK


DEEP = """cd "$HOME"
for i in $(seq 1 LEVELS); do d=$(printf 'd%.0s' $(seq 1 100)); mkdir "$d"; cd "$d"; done
head -c 24M /dev/urandom > big
sleep 30
exit 0
"""


def test_what_a_script_writes_past_path_max_is_counted(tmp_path, tree, monkeypatch):
    """A folder deeper than PATH_MAX (made by `cd`-ing down, 60 levels of 100 characters) could not be listed by its
    path, so what it held was not counted: 200 MB went past a 64 MiB bound. The scratch folder is now walked through
    folder descriptors, and nesting deeper than scratch_watch.MAX_DEPTH stops the script too."""
    monkeypatch.setattr(scratch_watch, "MAX_BYTES", 16 * 2**20)
    result = judge_mod(folder(tmp_path, DEEP.replace("LEVELS", "60")), tree)
    assert result.verdict is Verdict.FAILS and "was stopped: wrote more than 16 MiB" in result.detail, result
    monkeypatch.setattr(scratch_watch, "MAX_DEPTH", 20)
    result = judge_mod(folder(tmp_path / "again", DEEP.replace("LEVELS", "40")), tree)
    assert result.verdict is Verdict.FAILS and "more than 20 deep" in result.detail, result


def test_a_folder_past_path_max_in_the_site_copy_is_a_verdict_not_an_error(tmp_path, tree):
    """A script that `cd`s 50 levels of 100 characters down its site copy and writes there: comparing the copy
    before and after ended `mods check` (and a recipe check) with "File name too long". Now that folder is listed
    as unreadable and the script's edit is judged."""
    run_sh = (f'cd {EUGR_SITE}/vllm\nfor i in $(seq 1 50); do d=$(printf "d%.0s" $(seq 1 100)); mkdir "$d"; cd "$d"; done\n'
              f"echo x > deep.py\nsed -i 's/splits = 4/splits = max(4, n)/' {EUGR_SITE}/vllm/toy.py\n")
    result = judge_mod(folder(tmp_path, run_sh), tree)
    assert result.verdict is Verdict.APPLIES, result
    assert any(f.path == "vllm/toy.py" for f in result.files), result


def test_a_bubblewrap_that_cannot_bound_a_tmpfs_runs_no_script(tmp_path, tree, monkeypatch):
    """The tmpfs bound needs `--size` (bubblewrap 0.7+, Ubuntu 22.04 has 0.6.1; refused when bwrap is setuid). Such a
    bwrap failed every script on its unknown option, a "fails" verdict for a mod that was never run. Now no script
    is run there (cannot-tell, saying why), as without bwrap at all. A stand-in bwrap that refuses --size."""
    from sparkdoctor.mods import sandbox as sb

    fake = tmp_path / "bin"
    fake.mkdir()
    real = shutil.which("bwrap")
    (fake / "bwrap").write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = --size ] && {{ echo "bwrap: Unknown option --size" >&2; '
                                f'exit 1; }}; done\nexec {real} "$@"\n')
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    clear = getattr(getattr(sb, "_sized_tmpfs", None), "cache_clear", lambda: None)
    clear()
    flag = tmp_path / "ran"
    try:
        result = judge_mod(folder(tmp_path, f"touch {flag}\n"), tree)
    finally:
        clear()
    assert result.verdict is Verdict.CANNOT_TELL and "--size" in result.detail, result
    assert not flag.exists(), "a script ran"
