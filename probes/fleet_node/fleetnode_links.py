"""The node's network links as NCCL sees them: /sys/class/net (name, state, MTU, speed, driver, IPv4
subnet) and /sys/class/infiniband (port state, rate, link layer, and the RoCE v2 GID indexes per
netdev, which differ between hosts: a GID index hard-coded in NCCL_IB_GID_INDEX does not carry).
"""

import fcntl
import os
import socket
import struct

SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B
MAX_GIDS = 64


def _read(path):
    try:
        with open(path, "r") as fh:
            return fh.read(4096).strip()
    except (OSError, ValueError):  # speed of a down link: EINVAL
        return None


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


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


def ib_links(root="/sys/class/infiniband"):
    links = []
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return links
    for dev in devices:
        ports = os.path.join(root, dev, "ports")
        try:
            port_names = sorted(os.listdir(ports), key=lambda p: _int(p) or 0)
        except OSError:
            continue
        for port in port_names:
            base = os.path.join(ports, port)
            state = _read(os.path.join(base, "state"))
            gids = []
            for index in range(MAX_GIDS):
                gtype = _read(os.path.join(base, "gid_attrs", "types", str(index)))
                if gtype is None:
                    if not os.path.exists(os.path.join(base, "gids", str(index))):
                        break
                    continue
                gid = _read(os.path.join(base, "gids", str(index)))
                if not gid or gid.replace(":", "").strip("0") == "":
                    continue
                gids.append({"index": index, "type": gtype, "ndev": _read(os.path.join(base, "gid_attrs", "ndevs", str(index))),
                             "ipv4": _gid_ipv4(gid)})
            links.append({
                "name": "%s/%s" % (dev, port), "kind": "infiniband", "port": _int(port),
                "state": state.split(":", 1)[-1].strip() if state else None,
                "rate": _read(os.path.join(base, "rate")), "link_layer": _read(os.path.join(base, "link_layer")),
                "gids": gids,
            })
    return links


def _gid_ipv4(gid):
    """The IPv4 address of an IPv4-mapped GID (0000:...:ffff:c0a8:6401), else None."""
    raw = gid.replace(":", "")
    if len(raw) == 32 and raw[:20].strip("0") == "" and raw[20:24].lower() == "ffff":
        return socket.inet_ntoa(bytes.fromhex(raw[24:]))
    return None


def roce_v2_indexes(ib):
    """{netdev: first RoCE v2 IPv4 GID index}: the index NCCL_IB_GID_INDEX should name on this host."""
    found = {}
    for link in ib:
        for gid in link.get("gids") or []:
            if "v2" in (gid.get("type") or "").lower() and gid.get("ipv4") and gid.get("ndev"):
                found.setdefault(gid["ndev"], gid["index"])
    return found
