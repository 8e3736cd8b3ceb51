"""What a multi-node launch needs every node to agree on, read on one node: standard library only,
Python 3.8+, run by the node's serving interpreter (over SSH or as a Ray task; see sparkdoctor/fleet/).

    python -B probes/fleet_node

Prints ONE JSON object on the last line of stdout: the host (OS, kernel, machine), memory and CMA,
the NVIDIA driver with its flavour and CUDA, the CUDA toolkit, GPU clocks (nvidia-smi), the NCCL
library that loads and its build identity, the NCCL config files, the communication environment
(NCCL_, GLOO_, UCX_, ...), the links (/sys/class/net, /sys/class/infiniband), the RDMA fabric and the
NCCL settings in force (fleetnode_fabric.py), /proc/meminfo and PSI as text and the kernel log's memory lines
(fleetnode_hostmem.py: host health per node) with the processes and containers holding memory, earlyoom's and
systemd-oomd's kill lines in the journal, the memory cgroup's limit (memory.max, memory.high), whether it runs in a container, the node's name and its clock. Every partial failure is an error line, never the end.
"""

import os
import sys
import time

sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "shared"))
import probe_site  # noqa: E402

probe_site.rebuild()  # started with -S: the node's site-packages (where a pip NCCL lives), from files only

from fleetnode_fabric import fabric  # noqa: E402
from fleetnode_hostmem import daemon_log, holders, kernel_log, texts  # noqa: E402
from fleetnode_links import ib_links, net_links, roce_v2_indexes  # noqa: E402
from fleetnode_nccl import nccl_conf, nccl_libraries  # noqa: E402
from fleetnode_system import (  # noqa: E402
    cuda_toolkit,
    driver,
    identity,
    in_container,
    meminfo,
    nvidia_smi,
)
from probe_io import answer  # noqa: E402
from probe_memlimit import limit  # noqa: E402  (the memory cgroup's limit, read as check reads this machine's)
from probe_pci import pci_ids  # noqa: E402  (the PCI bus: a GB10 there means unified memory)

ENV_PREFIXES = ("NCCL_", "GLOO_", "UCX_", "TP_SOCKET", "OMPI_MCA_", "MASTER_", "RAY_", "LD_PRELOAD", "LD_LIBRARY_PATH",
                "VLLM_NCCL_SO_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")


def comm_env():
    found = {}
    for name, value in os.environ.items():
        if name.startswith(ENV_PREFIXES):
            found[name] = "<redacted>" if any(w in name.upper() for w in SECRET_WORDS) else value
    return dict(sorted(found.items()))


def main():
    errors = []
    uname = os.uname()
    os_name = None
    try:
        with open("/etc/os-release") as fh:
            for line in fh.read(65536).splitlines():
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip("\"'")
    except OSError:
        pass
    memory, cma = meminfo()
    try:
        fabric_facts = fabric()
    except Exception as exc:  # a sysfs oddity costs the fabric facts, never the node's answer
        fabric_facts = None
        errors.append("fabric: %s: %s" % (type(exc).__name__, exc))
    root = os.environ.get("SPARKDOCTOR_HOST_ROOT") or "/"
    try:
        host_texts, kernel, pci = texts(root), kernel_log(root), pci_ids(root)
    except Exception as exc:  # an odd file costs host health's memory readings, never the node's answer
        host_texts, kernel, pci = None, None, None
        errors.append("host memory: %s: %s" % (type(exc).__name__, exc))
    try:
        memory_holders = holders(root)
    except Exception as exc:  # the same: it costs the holders, never the answer
        memory_holders = None
        errors.append("memory holders: %s: %s" % (type(exc).__name__, exc))
    try:  # the journal of the user-space OOM killers, and the memory cgroup a launch from here starts in
        daemons, memory_limit = daemon_log(root), limit(root)
    except Exception as exc:  # the same: they cost these readings, never the answer
        daemons, memory_limit = None, None
        errors.append("oom daemons, memory limit: %s: %s" % (type(exc).__name__, exc))
    ib = ib_links(fabric_facts)
    result = {
        "probe": "fleet_node",
        "host": {"os": os_name, "machine": uname.machine, "kernel": uname.release},
        "node": identity(),
        "memory": memory,
        "cma": cma,
        "driver": driver(errors),
        "cuda_toolkit": cuda_toolkit(),
        "gpus": nvidia_smi(errors),
        "nccl": nccl_libraries(errors),
        "nccl_conf": nccl_conf(errors),
        "env": comm_env(),
        "links": net_links() + ib,
        "roce_v2_gid_index": roce_v2_indexes(ib),
        "fabric": fabric_facts,
        "in_container": in_container(),
        "python": sys.executable,
        "host_texts": host_texts,
        "pci_ids": pci,
        "kernel_log": kernel,
        "memory_holders": memory_holders,
        "daemon_log": daemons,
        "memory_limit": memory_limit,
        "errors": errors,
    }
    result["time"] = time.time()
    answer(result)


if __name__ == "__main__":
    main()
