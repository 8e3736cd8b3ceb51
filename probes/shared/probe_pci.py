"""The PCI bus under a root, as lspci -n names its devices ("10de:2e12"), read from sysfs. Standard library only,
Python 3.6+. One implementation for `check` on this machine (sparkdoctor/collect/host_health.py loads this file) and
for every fleet node (probes/fleet_node): sparkdoctor tells a GB10's unified memory from it.
"""

import os
import stat

MAX_DEVICES = 1024


def _attribute(path):
    """A sysfs attribute's first 64 bytes, lower-cased; "" for anything else (opened without blocking: a FIFO in a
    fixture tree is refused, never waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, 64).decode("ascii", "replace").strip().lower()
    except OSError:
        return ""
    finally:
        os.close(fd)


def pci_ids(root):
    """"vendor:device" of each PCI device under `root`'s /sys/bus/pci/devices, None where it cannot be listed."""
    base = os.path.join(root, "sys", "bus", "pci", "devices")
    try:
        names = sorted(os.listdir(base))[:MAX_DEVICES]
    except OSError:
        return None
    ids = []
    for name in names:
        vendor, device = (_attribute(os.path.join(base, name, attr)) for attr in ("vendor", "device"))
        ids.append("%s:%s" % (vendor[2:] if vendor.startswith("0x") else vendor, device[2:] if device.startswith("0x") else device))
    return ids
