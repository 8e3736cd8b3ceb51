"""The node's network links as NCCL sees them: /sys/class/net (name, state, MTU, speed, driver, IPv4
subnet) and the RDMA ports of the fabric facts (port state, rate, link layer, and the RoCE v2 GID indexes
per netdev, which differ between hosts: a GID index hard-coded in NCCL_IB_GID_INDEX does not carry).
"""

import fcntl
import os
import socket
import struct

from fleetnode_fabric import (  # one reader of small sysfs files for the node probe
    _int,
    _read,
)

SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B


def _ipv4(name):
    """(address, prefix length) of an interface, or (None, None)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        packed = struct.pack("256s", name.encode()[:15])
        addr = socket.inet_ntoa(fcntl.ioctl(sock.fileno(), SIOCGIFADDR, packed)[20:24])
        mask = fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, packed)[20:24]
        return addr, bin(struct.unpack("!I", mask)[0]).count("1")
    except OSError:
        return None, None
    finally:
        sock.close()


def subnet_of(addr, prefix):
    if addr is None or prefix is None:
        return None
    value = struct.unpack("!I", socket.inet_aton(addr))[0]
    mask = (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF if prefix else 0
    return "%s/%d" % (socket.inet_ntoa(struct.pack("!I", value & mask)), prefix)


def net_links(root="/sys/class/net"):
    links = []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return links
    for name in names:
        if name == "lo":
            continue
        base = os.path.join(root, name)
        driver = os.path.realpath(os.path.join(base, "device", "driver")) if os.path.exists(os.path.join(base, "device", "driver")) else None
        addr, prefix = _ipv4(name)
        speed = _int(_read(os.path.join(base, "speed")))
        links.append({
            "name": name, "kind": "net", "state": _read(os.path.join(base, "operstate")),
            "mtu": _int(_read(os.path.join(base, "mtu"))), "speed_mbps": speed if speed and speed > 0 else None,
            "driver": os.path.basename(driver) if driver else None,
            "physical": os.path.exists(os.path.join(base, "device")),
            "ipv4": addr, "subnet": subnet_of(addr, prefix),
        })
    return links


def ib_links(fabric):
    """The RDMA ports of the fabric facts (fleetnode_fabric.py) as links: {"name": "dev/port", "kind":
    "infiniband", "port", "state", "rate", "link_layer", "gids"}."""
    return [{"name": "%s/%s" % (dev.get("device"), port.get("port")), "kind": "infiniband", "port": port.get("port"),
             "state": port.get("state"), "rate": port.get("rate"), "link_layer": port.get("link_layer"),
             "gids": [{k: g.get(k) for k in ("index", "type", "ndev", "ipv4")} for g in port.get("gids") or []
                      if g.get("type")]}
            for dev in (fabric or {}).get("rdma") or [] for port in dev.get("ports") or []]


def roce_v2_indexes(ib):
    """{netdev: first RoCE v2 IPv4 GID index}: the index NCCL_IB_GID_INDEX should name on this host."""
    found = {}
    for link in ib:
        for gid in link.get("gids") or []:
            if "v2" in (gid.get("type") or "").lower() and gid.get("ipv4") and gid.get("ndev"):
                found.setdefault(gid["ndev"], gid["index"])
    return found
