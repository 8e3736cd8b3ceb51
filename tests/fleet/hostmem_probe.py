"""The fleet node probe's memory module, loaded from its file as the node runs it: with probes/shared/ on the path
(the node's bundle carries it beside the probe; fleetnode_hostmem reads small files with probe_memlimit's reader)."""

from __future__ import annotations

from types import ModuleType

from sparkdoctor.locations import data_dir
from tests.probe_modules import probe_module

PROBE = data_dir("probes") / "fleet_node" / "fleetnode_hostmem.py"
SHARED = data_dir("probes") / "shared"


def load_hostmem(name: str = "fleetnode_hostmem") -> ModuleType:
    return probe_module("fleet_node", "fleetnode_hostmem", own_name=name)
