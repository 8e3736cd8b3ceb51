"""Fleet nodes that are containers, each running its own sshd: the shape of a fleet whose nodes are
reached over ssh straight into the serving container.

Images are built without a registry, as tests/container builds them: a skeleton root (docker import of
a tarball) whose containers mount the host's /usr read-only (sshd, its libraries and the shell come from
Debian's openssh-server, installed by the suite when missing: tests/fleet/sshd.py) and the test
interpreter's base prefix. The image adds what sshd needs of its own: the `sshd` privilege separation
user and /run/sshd. A second image of the same skeleton carries an /etc/nccl.conf (a stale config baked
into one image).

Every container runs its own sshd on its own port of 127.0.0.1 (host network: the session's dockerd has no
bridge), with its own generated host key; one generated user key logs in as root. The test writes the
ssh client config and a known_hosts file holding each node's host key under `[127.0.0.1]:PORT`, so ssh
verifies every node's key exactly as it does for any host (no HostKeyAlias, no relaxed checking).
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.container.docker_daemon import SKELETON_DIRS, Daemon
from tests.fleet.sshd import free_port, sshd_binary

PASSWD = b"root:x:0:0:root:/root:/bin/sh\nsshd:x:101:65534::/run/sshd:/usr/sbin/nologin\n"
NODE_DIRS = (*SKELETON_DIRS, "run/sshd")
VENV_IN_NODE = "/opt/venv"  # every node's serving venv sits at one path; what is in it differs


@dataclass
class NodeSpec:
    name: str
    venv: Path  # a serving venv on the host (tests/fleet/nodes.py), mounted read-only at VENV_IN_NODE
    image: str
    login_env: dict[str, str] = field(default_factory=dict)  # sshd's SetEnv: the login environment of the node


@dataclass
class ContainerNodes:
    config: Path  # ssh client config (-F): one Host per node, plus `impostor`
    known_hosts: Path
    ports: dict[str, int]


def node_image(daemon: Daemon, tag: str, files: dict[str, bytes] | None = None) -> str:
    return daemon.import_skeleton(tag, NODE_DIRS, {"etc/passwd": PASSWD, **(files or {})})


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sparkdoctor-test", "-f", str(path)],
                   check=True, timeout=60)
    kind, key = Path(f"{path}.pub").read_text().split()[:2]
    return f"{kind} {key}"


def _banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.settimeout(2)
            return conn.recv(64).startswith(b"SSH-")
    except OSError:
        return False


def start_nodes(daemon: Daemon, folder: Path, specs: list[NodeSpec], timeout: float = 60) -> ContainerNodes:
    """One container per spec, each with its own sshd; waits until every one answers on its port with its own host key.

    A port is picked free and handed to the container's sshd, which binds it a second or more later: another process
    (another xdist worker's server, another test's sshd) may have taken it by then. That node's sshd exits, and the
    node is started again on another port; a port that answers with some other host key is not the node's."""
    binary = sshd_binary()
    folder.mkdir(parents=True, exist_ok=True)
    _keygen(folder / "id_ed25519")
    host_keys, ports, config, known = {}, {}, [], []
    for spec in specs:
        mine = folder / spec.name
        mine.mkdir()
        host_keys[spec.name] = _keygen(mine / "host_ed25519")
        (mine / "authorized_keys").write_text((folder / "id_ed25519.pub").read_text())
        ports[spec.name] = _start_node(daemon, spec, mine, binary)
    for spec in specs:
        for _ in range(5):
            if _node_answers(daemon, spec.name, ports[spec.name], host_keys[spec.name], time.monotonic() + timeout):
                break
            daemon.docker("rm", "-f", f"sd-fleet-{spec.name}", timeout=60)
            ports[spec.name] = _start_node(daemon, spec, folder / spec.name, binary)
        else:
            raise RuntimeError(f"the sshd of container node {spec.name} lost its port 5 times")
        known.append(f"[127.0.0.1]:{ports[spec.name]} {host_keys[spec.name]}\n")
        config.append(_host(spec.name, ports[spec.name], folder))
    (folder / "known_hosts").write_text("".join(known))
    # a name whose port is node 0's while known_hosts holds node 1's key there: what a swapped or spoofed node looks like
    first, second = specs[0].name, specs[1].name
    (folder / "impostor_known_hosts").write_text(f"[127.0.0.1]:{ports[first]} {host_keys[second]}\n")
    config.append(_host("impostor", ports[first], folder, folder / "impostor_known_hosts"))
    (folder / "ssh_config").write_text("".join(config))
    return ContainerNodes(folder / "ssh_config", folder / "known_hosts", ports)


def _start_node(daemon: Daemon, spec: NodeSpec, mine: Path, binary: str) -> int:
    """Start the node's container with its sshd on a port picked free; the port."""
    port = free_port()
    setenv = "".join(f"SetEnv {k}={v}\n" for k, v in spec.login_env.items())
    (mine / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey /node/host_ed25519
PidFile /run/sshd.pid
AuthorizedKeysFile /node/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
LogLevel ERROR
{setenv}""")
    mounts = [*daemon.host_mounts(), (str(mine), "/node"), (str(spec.venv.parent.parent), VENV_IN_NODE)]
    daemon.run_container(f"sd-fleet-{spec.name}", spec.image, mounts, network="host",
                         command=(binary, "-D", "-e", "-f", "/node/sshd_config"))
    return port


def _node_answers(daemon: Daemon, name: str, port: int, host_key: str, until: float) -> bool:
    """True once `port` answers with the node's own host key; False if the node's container stopped first (its sshd
    could not bind the port). Past `until` (a safety net, not a verdict on how fast it starts): RuntimeError."""
    while True:
        if _banner(port) and host_key in _host_keys(port):
            return True
        state = daemon.docker("inspect", "-f", "{{.State.Running}}", f"sd-fleet-{name}", timeout=60)
        if state.ok and state.stdout.strip() == "false":
            return False
        if time.monotonic() > until:
            logs = daemon.docker("logs", f"sd-fleet-{name}", timeout=30)
            raise RuntimeError(f"the sshd of container node {name} did not answer: {(logs.stdout + logs.stderr)[-500:]}")
        time.sleep(0.2)


def _host_keys(port: int) -> list[str]:
    """The host keys the server on `port` offers, each "kind key" (none if it offers none)."""
    try:
        scan = subprocess.run(["ssh-keyscan", "-T", "5", "-p", str(port), "127.0.0.1"], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        return []
    return [" ".join(line.split()[1:3]) for line in scan.stdout.splitlines() if not line.startswith("#")]


def _host(name: str, port: int, folder: Path, known_hosts: Path | None = None) -> str:
    return (f"Host {name}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {folder / 'id_ed25519'}\n"
            f"  IdentitiesOnly yes\n  UserKnownHostsFile {known_hosts or folder / 'known_hosts'}\n"
            "  GlobalKnownHostsFile /dev/null\n  LogLevel ERROR\n")
