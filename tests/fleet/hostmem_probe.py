"""The fleet node probe's memory module, loaded from its file as the node runs it: with probes/shared/ on the path
(the node's bundle carries it beside the probe; fleetnode_hostmem reads small files with probe_memlimit's reader)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from sparkdoctor.locations import data_dir

PROBE = data_dir("probes") / "fleet_node" / "fleetnode_hostmem.py"
SHARED = data_dir("probes") / "shared"


def load_hostmem(name: str = "fleetnode_hostmem") -> ModuleType:
    if str(SHARED) not in sys.path:
        sys.path.insert(0, str(SHARED))
    spec = importlib.util.spec_from_file_location(name, PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
