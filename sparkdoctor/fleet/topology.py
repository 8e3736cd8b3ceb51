"""The shape of a fleet's RDMA fabric, from each node's fabric facts: the facts' types as fabric.clean() leaves them,
the links and switched subnets (a subnet with exactly two nodes on it is one cable, one with more is a switch), the
shape they make, and the ports of a node that carry a LAN only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypedDict


# The fabric facts as clean() leaves them: the keys the rules read, every list and table of the right kind; the
# values a node sent in them are unchecked (object).
class Gid(TypedDict, total=False):
    index: object
    gid: object
    type: object
    ndev: object
    ipv4: object


class Port(TypedDict, total=False):
    port: object
    state: object
    rate: object
    rate_gbps: object
    link_layer: object
    netdev: object
    gids: list[Gid]


class Device(TypedDict, total=False):
    device: object
    pci: dict[str, object]
    ports: list[Port]


class Netdev(TypedDict, total=False):
    state: object
    mtu: object
    addrs: list[str]
    subnets: list[str]


class Fabric(TypedDict, total=False):
    rdma: list[Device]
    netdevs: dict[str, Netdev]
    nccl: dict[str, dict[str, object]]


@dataclass(frozen=True)
class End:
    node: str
    netdev: str
    devices: tuple[str, ...]  # the RDMA devices on this netdev


@dataclass(frozen=True)
class Link:
    subnet: str
    ends: tuple[End, ...]

    @property
    def label(self) -> str:
        return " <-> ".join(f"{e.node}:{e.netdev}" for e in self.ends) + f" ({self.subnet})"


class TopologyDict(TypedDict):
    kind: str
    links: list[str]
    switched_subnets: list[str]


@dataclass
class Topology:
    kind: str  # single | pair | triangle | ring | switch | partial | none
    links: list[Link]
    switches: list[str]  # subnets with more than two nodes
    switched: list[Link] = field(default_factory=list)  # every end on each of those subnets

    def pairs(self) -> list[Link]:
        """What carries traffic between two nodes: each link, and on each switched subnet the first node's end
        with each other node's (every node's rail measured against the first node's)."""
        star = []
        for subnet in self.switched:
            first = subnet.ends[0]
            seen = {first.node}
            for end in subnet.ends[1:]:
                if end.node not in seen:
                    seen.add(end.node)
                    star.append(Link(subnet.subnet, (first, end)))
        return self.links + star

    def to_dict(self) -> TopologyDict:
        return {"kind": self.kind, "links": [lk.label for lk in self.links], "switched_subnets": self.switches}


def _netdev_devices(fab: Fabric) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for dev in fab.get("rdma") or []:
        for port in dev.get("ports") or []:
            if port.get("netdev"):
                found.setdefault(str(port["netdev"]), []).append(str(dev.get("device")))
    return found


def topology(fabrics: dict[str, Fabric]) -> Topology:
    """Links and the shape of the fabric from the subnets of every node's up, addressed RDMA netdevs."""
    by_subnet: dict[str, list[End]] = {}
    for node, fab in fabrics.items():
        devices = _netdev_devices(fab)
        for netdev, info in sorted((fab.get("netdevs") or {}).items()):
            if netdev not in devices or str(info.get("state")).lower() != "up":
                continue
            for subnet in info.get("subnets") or []:
                by_subnet.setdefault(subnet, []).append(End(node, netdev, tuple(devices[netdev])))
    links, switches, switched = [], [], []
    for subnet, ends in sorted(by_subnet.items()):
        nodes = {e.node for e in ends}
        if len(nodes) == 2:
            links.append(Link(subnet, tuple(ends)))
        elif len(nodes) > 2:
            switches.append(subnet)
            switched.append(Link(subnet, tuple(ends)))
    return Topology(_shape(set(fabrics), links, switches), links, switches, switched)


def _shape(nodes: set[str], links: list[Link], switches: list[str]) -> str:
    if switches:
        return "switch"
    if len(nodes) < 2:
        return "single"
    if not links:
        return "none"
    neighbours: dict[str, set[str]] = {n: set() for n in nodes}
    for link in links:
        a, b = sorted({e.node for e in link.ends})
        neighbours[a].add(b)
        neighbours[b].add(a)
    if len(nodes) == 2:
        return "pair" if all(neighbours.values()) else "partial"
    if not all(len(v) == 2 for v in neighbours.values()):
        return "partial"
    start = min(nodes)  # every node of degree 2: one cycle through all of them, or several
    seen, prev, here = {start}, None, start
    while True:
        step = next(iter(sorted(neighbours[here] - {prev}))) if prev else min(neighbours[here])
        if step == start:
            break
        if step in seen:
            return "partial"
        seen.add(step)
        prev, here = here, step
    if seen != nodes:
        return "partial"
    return "triangle" if len(nodes) == 3 else "ring"


def _twin_key(dev: Device) -> str:
    """The physical port a device is a PCIe function of: a Spark's twins are one bus:device.function in two PCIe
    domains (0000:01:00.1 and 0002:01:00.1; rocep1s0f1 and roceP2p1s0f1)."""
    address = str((dev.get("pci") or {}).get("address") or "")
    return address.split(":", 1)[1] if address.count(":") == 2 else re.sub(r"P\d+(?=p)", "", str(dev.get("device")))


def lan_only(fab: Fabric, topo: Topology) -> set[str]:
    """Netdevs of the node's RDMA ports that carry a LAN only (a ConnectX port on the office network): addressed on
    subnets no other node has, with their twins; only on a node that reaches the fabric through another port (with no
    port on a shared subnet nothing is ruled out)."""
    shared = {lk.subnet for lk in topo.links} | set(topo.switches)
    netdevs = fab.get("netdevs") or {}
    groups: dict[str, list[str]] = {}
    for dev in fab.get("rdma") or []:
        for port in dev.get("ports") or []:
            if port.get("netdev"):
                groups.setdefault(_twin_key(dev), []).append(str(port["netdev"]))

    def subnets(netdev: str) -> set[str]:
        return set((netdevs.get(netdev) or {}).get("subnets") or [])

    if not any(subnets(nd) & shared for group in groups.values() for nd in group):
        return set()
    lan: set[str] = set()
    for group in groups.values():
        addressed = [subnets(nd) for nd in group if subnets(nd)]
        if addressed and not any(sn & shared for sn in addressed):
            lan.update(group)
    return lan
