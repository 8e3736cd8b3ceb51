"""The node's RDMA fabric as NCCL meets it, read-only, standard library only, under a root prefix
(SPARKDOCTOR_HOST_ROOT, as the host collectors read a fixture tree):

  every RDMA device (/sys/class/infiniband/*): its netdev, firmware (fw_ver), PCIe link
  (current_link_width/speed against max_link_width/speed), and per port: state, rate, link layer and the
  RoCE v2 GID table (ports/*/gids, gid_attrs/types, gid_attrs/ndevs);
  every netdev: state, MTU, speed; the IPv4 addresses and subnets (/proc/net/route + /proc/net/fib_trie,
  or `ip -j addr` on a live root, bounded);
  the NCCL settings in force: /etc/nccl.conf, then ~/.nccl.conf (or $NCCL_CONF_FILE), then the environment,
  each value with where it came from.
"""

import json
import os
import socket
import struct
import subprocess

MAX_GIDS = 256
MAX_DEVICES = 64
MAX_READ = 1 << 20
IP_TIMEOUT = 5.0
NCCL_KEYS = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX", "NCCL_IB_SUBNET_AWARE_ROUTING",
             "NCCL_IB_MERGE_NICS", "NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_DEBUG")


def _read(path, limit=4096):
    try:
        with open(path, "r") as fh:
            return fh.read(limit).strip()
    except (OSError, ValueError):  # the speed of a down link reads EINVAL
        return None


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _list(path, limit=MAX_DEVICES):
    try:
        return sorted(os.listdir(path))[:limit]
    except OSError:
        return []


def _under(root, path):
    return os.path.join(root, path.lstrip("/"))


def rate_gbps(text):
    """200 for '200 Gb/sec (2X NDR)'; None when unreadable."""
    try:
        return float(text.split()[0])
    except (AttributeError, IndexError, ValueError):
        return None


def gid_ipv4(gid):
    """The IPv4 address of an IPv4-mapped GID (0000:...:ffff:c0a8:6401), else None."""
    raw = (gid or "").replace(":", "")
    if len(raw) == 32 and raw[:20].strip("0") == "" and raw[20:24].lower() == "ffff":
        return socket.inet_ntoa(bytes.fromhex(raw[24:]))
    return None


def _gids(port_dir):
    gids = []
    for index in range(MAX_GIDS):
        gid = _read(os.path.join(port_dir, "gids", str(index)))
        if gid is None:
            if not os.path.exists(os.path.join(port_dir, "gids", str(index))):
                break
            continue
        if gid.replace(":", "").strip("0") == "":
            continue
        gids.append({"index": index, "gid": gid, "type": _read(os.path.join(port_dir, "gid_attrs", "types", str(index))),
                     "ndev": _read(os.path.join(port_dir, "gid_attrs", "ndevs", str(index))), "ipv4": gid_ipv4(gid)})
    return gids


def _pci(device_dir):
    real = os.path.realpath(device_dir) if os.path.exists(device_dir) else None
    pci = {"address": os.path.basename(real) if real else None}
    for key in ("current_link_width", "max_link_width", "current_link_speed", "max_link_speed"):
        value = _read(os.path.join(device_dir, key))
        pci[key] = _int(value) if key.endswith("width") else value
    return pci


def rdma_devices(root):
    devices = []
    base = _under(root, "/sys/class/infiniband")
    for name in _list(base):
        dev = os.path.join(base, name)
        netdevs = _list(os.path.join(dev, "device", "net"))
        ports = []
        for port in sorted(_list(os.path.join(dev, "ports")), key=lambda p: _int(p) or 0):
            pdir = os.path.join(dev, "ports", port)
            state = _read(os.path.join(pdir, "state"))
            phys = _read(os.path.join(pdir, "phys_state"))
            rate = _read(os.path.join(pdir, "rate"))
            gids = _gids(pdir)
            ndev = next((g["ndev"] for g in gids if g.get("ndev")), None) or (netdevs[0] if netdevs else None)
            ports.append({"port": _int(port), "state": state.split(":", 1)[-1].strip() if state else None,
                          "phys_state": phys.split(":", 1)[-1].strip() if phys else None, "rate": rate,
                          "rate_gbps": rate_gbps(rate), "link_layer": _read(os.path.join(pdir, "link_layer")),
                          "netdev": ndev, "gids": gids})
        devices.append({"device": name, "netdevs": netdevs, "fw_ver": _read(os.path.join(dev, "fw_ver")),
                        "board_id": _read(os.path.join(dev, "board_id")), "pci": _pci(os.path.join(dev, "device")),
                        "ports": ports})
    return devices


def netdevs(root):
    found = {}
    base = _under(root, "/sys/class/net")
    for name in _list(base, 256):
        if name == "lo":
            continue
        d = os.path.join(base, name)
        speed = _int(_read(os.path.join(d, "speed")))
        found[name] = {"state": _read(os.path.join(d, "operstate")), "mtu": _int(_read(os.path.join(d, "mtu"))),
                       "speed_mbps": speed if speed and speed > 0 else None,
                       "physical": os.path.exists(os.path.join(d, "device")), "addrs": []}
    return found


def _subnet(addr, prefix):
    value = struct.unpack("!I", socket.inet_aton(addr))[0]
    mask = (0xFFFFFFFF << (32 - prefix)) & 0xFFFFFFFF if prefix else 0
    return "%s/%d" % (socket.inet_ntoa(struct.pack("!I", value & mask)), prefix), value & mask, mask


def proc_addresses(root):
    """{netdev: ["a.b.c.d/prefix", ...]} from /proc/net/route (connected routes: interface, network, mask)
    and /proc/net/fib_trie (the LOCAL addresses): each local address on the interface whose network holds it."""
    routes = []
    text = _read(_under(root, "/proc/net/route"), MAX_READ) or ""
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8 or cols[2] != "00000000":  # a gateway route is not a connected subnet
            continue
        try:
            net = struct.unpack("<I", bytes.fromhex(cols[1]))[0]
            mask = struct.unpack("<I", bytes.fromhex(cols[7]))[0]
        except (ValueError, struct.error):
            continue
        if mask:
            routes.append((cols[0], net, mask))  # the file's hex is little-endian: "0064A8C0" is 192.168.100.0
    local, last = set(), None
    for line in (_read(_under(root, "/proc/net/fib_trie"), MAX_READ) or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("|--"):
            last = stripped[3:].strip()
        elif stripped.startswith("/32 host LOCAL") and last:
            local.add(last)
    found = {}
    for addr in sorted(local):
        try:
            value = struct.unpack("!I", socket.inet_aton(addr))[0]
        except OSError:
            continue
        for iface, net, mask in sorted(routes, key=lambda r: -r[2]):
            if value & mask == net:
                prefix = bin(mask).count("1")
                found.setdefault(iface, []).append("%s/%d" % (addr, prefix))
                break
    return found


def ip_addresses():
    """{netdev: ["a.b.c.d/prefix"]} from `ip -j addr` (5 s, 1 MiB), or None when ip is absent or fails."""
    try:
        done = subprocess.run(["ip", "-j", "-4", "addr"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              timeout=IP_TIMEOUT)
        rows = json.loads(done.stdout[:MAX_READ].decode("utf-8", "replace"))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    found = {}
    for row in rows if isinstance(rows, list) else []:
        for info in row.get("addr_info") or [] if isinstance(row, dict) else []:
            if info.get("family") == "inet" and info.get("local"):
                found.setdefault(str(row.get("ifname")), []).append("%s/%s" % (info["local"], info.get("prefixlen", 32)))
    return found


def nccl_settings(root, environ, home):
    """{KEY: {"value", "source"}} for NCCL_KEYS: /etc/nccl.conf, then the user's file ($NCCL_CONF_FILE or
    ~/.nccl.conf), then the environment; the later one wins, as NCCL reads them."""
    files = ["/etc/nccl.conf", environ.get("NCCL_CONF_FILE") or os.path.join(home or "/root", ".nccl.conf")]
    found = {}
    for path in files:
        text = _read(_under(root, path), MAX_READ)
        for line in (text or "").splitlines():
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                key, value = line.split("=", 1)
                if key.strip() in NCCL_KEYS:
                    found[key.strip()] = {"value": value.strip(), "source": path}
    for key in NCCL_KEYS:
        if key in environ:
            found[key] = {"value": environ[key], "source": "environment"}
    return found


def fabric(root=None, environ=None, home=None):
    root = root or os.environ.get("SPARKDOCTOR_HOST_ROOT") or "/"
    environ = dict(os.environ if environ is None else environ)
    nets = netdevs(root)
    live = os.path.realpath(root) == "/"
    addrs = ip_addresses() if live else None
    source = "ip -j addr"
    if addrs is None:
        addrs, source = proc_addresses(root), "/proc/net"
    for name, values in addrs.items():
        if name in nets:
            nets[name]["addrs"] = values
            nets[name]["subnets"] = sorted({_subnet(v.split("/")[0], int(v.split("/")[1]))[0] for v in values})
    return {"root": root, "rdma": rdma_devices(root), "netdevs": nets, "addresses_from": source,
            "nccl": nccl_settings(root, environ, home if home is not None else os.path.expanduser("~"))}
