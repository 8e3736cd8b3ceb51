"""The fabric gate: the nodes' RDMA links judged together, from each node's fabric facts (the node probe's
"fabric" answer, probes/fleet_node/fleetnode_fabric.py).

The topology comes from the subnets (topology.py): a subnet with exactly two nodes on it is one cable (a link),
one with more is a switch. Two nodes on links: a pair; three nodes each cabled to the two others: a triangle; four
or more nodes each cabled to exactly two neighbours in one cycle: a switchless ring.

Each rule yields FabricFinding rows that name the node, the link and the setting; the matrix entries of
matrix/multinode.toml whose `when.fleet.fabric` lists the rule turn a node's rows into its findings (with
their sources), so the gate refuses the launch the way any other node finding does. RULES says where
each rule comes from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sparkdoctor.facts import Facts
from sparkdoctor.fleet.topology import (
    Device,
    End,
    Fabric,
    Link,
    Port,
    Topology,
    lan_only,
    topology,
)

HCA_TWIN = "hca-twin"
GID_INDEX = "gid-index"
RING_ROUTING = "ring-routing"
MTU = "mtu-mismatch"
RAIL_DEGRADED = "rail-degraded"
RAIL_SLOW = "rail-slow"  # measured (fleet/measure.py)
MEASURE_FAILED = "measure-failed"  # measured and failed: no result, wrong results, no connection

RULES = {  # rule -> (what it checks, its source); matrix/multinode.toml has the entry of each
    HCA_TWIN: ("NCCL_IB_HCA names every up RoCE device of the node (both twins of a port)",
               "https://github.com/NVIDIA/dgx-spark-playbooks/issues/102"),
    GID_INDEX: ("a pinned NCCL_IB_GID_INDEX is a RoCE v2 IPv4 GID on every addressed HCA",
                "https://github.com/MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks/pull/26"),
    RING_ROUTING: ("a switchless ring or triangle sets NCCL_IB_SUBNET_AWARE_ROUTING=1; a ring of 4+ keeps "
                   "NCCL_IB_MERGE_NICS at 1", "https://github.com/tonyd2wild/GLM-5.3-Int4-Int8Mix-TP4-4x-DGX-Spark/issues/2"),
    MTU: ("both ends of each link have one MTU", "https://github.com/NVIDIA/dgx-spark-playbooks/pull/103"),
    RAIL_DEGRADED: ("both ends of a link report one rate, and the NIC's PCIe link runs at its full width and speed",
                    "https://github.com/NVIDIA/dgx-spark-playbooks/pull/108"),
    RAIL_SLOW: ("a measured rail reaches a fair part of its rated speed (fleet check --measure)",
                "https://github.com/NVIDIA/dgx-spark-playbooks/pull/108"),
    MEASURE_FAILED: ("a measurement asked for ran and gave a result, with no #wrong result (fleet check --measure)",
                     "https://github.com/NVIDIA/nccl/issues/1184"),
}


@dataclass(frozen=True)
class FabricFinding:
    rule: str
    node: str
    link: str  # "rocep1s0f1 (enp1s0f1np1)", or a link between two nodes
    setting: str  # "NCCL_IB_HCA=rocep1s0f1 (environment)", "mtu 1500", ...
    detail: str

    def line(self) -> str:
        return f"node {self.node}, link {self.link}, {self.setting}: {self.detail}"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def clean(raw: object) -> dict[str, object] | None:
    """A node's fabric answer with every part of the wrong shape dropped (a node's JSON is input: the rules
    below read dicts of dicts and lists of dicts only), or None when it is not a fabric answer at all."""
    if not isinstance(raw, dict):
        return None

    def dicts(value: object) -> list[dict[str, object]]:
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

    def table(value: object) -> dict[str, dict[str, object]]:
        return {str(k): v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}

    rdma = []
    for dev in dicts(raw.get("rdma")):
        ports = [{**p, "gids": dicts(p.get("gids"))} for p in dicts(dev.get("ports"))]
        rdma.append({**dev, "pci": dev.get("pci") if isinstance(dev.get("pci"), dict) else {}, "ports": ports})
    netdevs = {}
    for name, info in table(raw.get("netdevs")).items():
        texts = {k: [str(x) for x in items if isinstance(x, str)] if isinstance(items := info.get(k), list) else []
                 for k in ("addrs", "subnets")}
        netdevs[name] = {**info, **texts}
    return {**raw, "rdma": rdma, "netdevs": netdevs, "nccl": table(raw.get("nccl"))}


def of(named: list[tuple[str, Facts]]) -> dict[str, Fabric]:
    """{node: fabric facts} of the nodes whose probe sent them (node.apply_node put them through clean())."""
    fleets = {name: facts.fleet or {} for name, facts in named}
    return {name: fleet["fabric"] for name, fleet in fleets.items() if isinstance(fleet.get("fabric"), dict)}


def _setting(fab: Fabric, key: str) -> tuple[str | None, str]:
    """(value, "KEY=value (source)") of an NCCL setting in force on a node."""
    entry = (fab.get("nccl") or {}).get(key)
    if not isinstance(entry, dict):
        return None, f"{key} unset"
    return str(entry.get("value")), f"{key}={entry.get('value')} ({entry.get('source')})"


def hca_named(spec: str, device: str, port: object = None) -> bool:
    """Whether an NCCL list selects device:port (NCCL_IB_HCA) or, without a port, an interface (NCCL_SOCKET_IFNAME):
    a comma list, `^` excludes, `=` exact names, otherwise each entry a prefix of the name; with a port, an entry
    may end in :port."""
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    exact = body.startswith("=")
    body = body[1:] if exact else body
    hit = False
    for item in filter(None, (x.strip() for x in body.split(","))):
        name, _, want = item.partition(":") if port is not None else (item, "", "")
        if (device == name if exact else device.startswith(name)) and (not want or str(port) == want):
            hit = True
    return not hit if exclude else hit


def _up_roce(fab: Fabric) -> list[tuple[Device, Port]]:
    return [(dev, port) for dev in fab.get("rdma") or [] for port in dev.get("ports") or []
            if str(port.get("state")).upper() == "ACTIVE" and str(port.get("link_layer")).lower() == "ethernet"]


def _name(dev: Device, port: Port) -> str:
    return f"{dev.get('device')} port {port.get('port')} ({port.get('netdev') or 'no netdev'})"


def check_hca(node: str, fab: Fabric, topo: Topology) -> list[FabricFinding]:
    value, setting = _setting(fab, "NCCL_IB_HCA")
    if value is None:
        return []  # NCCL uses every device
    lan = lan_only(fab, topo)
    up = [(d, p) for d, p in _up_roce(fab) if str(p.get("netdev")) not in lan]  # a LAN port left out is meant
    missing = [(d, p) for d, p in up if not hca_named(value, str(d.get("device")), p.get("port"))]
    if len(missing) == len(up) and up:
        why = "names none of the node's up RoCE devices: NCCL finds no IB device and falls back to TCP sockets"
    else:
        why = "not named: NCCL leaves it idle (one twin of a Spark port reaches about 3 GB/s)"
    return [FabricFinding(HCA_TWIN, node, _name(d, p), setting, f"up at {p.get('rate') or '? rate'} but {why}")
            for d, p in missing]


def check_gid(node: str, fab: Fabric) -> list[FabricFinding]:
    value, setting = _setting(fab, "NCCL_IB_GID_INDEX")
    if value is None or not value.strip().lstrip("-").isdigit():
        return []
    index = int(value)
    hca, _ = _setting(fab, "NCCL_IB_HCA")
    found = []
    for dev, port in _up_roce(fab):
        if hca is not None and not hca_named(hca, str(dev.get("device")), port.get("port")):
            continue  # a device NCCL does not use
        gids = port.get("gids") or []
        good = [g for g in gids if "v2" in str(g.get("type")).lower() and g.get("ipv4")]
        if not good:
            continue  # an unaddressed twin: no IPv4 GID to be right or wrong about
        at = next((g for g in gids if g.get("index") == index), None)
        if at in good:
            continue
        what = "nothing" if at is None else f"{at.get('type')} {at.get('ipv4') or at.get('gid')}"
        found.append(FabricFinding(GID_INDEX, node, _name(dev, port), setting,
                                   f"index {index} holds {what}; the RoCE v2 IPv4 GID is index "
                                   f"{good[0].get('index')} here"))
    return found


def check_ring(node: str, fab: Fabric, topo: Topology) -> list[FabricFinding]:
    if topo.kind not in ("ring", "triangle"):
        return []
    mine = [lk.label for lk in topo.links if any(e.node == node for e in lk.ends)]
    link = "; ".join(mine) or "(none)"
    found = []
    aware, setting = _setting(fab, "NCCL_IB_SUBNET_AWARE_ROUTING")
    if aware != "1":
        found.append(FabricFinding(RING_ROUTING, node, link, setting, f"a switchless {topo.kind} needs "
                                   "NCCL_IB_SUBNET_AWARE_ROUTING=1: without it NCCL pairs ports that share no cable"))
    merge, setting = _setting(fab, "NCCL_IB_MERGE_NICS")
    if merge == "0" and topo.kind == "ring":  # a triangle is left alone: eugr's mesh sets 0 there
        found.append(FabricFinding(RING_ROUTING, node, link, setting, f"a switchless {topo.kind} runs with "
                                   "NCCL_IB_MERGE_NICS=1 (the default): unset it"))
    return found


def _port_of(fab: Fabric, netdev: str) -> list[tuple[Device, Port]]:
    return [(d, p) for d in fab.get("rdma") or [] for p in d.get("ports") or [] if p.get("netdev") == netdev]


def check_link(link: Link, fabrics: dict[str, Fabric]) -> list[FabricFinding]:
    found = []
    mtus = {e: (fabrics[e.node].get("netdevs") or {}).get(e.netdev, {}).get("mtu") for e in link.ends}
    top = max((m for m in mtus.values() if isinstance(m, int)), default=None)
    for end, mtu in mtus.items():
        if isinstance(mtu, int) and top is not None and mtu < top:
            found.append(FabricFinding(MTU, end.node, link.label, f"mtu {mtu} on {end.netdev}",
                                       f"the other end has {top}: RoCE runs at the smaller path MTU and TCP "
                                       "fragments; set both ends alike"))
    rates = {e: max((_num(p.get("rate_gbps")) for _, p in _port_of(fabrics[e.node], e.netdev)), default=0.0)
             for e in link.ends}
    best = max(rates.values(), default=0.0)
    for end, rate in rates.items():
        if rate and rate < best:
            found.append(FabricFinding(RAIL_DEGRADED, end.node, link.label, f"rate {rate:g} Gb/s on {end.netdev}",
                                       f"the other end reports {best:g} Gb/s: a cable or port trained down"))
    return found


def _num(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _gts(text: object) -> float:
    try:
        return float(str(text).split()[0])
    except (IndexError, ValueError):
        return 0.0


def check_pcie(fabrics: dict[str, Fabric], topo: Topology) -> list[FabricFinding]:
    """A linked RDMA device whose PCIe link runs narrower or slower than the same device on the other nodes
    (sysfs max_link_* is what the chip could do, not what a Spark's slot gives it: x4 is normal there)."""
    links = {(e.node, d): lk.label for lk in topo.links for e in lk.ends for d in e.devices}
    seen: dict[str, list[tuple[str, dict[str, object]]]] = {}
    for node, fab in fabrics.items():
        for dev in fab.get("rdma") or []:
            seen.setdefault(str(dev.get("device")), []).append((node, dev.get("pci") or {}))
    found = []
    for device, rows in sorted(seen.items()):
        width = max((_num(p.get("current_link_width")) for _, p in rows), default=0.0)
        speed = max((_gts(p.get("current_link_speed")) for _, p in rows), default=0.0)
        for node, pci in rows:
            mine_w, mine_s = _num(pci.get("current_link_width")), _gts(pci.get("current_link_speed"))
            slow = 0 < mine_w < width or 0 < mine_s < speed  # an unreadable value is unknown, not slow
            if slow and (node, device) in links:
                found.append(FabricFinding(RAIL_DEGRADED, node, links[(node, device)],
                                           f"PCIe {pci.get('address')} x{pci.get('current_link_width')} {pci.get('current_link_speed')}",
                                           f"{device} runs below x{width:g} {speed:g} GT/s of the same device on the other "
                                           "nodes: the rail cannot carry its rated speed (reseat, check the slot)"))
    return found


def judge(fabrics: dict[str, Fabric]) -> tuple[Topology, list[FabricFinding]]:
    """The topology and every fabric finding of the nodes that answered with fabric facts."""
    topo = topology(fabrics)
    if len(fabrics) < 2:
        return topo, []  # one node has no fabric to judge (the matrix entries need two nodes too)
    found: list[FabricFinding] = []
    for node, fab in fabrics.items():
        found += check_hca(node, fab, topo) + check_gid(node, fab) + check_ring(node, fab, topo)
    for link in topo.links:
        found += check_link(link, fabrics)
    return topo, found + check_pcie(fabrics, topo)


__all__ = ["RULES", "End", "Fabric", "FabricFinding", "Link", "Topology", "judge", "topology", "hca_named"]
