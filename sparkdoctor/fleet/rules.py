"""Verdicts for the node facts only a fleet has (Facts.fleet), in the form of sparkdoctor/diff/rules.py:
data, one row per fact. Risky: what has broken multi-node runs when nodes disagree (each row says
which report). Benign: readings that differ by nature.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from sparkdoctor.diff.rules import BENIGN, RISKY
from sparkdoctor.facts import Facts
from sparkdoctor.fleet.drift import Drift
from sparkdoctor.fleet.fabric import hca_named

MEMORY_SPREAD_GIB = 8.0  # less free memory than the roomiest node by more than this: that node decides what fits
CLOCK_STEP_S = 2.0


T = TypeVar("T")


@dataclass(frozen=True)
class Rule(Generic[T]):
    area: str
    key: str
    verdict: str
    why: str
    read: Callable[[Mapping[str, object], Facts], T]  # a node's value: str | None, or {key: value} (FLEET_RULES_PER_KEY)
    shared_only: bool = False  # FLEET_RULES_PER_KEY: only the keys every node has (a port cabled on one node only)
    pinned_by: str | None = None  # risky only where a node sets this NCCL variable; else benign, why UNPINNED


def _nccl_loaded(fleet: Mapping[str, object], _: Facts) -> str | None:
    nccl = fleet.get("nccl")
    loaded = nccl.get("loaded") if isinstance(nccl, dict) else None
    if not isinstance(loaded, dict):
        return "none found"
    ident = loaded.get("build_id") or loaded.get("sha256") or "unidentified"
    return f"{loaded.get('version') or '?'} build {str(ident)[:16]} ({loaded.get('source')})"


def _nccl_split(fleet: Mapping[str, object], _: Facts) -> str | None:
    nccl = fleet.get("nccl")
    return "yes" if isinstance(nccl, dict) and nccl.get("pip_system_same_version_other_build") else "no"


def _nccl_conf(fleet: Mapping[str, object], _: Facts) -> str:
    confs = fleet.get("nccl_conf")
    if not isinstance(confs, list) or not confs:
        return "none"
    return "; ".join(f"{c.get('path')}: " + (", ".join(f"{k}={v}" for k, v in sorted((c.get("settings") or {}).items())) or "empty")
                     for c in confs if isinstance(c, dict))


def _cma(fleet: Mapping[str, object], _: Facts) -> str | None:
    cma = fleet.get("cma")
    if not isinstance(cma, dict):
        return None
    total = cma.get("total_kib")
    return "0 kB (no contiguous memory)" if total == 0 else f"{total} kB"


def _plain(key: str) -> Callable[[Mapping[str, object], Facts], str | None]:
    def read(fleet: Mapping[str, object], _: Facts) -> str | None:
        value = fleet.get(key)
        return None if value is None else str(value)

    return read


def _clock(fleet: Mapping[str, object], _: Facts) -> str | None:
    skew = fleet.get("clock_skew_s")
    if not isinstance(skew, (int, float)):
        return None
    return "in step" if abs(skew) <= CLOCK_STEP_S else f"{skew:+.1f} s off this machine"


def _gid_indexes(fleet: Mapping[str, object], _: Facts) -> dict[str, str]:
    gids = fleet.get("roce_v2_gid_index")
    return {str(k): str(v) for k, v in gids.items()} if isinstance(gids, dict) else {}


def _max_clocks(_: Mapping[str, object], facts: Facts) -> dict[str, str]:
    gpus = (facts.host_health or {}).get("gpus") or []
    return {f"gpu {g.get('index')}": str(g.get("clock_graphics_max_mhz")) for g in gpus if isinstance(g, dict)}


def _kernel(_: Mapping[str, object], facts: Facts) -> str | None:
    kernel = (facts.host or {}).get("kernel")
    return None if kernel is None else str(kernel)


# diff's rows that a fleet judges itself (with another verdict), left out of the comparison of check's fields
OVERRIDDEN = frozenset({("host", "kernel")})

FLEET_RULES: tuple[Rule[str | None], ...] = (
    Rule("kernel", "release", RISKY, "RDMA (mlx5, ib_core) and the GPU driver ride on the kernel: NCCL over RoCE "
         "failed on 7.0.0-1019-nvidia nodes and worked on 6.17 (luxingcom/aicad-nccl-optimization#1)", _kernel),
    Rule("nccl", "loaded library", RISKY, "the nodes load different NCCL builds (one version string can be two "
         "binaries: a TP=2 hang, vllm-project/vllm#41725)", _nccl_loaded),
    Rule("nccl", "pip and system builds differ", RISKY, "the wheel's and the system's libnccl carry one version and "
         "differ; which one loads decides", _nccl_split),
    Rule("nccl", "config file", RISKY, "NCCL reads these settings on some nodes only (a stale /etc/nccl.conf inside "
         "an image froze NCCL init: luxingcom/aicad-nccl-optimization#1)", _nccl_conf),
    Rule("kernel", "CMA", RISKY, "contiguous memory differs: RDMA memory registration fails where it is 0", _cma),
    Rule("driver", "flavour", RISKY, "open and proprietary kernel modules differ; Blackwell needs the open ones", _plain("driver_flavour")),
    Rule("cuda", "toolkit", RISKY, "kernels JIT-compiled on each node (FlashInfer, Triton, CuTe DSL) build with another CUDA",
         _plain("cuda_toolkit")),
    Rule("node", "in a container", BENIGN, "where the serving stack runs; the image content is compared apart", _plain("in_container")),
    Rule("node", "wall clock", BENIGN, f"a clock more than {CLOCK_STEP_S:g} s off: logs of the nodes misalign (check NTP)", _clock),
)

FLEET_RULES_PER_KEY: tuple[Rule[dict[str, str]], ...] = (
    Rule("links", "RoCE v2 GID index of", RISKY, "the RoCE v2 GID index of a port differs between hosts: one "
         "NCCL_IB_GID_INDEX cannot be right on every node", _gid_indexes, shared_only=True, pinned_by="NCCL_IB_GID_INDEX"),
    Rule("gpu", "max graphics clock of", RISKY, "another clock ceiling: the slowest node paces every collective", _max_clocks),
)


def memory_headroom(named: list[tuple[str, Facts]]) -> Drift | None:
    """A Drift naming the nodes with MEMORY_SPREAD_GIB less free memory than the roomiest node, or None."""
    free = {}
    for name, facts in named:
        kib = ((facts.host_health or {}).get("memory") or {}).get("available_kib")
        if isinstance(kib, (int, float)):
            free[name] = kib / (1 << 20)
    if len(free) < 2:
        return None
    top = max(free.values())
    low = [n for n, gib in free.items() if top - gib > MEMORY_SPREAD_GIB]
    if not low:
        return None
    values: dict[str, str | None] = {n: f"{gib:.1f} GiB free" for n, gib in free.items()}
    return Drift("memory", "headroom", RISKY, f"more than {MEMORY_SPREAD_GIB:g} GiB less free memory than the roomiest node: "
                 "the same --gpu-memory-utilization does not fit there (a leaked or orphaned process?)", values,
                 majority=None, has_majority=False, odd=low)


UNUSED_LINK = ("a physical link NCCL does not use: no RDMA device a node's NCCL_IB_HCA selects sits on it and no "
               "node's NCCL_SOCKET_IFNAME names it (a management port, Wi-Fi)")


UNPINNED = "{} is unset on every node: NCCL picks the RoCE v2 IPv4 GID of each device itself"


def pinned(named: list[tuple[str, Facts]], variable: str) -> bool:
    """Whether any node sets an NCCL variable: in its environment, or where its fabric facts found it
    (/etc/nccl.conf, ~/.nccl.conf)."""
    for _, facts in named:
        fab = (facts.fleet or {}).get("fabric")
        nccl = fab.get("nccl") if isinstance(fab, dict) else None
        if (facts.env or {}).get(variable) is not None or (isinstance(nccl, dict) and isinstance(nccl.get(variable), dict)):
            return True
    return False


def _nccl_setting(fab: dict[str, object], facts: Facts, key: str) -> str | None:
    """An NCCL variable in force on a node: where its fabric facts found it (environment, nccl.conf), else its env."""
    nccl = fab.get("nccl")
    entry = nccl.get(key) if isinstance(nccl, dict) else None
    spec = entry.get("value") if isinstance(entry, dict) else (facts.env or {}).get(key)
    return None if spec is None else str(spec)


def nccl_links(named: list[tuple[str, Facts]]) -> Callable[[str], bool] | None:
    """Whether NCCL may run on an interface of these nodes: the netdev of an RDMA port that some node's NCCL_IB_HCA
    selects (unset, it selects every device), or one any node's NCCL_SOCKET_IFNAME names. A ConnectX port on the LAN
    that NCCL_IB_HCA leaves out is not. None when a node sent no fabric facts (nothing can be ruled out)."""
    netdevs: set[str] = set()
    specs: set[str] = set()
    for _, facts in named:
        fab = (facts.fleet or {}).get("fabric")
        if not isinstance(fab, dict):
            return None
        hca = _nccl_setting(fab, facts, "NCCL_IB_HCA")
        for dev in fab.get("rdma") or []:
            for port in (dev.get("ports") or []) if isinstance(dev, dict) else []:
                if isinstance(port, dict) and port.get("netdev") and (
                        hca is None or hca_named(hca, str(dev.get("device")), port.get("port"))):
                    netdevs.add(str(port["netdev"]))
        spec = _nccl_setting(fab, facts, "NCCL_SOCKET_IFNAME")
        if spec:
            specs.add(spec)
    return lambda name: name in netdevs or "/" in name or any(hca_named(s, name) for s in specs)


def up_subnets(facts: Facts) -> dict[str, str]:
    """{link: IPv4 subnet} of the node's physical links that are up and addressed."""
    links = (facts.host_health or {}).get("links") or []
    return {str(x.get("name")): str(x.get("subnet")) for x in links
            if isinstance(x, dict) and x.get("subnet") and x.get("physical") and str(x.get("state")).lower() == "up"}


__all__ = ["BENIGN", "RISKY", "Rule", "FLEET_RULES", "FLEET_RULES_PER_KEY", "memory_headroom", "nccl_links", "pinned", "up_subnets"]
