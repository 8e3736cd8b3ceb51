"""Trigger / near-miss rows for matrix/multinode.toml (merged into tests/test_matrix_entries.py CASES).

Each row edits the healthy GB10 baseline with the `fleet` field a `sparkdoctor fleet check` fills for one
node (sparkdoctor/fleet/node.py and fleet/__init__.py): the baseline itself is a single box (fleet None),
on which every multinode entry must be clear.
"""

from __future__ import annotations

from typing import Any


def node(nodes: int = 2, odd: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    """Facts.fleet of one node of a healthy fleet of `nodes`, off the majority on `odd`."""
    fleet: dict[str, Any] = {
        "node": "spark-2", "nodes": nodes, "drift": list(odd), "odd": list(odd), "unpaired_links": [],
        "nccl": {"candidates": [], "loaded": None, "pip_system_same_version_other_build": False},
        "nccl_conf": [], "cma": {"total_kib": 65536, "free_kib": 60000, "cmdline": None},
        "roce_v2_gid_index": {"enp1s0f0np0": 3}, "topology": "pair", "fabric_findings": [],
    }
    fleet.update(extra)
    return fleet


SPLIT = {"candidates": [], "loaded": None, "pip_system_same_version_other_build": True}
CONF = [{"path": "/etc/nccl.conf", "settings": {"NCCL_IB_USE_INLINE": "1"}, "sha256": "0" * 64}]

def _row(rule: str) -> dict[str, str]:
    return {"rule": rule, "node": "spark-2", "link": "rocep1s0f1 port 1 (enp1s0f1np1)", "setting": "NCCL_IB_HCA=x",
            "detail": "d"}


MULTINODE_CASES: dict[str, tuple[dict, dict]] = {
    "multinode-nccl-build-drift": (
        dict(fleet=node(odd=("nccl: loaded library",))),
        dict(fleet=node(nodes=1, odd=("nccl: loaded library",))),  # the only node that answered: nothing to differ from
    ),
    "multinode-nccl-pip-system-split": (
        dict(fleet=node(nccl=SPLIT)),
        dict(fleet=node(nodes=1, nccl=SPLIT)),  # a single box: the split alone has not hung anything
    ),
    "multinode-kernel-cma-zero": (
        dict(fleet=node(cma={"total_kib": 0, "free_kib": 0, "cmdline": None})),
        dict(fleet=node(cma={"total_kib": 32768, "free_kib": 1024, "cmdline": None})),
    ),
    "multinode-stale-nccl-conf": (
        dict(fleet=node(odd=("nccl: config file",), nccl_conf=CONF)),
        dict(fleet=node(nccl_conf=CONF)),  # the same file on every node: a decision, not drift
    ),
    "multinode-roce-gid-index-hardcoded": (
        dict(env={"NCCL_IB_GID_INDEX": "3"}, fleet=node(odd=("links: RoCE v2 GID index of enp1s0f0np0",))),
        dict(fleet=node(odd=("links: RoCE v2 GID index of enp1s0f0np0",))),  # unset: NCCL picks per device
    ),
    "multinode-link-unpaired": (
        dict(fleet=node(unpaired_links=["enp1s0f1np1"])),
        dict(fleet=node()),
    ),
    "multinode-serving-stack-drift": (
        dict(fleet=node(nodes=3, odd=("cutedsl: active build",))),
        dict(fleet=node(nodes=3, odd=("packages: numpy",))),  # not part of the serving stack
    ),
    **{entry: (dict(fleet=node(fabric_findings=[_row(rule)])), dict(fleet=node(fabric_findings=[_row(other)])))
       for entry, rule, other in (
           ("multinode-fabric-hca-one-twin", "hca-twin", "mtu-mismatch"),
           ("multinode-fabric-gid-index-invalid", "gid-index", "hca-twin"),
           ("multinode-fabric-ring-routing", "ring-routing", "gid-index"),
           ("multinode-fabric-mtu-mismatch", "mtu-mismatch", "ring-routing"),
           ("multinode-fabric-rail-degraded", "rail-degraded", "rail-slow"),
           ("multinode-fabric-rail-slow", "rail-slow", "rail-degraded"),
           ("multinode-fabric-measure-failed", "measure-failed", "rail-slow"),
       )},  # each fires on its own rule's row only (fleet/fabric.py names the rows)
}
