"""Fixture host trees of DGX Sparks for the fabric gate: /sys/class/infiniband, /sys/class/net, the PCI
devices behind them, /proc/net/route + /proc/net/fib_trie and /etc/nccl.conf, in the kernel's own formats.

A Spark's ConnectX-7 has two ports (p0, p1); each shows up as two PCIe functions, the "twins": RDMA devices
rocep1s0f0 / roceP2p1s0f0 (netdevs enp1s0f0np0 / enP2p1s0f0np0) for p0, and rocep1s0f1 / roceP2p1s0f1 for p1
(ibdev2netdev output in eugr/spark-vllm-docker's README). Only the first twin of a port is addressed.
The GID table follows the kernel's order: link-local v1, v2, then the IPv4-mapped v1, v2 entries.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

TWINS = {"p0": (("rocep1s0f0", "enp1s0f0np0", "0000:01:00.0"), ("roceP2p1s0f0", "enP2p1s0f0np0", "0002:01:00.0")),
         "p1": (("rocep1s0f1", "enp1s0f1np1", "0000:01:00.1"), ("roceP2p1s0f1", "enP2p1s0f1np1", "0002:01:00.1"))}


@dataclass
class Spark:
    name: str
    ports: dict[str, str] = field(default_factory=dict)  # "p0" -> "192.168.10.1/24": cabled and addressed
    mtu: dict[str, int] = field(default_factory=dict)  # netdev -> MTU (default 9000)
    rate: dict[str, int] = field(default_factory=dict)  # RDMA device -> Gb/s (default 200)
    pcie_width: dict[str, int] = field(default_factory=dict)  # RDMA device -> current width (default 4)
    extra_gids: int = 0  # IPv6 entries before the IPv4 ones: moves the RoCE v2 IPv4 index up by 2 each
    nccl_conf: str | None = None
    env: dict[str, str] = field(default_factory=dict)


def _hexroute(value: int) -> str:
    return struct.pack("<I", value).hex().upper()


def _ipv4_gid(addr: str) -> str:
    raw = "0" * 20 + "ffff" + socket.inet_aton(addr).hex()
    return ":".join(raw[i:i + 4] for i in range(0, 32, 4))


def write(root: Path, spark: Spark) -> Path:
    """The Spark's tree under root; root."""
    sysfs = root / "sys"
    routes = ["Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"]
    trie = ["Main:", "  +-- 0.0.0.0/0 3 0 5"]
    for port, twins in TWINS.items():
        cabled = port in spark.ports
        for n, (dev, netdev, pci) in enumerate(twins):
            pdir = sysfs / "devices" / "pci0000:00" / pci
            (pdir / "net" / netdev).mkdir(parents=True, exist_ok=True)
            (pdir / "current_link_width").write_text(f"{spark.pcie_width.get(dev, 4)}\n")
            (pdir / "max_link_width").write_text("16\n")  # the chip's; a Spark's slot gives it x4
            (pdir / "current_link_speed").write_text("32.0 GT/s PCIe\n")
            (pdir / "max_link_speed").write_text("32.0 GT/s PCIe\n")
            net = sysfs / "class" / "net" / netdev
            net.mkdir(parents=True, exist_ok=True)
            (net / "device").symlink_to(pdir)
            (net / "operstate").write_text("up\n" if cabled else "down\n")
            (net / "mtu").write_text(f"{spark.mtu.get(netdev, 9000)}\n")
            (net / "speed").write_text(f"{spark.rate.get(dev, 200) * 1000 if cabled else -1}\n")
            ib = sysfs / "class" / "infiniband" / dev
            (ib / "ports" / "1").mkdir(parents=True, exist_ok=True)
            (ib / "device").symlink_to(pdir)
            (ib / "fw_ver").write_text("28.45.4028\n")
            (ib / "board_id").write_text("NVD0000000033\n")
            p = ib / "ports" / "1"
            (p / "state").write_text("4: ACTIVE\n" if cabled else "1: DOWN\n")
            (p / "phys_state").write_text("5: LinkUp\n" if cabled else "3: Disabled\n")
            (p / "rate").write_text(f"{spark.rate.get(dev, 200)} Gb/sec (2X NDR)\n")
            (p / "link_layer").write_text("Ethernet\n")
            gids = [(f"fe80:0000:0000:0000:0a5c:2aff:fe00:00{n:02x}", "IB/RoCE v1"),
                    (f"fe80:0000:0000:0000:0a5c:2aff:fe00:00{n:02x}", "RoCE v2")]
            gids += [(f"fd00:0000:0000:0000:0000:0000:0000:{i:04x}", t) for i in range(spark.extra_gids)
                     for t in ("IB/RoCE v1", "RoCE v2")]
            if cabled and n == 0:
                addr = spark.ports[port].split("/")[0]
                gids += [(_ipv4_gid(addr), "IB/RoCE v1"), (_ipv4_gid(addr), "RoCE v2")]
            for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
                (p / sub).mkdir(parents=True, exist_ok=True)
            for i in range(16):  # the kernel lists every slot; empty ones read zeros
                gid, kind = gids[i] if i < len(gids) else ("0000:0000:0000:0000:0000:0000:0000:0000", None)
                (p / "gids" / str(i)).write_text(gid + "\n")
                if kind:
                    (p / "gid_attrs" / "types" / str(i)).write_text(kind + "\n")
                    (p / "gid_attrs" / "ndevs" / str(i)).write_text(netdev + "\n")
            if cabled and n == 0:
                iface = ipaddress.ip_interface(spark.ports[port])
                routes.append(f"{netdev}\t{_hexroute(int(iface.network.network_address))}\t00000000\t0001\t0\t0\t0\t"
                              f"{_hexroute(int(iface.network.netmask))}\t0\t0\t0")
                trie += [f"     +-- {iface.network} 2 0 2", f"        |-- {iface.network.network_address}",
                         f"           /{iface.network.prefixlen} link UNICAST", f"        |-- {iface.ip}",
                         "           /32 host LOCAL"]
    (root / "proc" / "net").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "net" / "route").write_text("\n".join(routes) + "\n")
    (root / "proc" / "net" / "fib_trie").write_text("\n".join(trie) + "\n")
    if spark.nccl_conf is not None:
        (root / "etc").mkdir(parents=True, exist_ok=True)
        (root / "etc" / "nccl.conf").write_text(spark.nccl_conf)
    return root


def pair(**overrides: dict) -> list[Spark]:
    """Two Sparks on one cable (p1 to p1, 192.168.100.0/24), both twins named: correct unless overridden."""
    hca = {"NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1"}
    nodes = [Spark("spark-1", {"p1": "192.168.100.11/24"}, env=dict(hca)),
             Spark("spark-2", {"p1": "192.168.100.12/24"}, env=dict(hca))]
    for node in nodes:
        for key, value in overrides.get(node.name, {}).items():
            setattr(node, key, value)
    return nodes


def ring(n: int = 4, **overrides: dict) -> list[Spark]:
    """n Sparks in a switchless ring: node i's p0 cabled to node i+1's p1, one subnet per cable, with
    NCCL_IB_SUBNET_AWARE_ROUTING=1: correct unless overridden."""
    nodes = [Spark(f"spark-{i + 1}", env={"NCCL_IB_SUBNET_AWARE_ROUTING": "1"}) for i in range(n)]
    for i in range(n):
        j = (i + 1) % n
        nodes[i].ports["p0"] = f"192.168.{10 + i}.{i + 1}/24"
        nodes[j].ports["p1"] = f"192.168.{10 + i}.{j + 1}/24"
    for node in nodes:
        for key, value in overrides.get(node.name, {}).items():
            setattr(node, key, value)
    return nodes


def switched(n: int = 3, **overrides: dict) -> list[Spark]:
    """n Sparks on one switch: every p1 on 192.168.100.0/24, both twins named: correct unless overridden."""
    hca = {"NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1"}
    nodes = [Spark(f"spark-{i + 1}", {"p1": f"192.168.100.{11 + i}/24"}, env=dict(hca)) for i in range(n)]
    for node in nodes:
        for key, value in overrides.get(node.name, {}).items():
            setattr(node, key, value)
    return nodes
