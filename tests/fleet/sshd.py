"""A real OpenSSH server for fleet tests and the fleet benchmark: sshd on 127.0.0.1, a free high port, its
own generated host key, one generated user key, and an ssh client config naming the test's hosts.

sshd comes from Debian's openssh-server, installed by the suite itself when missing (as the docker fixture
installs docker.io; the package's service is not started, invoke-rc.d denies it here). The daemon runs
with a config of its own (no PAM, keys only, this folder's authorized_keys) and is stopped by its own
PID. Host keys are verified as ssh does: the client config points at a known_hosts file holding the
generated host key, under one HostKeyAlias for every test host name.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests import debian
from tests.ports import owns_listener

ALIAS = "sparkdoctor-fleet-sshd"


class NoSshd(Exception):
    """sshd cannot run here; the message says why."""


def sshd_binary() -> str:
    def find() -> str | None:
        return shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)

    found = debian.install(("openssh-server",), find)
    if not found:
        raise NoSshd("sshd is not installed and this user cannot apt-get install openssh-server")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SilentServer:
    """A TCP port that accepts connections and never says a word: a node that hangs."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@dataclass
class Sshd:
    folder: Path
    port: int
    config: Path  # the ssh client config (-F)
    process: subprocess.Popen
    made_privsep_dir: bool
    extra: list = field(default_factory=list)
    binary: str = "sshd"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for thing in self.extra:
            thing.close()
        if self.made_privsep_dir:
            try:
                os.rmdir("/run/sshd")
            except OSError:
                pass


def start_sshd(folder: Path, hosts: list[str], binary: str | None = None, extra: str = "") -> Sshd:
    """sshd on 127.0.0.1 (`binary`, else the installed one); `hosts` (plus `stranger`, `refused`, `hangs`) named in
    folder/ssh_config. `extra`: lines added to its sshd_config (`SetEnv PATH=...`: every login's PATH)."""
    binary = binary or sshd_binary()
    folder.mkdir(parents=True, exist_ok=True)
    for key in ("host_ed25519", "id_ed25519"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sparkdoctor-test", "-f", str(folder / key)],
                       check=True, timeout=60)
    (folder / "authorized_keys").write_text((folder / "id_ed25519.pub").read_text())
    host_pub = (folder / "host_ed25519.pub").read_text().split()
    (folder / "known_hosts").write_text(f"{ALIAS} {host_pub[0]} {host_pub[1]}\n")
    (folder / "empty_known_hosts").write_text("")
    made = False
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):  # privilege separation folder, as the service makes it
        os.makedirs("/run/sshd", mode=0o755)
        made = True
    silent = SilentServer()
    # `refused` is a port held bound and never listening for the server's life: a port that was merely free a moment
    # ago may be some other test's listener by the time a test connects there
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    user = getpass.getuser()
    common = (f"  User {user}\n  IdentityFile {folder / 'id_ed25519'}\n  IdentitiesOnly yes\n  GlobalKnownHostsFile /dev/null\n"
              f"  HostKeyAlias {ALIAS}\n  LogLevel ERROR\n")
    # The port sshd is given was free a moment ago: another process (another xdist worker's server) may bind it first.
    # sshd then exits, "Address already in use", and is started again on another port. It is ready once it listens
    # there itself, not when something answers on that port.
    for attempt in range(5):
        port = free_port()
        (folder / "sshd_config").write_text(_sshd_config(folder, port) + extra)
        config = "".join(f"Host {h}\n  HostName 127.0.0.1\n  Port {port}\n  UserKnownHostsFile {folder / 'known_hosts'}\n{common}"
                         for h in hosts)
        config += f"Host stranger\n  HostName 127.0.0.1\n  Port {port}\n  UserKnownHostsFile {folder / 'empty_known_hosts'}\n{common}"
        config += (f"Host refused\n  HostName 127.0.0.1\n  Port {refused.getsockname()[1]}\n"
                   f"  UserKnownHostsFile {folder / 'known_hosts'}\n{common}")
        config += f"Host hangs\n  HostName 127.0.0.1\n  Port {silent.port}\n  UserKnownHostsFile {folder / 'known_hosts'}\n{common}"
        (folder / "ssh_config").write_text(config)
        try:
            with open(folder / "sshd.log", "wb") as log:
                # it dies with the worker that started it (setpriv execs sshd: one pid), even when an interrupted run
                # never tears its fixtures down
                guard = ["setpriv", "--pdeathsig", "TERM", "--"] if shutil.which("setpriv") else []
                process = subprocess.Popen([*guard, binary, "-D", "-e", "-f", str(folder / "sshd_config")],
                                           stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        except OSError as exc:
            silent.close()
            refused.close()
            if made:
                os.rmdir("/run/sshd")
            raise NoSshd(f"{binary}: {exc.strerror or exc}") from None
        server = Sshd(folder, port, folder / "ssh_config", process, made, [silent, refused], binary)
        deadline = time.monotonic() + 120  # a safety net: sshd listens within a second
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log_text = (folder / "sshd.log").read_text(errors="replace")
                if "Address already in use" in log_text and attempt < 4:
                    break
                server.stop()
                raise NoSshd(f"sshd exited {process.returncode}: {log_text[-300:]}")
            if owns_listener(process.pid, port):
                return server
            time.sleep(0.1)
        else:
            server.stop()
            raise NoSshd("sshd did not listen within 120 s")
    raise AssertionError("unreachable: the last attempt returns or raises")


def _sshd_config(folder: Path, port: int) -> str:
    return f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {folder / 'host_ed25519'}
PidFile {folder / 'sshd.pid'}
AuthorizedKeysFile {folder / 'authorized_keys'}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
MaxStartups 64:30:128
MaxSessions 64
AcceptEnv DOCKER_HOST
LogLevel ERROR
"""
