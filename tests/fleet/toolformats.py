"""ibv_devinfo and show_gids (rdma-core / MLNX_OFED) output read into the node probe's "rdma" shape
([{"device", "fw_ver", "board_id", "ports": [{"port", "state", "link_layer", "gids"}]}]), so the tests can check
that the sysfs probe sees what those tools print for the same box."""

from __future__ import annotations

import re
from typing import Any


def _int(text: Any) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


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
