"""A real container runtime for tests: Debian's docker.io, one dockerd per test session, left behind
by nothing.

The daemon runs on its own socket, data root and exec root under a short folder of its own in /tmp, with no
bridge and no iptables rules (--bridge=none --iptables=false), so it touches neither the machine's
firewall nor its network, and never meets another dockerd (another test session's, or the machine's).
Images are built without a registry: `docker import` of a skeleton root file system (a few folders,
20 kB) whose containers get the host's /usr (and the test interpreter's base prefix) read-only, so
a venv made on the host runs inside at the same path (see research/container-runtime.md).

Clean-up, whatever happened: every container removed, the daemon stopped by its own PID (then its
process group killed), mounts under its roots unmounted, and the machine's iptables rules, links and
mounts compared with what they were before; a daemon this code did not start is never touched. The daemon is
started and cleaned up by a keeper process of its own (tests/keeper.py), which does that clean-up when the test
process closes its stdin or ends in any way: a teardown cut short (a second Ctrl-C, xdist killing a worker that took
longer than 10 s to stop) left the daemon's shims, containers and mounts behind.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

from sparkdoctor import proc
from tests import debian
from tests import keeper as keepers

SKELETON_DIRS = ("proc", "sys", "dev", "tmp", "etc", "usr", "opt", "root", "run", "sbin", "var", "var/tmp", "work")


def skeleton_tar(tar_path: Path, dirs: tuple[str, ...] = SKELETON_DIRS, files: dict[str, bytes] | None = None) -> Path:
    """The root file system of a skeleton image as a tarball: empty folders (the temporary ones sticky
    and world-writable), /bin, /lib, /lib64 linked into the host /usr the containers mount, and a passwd
    (`files`, {path in the image: content}, adds to or replaces these)."""
    with tarfile.open(tar_path, "w") as tar:
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name in ("tmp", "var/tmp") else 0o755
            tar.addfile(info)
        for link, to in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, to
            tar.addfile(info)
        for name, content in {"etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n", **(files or {})}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
    return tar_path


class NoRuntime(Exception):
    """No container runtime can run here; the message is the skip reason."""


def _ensure_dockerd() -> str:
    found = debian.install(("docker.io",), lambda: shutil.which("dockerd"))
    if not found:
        raise NoRuntime("dockerd is not installed and this user cannot apt-get install docker.io")
    return found


def _machine_state() -> dict[str, str]:
    """What a daemon could leave behind: firewall rules, network links, mounts under docker's paths."""
    def out(argv: list[str]) -> str:
        res = proc.run(argv, timeout=20) if shutil.which(argv[0]) else None
        return res.stdout if res is not None and res.ok else ""

    links = "\n".join(sorted(line.split(":")[1].strip() for line in out(["ip", "-o", "link"]).splitlines() if ":" in line))
    return {"iptables": out(["iptables", "-S"]), "links": links}


@dataclass
class Daemon:
    root: Path
    socket: Path
    keeper: subprocess.Popen[bytes]
    pid: int  # dockerd's
    before: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    containers: list[str] = field(default_factory=list)

    def docker(self, *args: str, timeout: float = 120, input: str | None = None) -> proc.ProcResult:
        return proc.run(["docker", *args], timeout=timeout, env=self.env, input=input)

    def must(self, *args: str, timeout: float = 120) -> str:
        res = self.docker(*args, timeout=timeout)
        if not res.ok:
            raise RuntimeError(f"docker {' '.join(args)}: {res.describe_failure()}\n{res.stderr[-2000:]}")
        return res.stdout.strip()

    def import_skeleton(self, tag: str, dirs: tuple[str, ...] = SKELETON_DIRS, files: dict[str, bytes] | None = None) -> str:
        """A registry-free image: an empty root with the mount points the skeleton containers need."""
        tar_path = skeleton_tar(self.root / f"{tag.replace(':', '-').replace('/', '-')}.tar", dirs, files)
        self.must("import", "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", str(tar_path), tag)
        return tag

    def run_container(self, name: str, image: str, mounts: list[tuple[str, str]], *extra: str, network: str = "none",
                      command: tuple[str, ...] = ("sleep", "infinity")) -> str:
        args = ["run", "-d", "--init", "--network", network, "--name", name]
        for src, dst in mounts:
            args += ["-v", f"{src}:{dst}:ro"]
        self.containers.append(name)
        self.must(*args, *extra, image, *command)
        return name

    def host_mounts(self) -> list[tuple[str, str]]:
        """/usr and the test interpreter's base prefix (a pyenv Python lives outside /usr)."""
        mounts = [("/usr", "/usr")]
        base = os.path.realpath(sys.base_prefix)
        if not base.startswith("/usr/"):
            mounts.append((base, base))
        return mounts

    def alive(self) -> bool:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state != "Z"

    def stop(self) -> None:
        """Remove every container, then let the keeper stop the daemon and undo what it left; idempotent. Interrupted
        here (a second Ctrl-C), the keeper still finishes: it goes on once its stdin is closed."""
        try:
            if self.keeper.poll() is None:
                for name in self.containers:
                    self.docker("rm", "-f", name, timeout=60)
        finally:  # interrupted or not, the keeper goes on once its stdin is closed
            keepers.finish(self.keeper, [str(self.root)])
        after = _machine_state()
        if "docker0" in after["links"] and "docker0" not in self.before["links"]:
            proc.run(["ip", "link", "del", "docker0"], timeout=20)
        shutil.rmtree(self.root, ignore_errors=True)


def short_root(prefix: str) -> Path:
    """A new folder with a short path, for a daemon's roots. podman refuses a runroot over 50 characters and a unix
    socket path holds at most 107 bytes, while a pytest tmp path grows with pytest's run counter and the xdist
    worker (/tmp/pytest-of-root/pytest-13/popen-gw1/podman0/run is 51: every podman test skipped). The daemon's
    stop() removes it."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp" if os.path.isdir("/tmp") else None))


class Runtime(Protocol):
    def stop(self) -> None: ...


R = TypeVar("R", bound=Runtime)


def session_runtime(prefix: str, start: Callable[[Path], R], cannot: str) -> Iterator[R]:
    """A session fixture's body: a runtime started on a new short root, yielded, stopped at the end; the test
    skipped with `cannot: why` where it cannot run here."""
    root = short_root(prefix)
    try:
        runtime = start(root)
    except NoRuntime as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"{cannot}: {exc}")
    try:
        yield runtime
    finally:
        runtime.stop()


def start_daemon(root: Path) -> Daemon:
    dockerd = _ensure_dockerd()
    if os.geteuid() != 0:
        raise NoRuntime("dockerd needs root here (no rootless setup)")
    if not shutil.which("docker"):
        raise NoRuntime("no docker client on PATH")
    root.mkdir(parents=True, exist_ok=True)
    socket = root / "docker.sock"
    before = _machine_state()
    argv = [dockerd, "--data-root", str(root / "data"), "--exec-root", str(root / "exec"), "--pidfile", str(root / "dockerd.pid"),
            "-H", f"unix://{socket}", "--bridge=none", "--iptables=false", "--ip6tables=false"]
    log = root / "dockerd.log"
    # the daemon goes with the worker that started it, however the worker ends (tests/keeper.py): a run stopped by
    # SIGTERM to its process group left every test dockerd running, and a teardown cut short by a second Ctrl-C or
    # by xdist's kill left their shims, containers and mounts
    keeper, first = keepers.start(root, log, tuple(argv))
    if not first.isdigit():
        daemon_failed = Daemon(root, socket, keeper, -1, before)
        daemon_failed.stop()
        raise NoRuntime(f"dockerd did not start: {first or 'the keeper said nothing'}")
    daemon = Daemon(root, socket, keeper, int(first), before, env={**os.environ, "DOCKER_HOST": f"unix://{socket}"})
    try:
        deadline = time.monotonic() + 120  # a safety net: dockerd answers in seconds, more on a loaded machine
        while time.monotonic() < deadline:
            if not daemon.alive():
                tail = log.read_text(errors="replace")[-500:] if log.exists() else ""
                raise NoRuntime(f"dockerd exited at start: {tail.strip().splitlines()[-1] if tail.strip() else 'no log'}")
            if socket.exists() and daemon.docker("version", timeout=10).ok:
                return daemon
            time.sleep(0.3)
        raise NoRuntime("dockerd did not answer within 120 s")
    except BaseException:  # NoRuntime, or Ctrl-C while it started: nobody else will stop it
        daemon.stop()
        raise
