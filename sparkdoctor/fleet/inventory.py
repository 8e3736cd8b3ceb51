"""The nodes a `fleet check` over SSH reads: --hosts a,b,c, or an inventory file.

An inventory is TOML (a file ending in .toml):

    [defaults]                     # optional, for every node
    python = "/opt/venv/bin/python"
    container = "vllm"             # probe inside this running container (docker exec; runtime = "podman")
    [[node]]
    host = "spark-1"               # an ssh destination: a name or alias of your ssh config, or user@host
    python = "/home/me/vllm/.venv/bin/python"

or plain text, one ssh destination per line (# comments). The host `local` is this machine, reached without
ssh (transport.LOCAL). Where the cluster is already written down, that
file is the inventory, so nobody keeps a second host list:

  a sparkrun cluster definition (.yaml/.yml, as `sparkrun cluster` writes it under
  ~/.config/sparkrun/clusters/): `hosts` and the optional ssh `user`; `sparkrun:NAME` reads cluster NAME
  from there ($SPARKRUN_CONFIG_DIR first), `sparkrun:` the default cluster (clusters/.default);
  eugr's launch-cluster config (.env, or any file with a CLUSTER_NODES= line): CLUSTER_NODES, comma-separated,
  head first.

Problems are one line naming the file and field.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sparkdoctor.errors import InputError
from sparkdoctor.fleet.transport import Node
from sparkdoctor.inputs import read_text, toml_module
from sparkdoctor.recipes.model import RecipeError
from sparkdoctor.recipes.yamlsafe import read_yaml

tomllib = toml_module()

HOST_RE = re.compile(r"^[A-Za-z0-9_.@%:\[\]-]+$")
# host:port, [address] and [address]:port: ssh takes none of them as a destination ("Could not resolve hostname");
# a bare IPv6 address (two or more colons) is one
HOST_PORT_RE = re.compile(r"^(?:[^:]*:\d*|.*\[.*\].*)$")
CONTAINER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # docker's own rule for names; ids are hex
NODE_KEYS = {"host", "python", "container", "runtime"}
RUNTIMES = ("docker", "podman")


class InventoryError(InputError, ValueError):
    """One line: where (file, field) and what is wrong (exit 2)."""

    code = "inventory"


MAX_INVENTORY_BYTES = 4 * 1024 * 1024  # thousands of nodes fit; a runaway file does not fill memory
MAX_HOST_CHARS = 255  # a DNS name has at most 253; an ssh alias is no longer in practice
MAX_NODES = 4096  # a fleet larger than any launch; 100,000 characters of --hosts stop here, not in the renderer


def check_host(host: str, where: str) -> str:
    host = host.strip()
    if len(host) > MAX_HOST_CHARS:
        raise InventoryError(f"{where}: a host name of {len(host):,} characters (at most {MAX_HOST_CHARS})")
    if not host:
        raise InventoryError(f"{where}: an empty host name")
    if HOST_PORT_RE.match(host) or host.startswith("ssh://"):
        why = ("an ssh:// address is not taken here" if host.startswith("ssh://") else
               "ssh would look that whole text up as a host name")
        raise InventoryError(f"{where}: {host[:80]!r}: {why}; give the host (or user@host) and its port in your ssh "
                             "config (Host NAME, Port N; --ssh-config FILE)")
    user, at, name = host.rpartition("@")  # ssh splits at the last @
    if host.startswith("-") or name.startswith("-") or (at and not (user and name)) or not HOST_RE.fullmatch(host):
        raise InventoryError(f"{where}: {host[:80]!r} is not an ssh destination (a host name, alias or user@host)")
    return host


def check_container(name: str | None, where: str) -> str | None:
    if name is not None and not CONTAINER_RE.fullmatch(name):
        raise InventoryError(f"{where}: {name[:80]!r} is not a container name or id")
    return name


def parse_hosts(text: str, python: str | None, container: str | None, runtime: str) -> list[Node]:
    check_container(container, "--container")
    if text.count(",") >= MAX_NODES:
        raise InventoryError(f"--hosts: more than {MAX_NODES:,} hosts (use --inventory for a list this long, or check it in parts)")
    names = [check_host(h, "--hosts") for h in text.split(",")]
    return _unique([Node(h, python, container, runtime) for h in names], "--hosts")


def load_inventory(path: Path, python: str | None, container: str | None, runtime: str) -> list[Node]:
    if str(path).startswith("sparkrun:"):
        path = sparkrun_cluster(str(path)[len("sparkrun:"):])
    try:
        # never open() it: a FIFO with no writer would block the launch gate forever; a pipe with one is read. A
        # byte-order mark (Windows editors) is passed over: it made TOML invalid and stuck to the first host's name
        text = read_text(path, MAX_INVENTORY_BYTES, stream=True).removeprefix("\ufeff")
    except OSError as exc:
        raise InventoryError(f"--inventory {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InventoryError(f"--inventory {path}: not UTF-8 text (byte {exc.start})") from None
    check_container(container, "--container")
    if path.suffix in (".yaml", ".yml"):
        return _unique([Node(h, python, container, runtime) for h in sparkrun_hosts(path)], str(path))
    if path.name.endswith(".env") or EUGR_NODES.search(text):
        return _unique([Node(h, python, container, runtime) for h in eugr_hosts(text, path)], str(path))
    if path.suffix != ".toml":
        lines = [(n, line.split("#", 1)[0].strip()) for n, line in enumerate(text.splitlines(), 1)]
        nodes = [Node(check_host(host, f"{path}:{n}"), python, container, runtime) for n, host in lines if host]
        if not nodes:
            raise InventoryError(f"{path}: names no host")
        return _unique(nodes, str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InventoryError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # arrays or tables inside each other thousands deep
        raise InventoryError(f"{path}: not usable TOML: nested too deeply") from None
    except ValueError as exc:  # tomllib's int() of a number past Python's 4,300-digit limit
        raise InventoryError(f"{path}: not usable TOML: {str(exc).splitlines()[0][:120]}") from None
    defaults = _table(data.get("defaults", {}), f"{path}: [defaults]")
    rows = data.get("node")
    if not isinstance(rows, list) or not rows:
        raise InventoryError(f"{path}: needs [[node]] tables, each with a host")
    nodes = []
    for i, row in enumerate(rows):
        where = f"{path}: node[{i}]"
        row = {**defaults, **_table(row, where)}
        host = row.get("host")
        if not isinstance(host, str):
            raise InventoryError(f"{where}.host: give the ssh destination as a string")
        kind = row.get("runtime", runtime)
        if kind not in RUNTIMES:
            raise InventoryError(f"{where}.runtime: {str(kind)[:40]!r}; choose one of {', '.join(RUNTIMES)}")
        box = check_container(row.get("container", container), f"{where}.container")
        nodes.append(Node(check_host(host, f"{where}.host"), row.get("python", python), box, kind))
    return _unique(nodes, str(path))


EUGR_NODES = re.compile(r"^\s*(?:export\s+)?CLUSTER_NODES\s*=(.*)$", re.M)


def sparkrun_cluster(name: str) -> Path:
    """The file of sparkrun cluster `name` (the default cluster when empty)."""
    root = Path(os.environ.get("SPARKRUN_CONFIG_DIR") or Path.home() / ".config" / "sparkrun").expanduser() / "clusters"
    if not name:
        try:
            name = read_text(root / ".default", 4096).strip()
        except OSError:
            raise InventoryError(f"--inventory sparkrun: no default sparkrun cluster ({root / '.default'})") from None
    if not re.match(r"^[A-Za-z0-9_.-]+$", name) or name.startswith("."):
        raise InventoryError(f"--inventory sparkrun:{name[:80]}: not a cluster name")
    path = root / f"{name}.yaml"
    if not path.is_file():
        raise InventoryError(f"--inventory sparkrun:{name}: no such sparkrun cluster ({path})")
    return path


def sparkrun_hosts(path: Path) -> list[str]:
    """A sparkrun cluster definition's hosts, each user@host when it names a user."""
    try:
        data, _ = read_yaml(path)
    except RecipeError as exc:  # its line names the file already
        raise InventoryError(str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), list) or not data["hosts"]:
        raise InventoryError(f"{path}.hosts: a sparkrun cluster definition lists its hosts (hosts: [a, b])")
    user = data.get("user")
    if user is not None and (not isinstance(user, str) or not HOST_RE.fullmatch(user) or "@" in user or user.startswith("-")):
        raise InventoryError(f"{path}.user: {str(user)[:80]!r} is not an ssh user name")
    hosts = []
    for i, host in enumerate(data["hosts"]):
        if not isinstance(host, (str, int)) or isinstance(host, bool):
            raise InventoryError(f"{path}.hosts[{i}]: give the host as a string")
        name = check_host(str(host), f"{path}.hosts[{i}]")
        hosts.append(check_host(f"{user}@{name}", f"{path}.user") if user and "@" not in name else name)
    return hosts


def eugr_hosts(text: str, path: Path) -> list[str]:
    """CLUSTER_NODES of eugr's launch-cluster config: comma-separated, head first (the last assignment wins, as
    in a shell)."""
    found = EUGR_NODES.findall(text)
    if not found:
        raise InventoryError(f"{path}: no CLUSTER_NODES= line (eugr's launch-cluster config names its nodes there)")
    value = found[-1].split(" #", 1)[0].strip().strip("\"'")
    hosts = [check_host(h, f"{path}: CLUSTER_NODES") for h in value.split(",") if h.strip()]
    if not hosts:
        raise InventoryError(f"{path}: CLUSTER_NODES is empty")
    return hosts


def _table(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise InventoryError(f"{where}: should be a table")
    for key, item in value.items():
        if key not in NODE_KEYS:
            raise InventoryError(f"{where}.{key}: unknown key (known: {', '.join(sorted(NODE_KEYS))})")
        if not isinstance(item, str) or not item.strip():
            raise InventoryError(f"{where}.{key}: should be a non-empty string")
    return value


def _unique(nodes: list[Node], where: str) -> list[Node]:
    if len(nodes) > MAX_NODES:
        raise InventoryError(f"{where}: {len(nodes):,} nodes, more than the {MAX_NODES:,} one check takes")
    seen: set[str] = set()
    for node in nodes:
        if node.name in seen:
            raise InventoryError(f"{where}: {node.name} is named twice")
        seen.add(node.name)
    return nodes
