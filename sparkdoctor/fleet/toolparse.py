"""Parsers for the output of the fabric tools users already run: ibv_devinfo and show_gids (rdma-core /
MLNX_OFED), perftest's ib_write_bw and nccl-tests' all_reduce_perf. Pure functions over text: a line they
do not know is skipped, never an exception. The device parsers answer in the shape of the node probe's
fabric facts ("rdma": [{"device", "fw_ver", "board_id", "ports": [{"port", "state", "link_layer", "gids"}]}]).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MIB_PER_S_TO_GBPS = 8 * 1.048576 / 1000  # perftest's "MB/sec" is MiB/s


def parse_ibv_devinfo(text: str) -> list[dict[str, Any]]:
    """`ibv_devinfo` (one `hca_id:` block per device, `port:` blocks inside)."""
    devices: list[dict[str, Any]] = []
    dev: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            dev, port = {"device": value, "fw_ver": None, "board_id": None, "ports": []}, None
            devices.append(dev)
        elif dev is None:
            continue
        elif key == "port":
            port = {"port": _int(value), "state": None, "link_layer": None, "active_mtu": None, "gids": []}
            dev["ports"].append(port)
        elif port is None and key in ("fw_ver", "board_id"):
            dev[key] = value
        elif port is not None and key == "state":
            port["state"] = value.split()[0].removeprefix("PORT_")  # PORT_ACTIVE (4) -> ACTIVE, as sysfs says
        elif port is not None and key == "link_layer":
            port["link_layer"] = value
        elif port is not None and key == "active_mtu":
            port["active_mtu"] = _int(value.split()[0])
    return devices


GID_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+([0-9a-fA-F:]{39})\s+(?:(\d+\.\d+\.\d+\.\d+)\s+)?(v[12])\s*(\S+)?\s*$")


def parse_show_gids(text: str) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """`show_gids`: {(device, port): [{"index", "gid", "type": "RoCE v1" | "RoCE v2", "ipv4", "ndev"}]}."""
    found: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for line in text.splitlines():
        m = GID_ROW.match(line.strip())
        if not m:
            continue
        dev, port, index, gid, ipv4, ver, ndev = m.groups()
        found.setdefault((dev, int(port)), []).append({"index": int(index), "gid": gid.lower(), "ipv4": ipv4,
                                                       "type": "RoCE " + ver, "ndev": ndev})
    return found


def devices_from_tools(devinfo: str, gids: str) -> list[dict[str, Any]]:
    """ibv_devinfo's devices with show_gids' GID tables: the probe's "rdma" shape, read from the tools."""
    table = parse_show_gids(gids)
    devices = parse_ibv_devinfo(devinfo)
    for dev in devices:
        for port in dev["ports"]:
            port["gids"] = table.get((dev["device"], port["port"]), [])
            port["netdev"] = next((g["ndev"] for g in port["gids"] if g.get("ndev")), None)
    return devices


@dataclass
class WriteBw:
    device: str | None
    gid_index: int | None
    average_gbps: float | None
    peak_gbps: float | None
    message_bytes: int | None
    qps: int | None


def parse_ib_write_bw(text: str) -> WriteBw:
    """perftest `ib_write_bw` (client or server side): the result row under the `#bytes` header, in Gb/s
    whether it was run with --report_gbits or in MB/sec (MiB/s)."""
    device = _field(text, "Device")
    gid = _int(_field(text, "GID index"))
    qps = _int(_field(text, "Number of qps"))
    unit, result = None, None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("#bytes"):
            unit = "gbit" if "Gb/sec" in line else "mib"
            for row in lines[i + 1:]:
                cols = row.split()
                if len(cols) >= 4 and cols[0].isdigit():
                    result = cols
                    break
    if result is None:
        return WriteBw(device, gid, None, None, None, qps)
    scale = 1.0 if unit == "gbit" else MIB_PER_S_TO_GBPS
    peak, average = _float(result[2]), _float(result[3])
    return WriteBw(device, gid, None if average is None else average * scale, None if peak is None else peak * scale,
                   _int(result[0]), qps)


@dataclass
class AllReduce:
    rows: list[dict[str, Any]] = field(default_factory=list)  # {"bytes", "busbw_gbs" (out-of-place), "wrong"}
    average_busbw_gbs: float | None = None
    ranks: int = 0

    @property
    def peak_busbw_gbs(self) -> float | None:
        values = [r["busbw_gbs"] for r in self.rows if r.get("busbw_gbs") is not None]
        return max(values) if values else None

    @property
    def wrong(self) -> int:
        return sum(r["wrong"] for r in self.rows if isinstance(r.get("wrong"), int))

    @property
    def largest_bytes(self) -> int | None:
        return max((r["bytes"] for r in self.rows), default=None)


def parse_all_reduce_perf(text: str) -> AllReduce:
    """nccl-tests `all_reduce_perf` (2.x): the data rows (size count type redop root, then out-of-place
    time algbw busbw #wrong and in-place time algbw busbw #wrong), "# Avg bus bandwidth" and the ranks."""
    found = AllReduce()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#  Rank") or stripped.startswith("#   Rank"):
            found.ranks += 1
        elif stripped.startswith("# Avg bus bandwidth"):
            found.average_busbw_gbs = _float(stripped.rsplit(":", 1)[-1])
        elif stripped and not stripped.startswith("#"):
            cols = stripped.split()
            if len(cols) >= 9 and cols[0].isdigit() and cols[1].isdigit():
                found.rows.append({"bytes": int(cols[0]), "busbw_gbs": _float(cols[7]), "algbw_gbs": _float(cols[6]),
                                   "wrong": _int(cols[8]) if cols[8] != "N/A" else None})
    return found


def _field(text: str, name: str) -> str | None:
    m = re.search(rf"{re.escape(name)}\s*:\s*(\S+)", text)
    return m.group(1) if m else None


def _int(text: Any) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def _float(text: Any) -> float | None:
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        return None
