"""`when.fleet`: what only a multi-node check sees (Facts.fleet, filled by `sparkdoctor fleet check`).

Every key is a multi-node signal: on a plain `check` (Facts.fleet is None: one box) each is False and
says so, so these entries never fire on a single Spark and never leave it undecided.

  multi_node = true              two or more nodes answered
  odd = ["packages: vllm", ...]  this node is off the fleet's majority (or there is none) on one of these
                                 risky differences ("area: key" as `fleet check` prints them; "*" globs)
  nccl_pip_system_split = true   this node's pip and system libnccl carry one version and differ
  cma_zero = true                /proc/meminfo says CmaTotal: 0 kB
  nccl_conf = true               an NCCL config file (/etc/nccl.conf, ~/.nccl.conf, $NCCL_CONF_FILE) exists
  unpaired_links = true          a link of this node is up on a subnet no other node has
  fabric = ["hca-twin", ...]     a fabric rule (sparkdoctor/fleet/fabric.py RULES) found this node wrong; the
                                 evidence names the node, the link and the setting
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from sparkdoctor.facts import Facts
from sparkdoctor.matrix.model import Check

FLAGS = ("multi_node", "nccl_pip_system_split", "cma_zero", "nccl_conf", "unpaired_links")
KEYS = (*FLAGS, "odd", "fabric")
SINGLE = "not a fleet check (one box): no multi-node signal"


def v_fleet(value: object) -> str | None:
    if not isinstance(value, dict) or not value:
        return f"must be a table of fleet signals ({', '.join(KEYS)})"
    for key, test in value.items():
        if key not in KEYS:
            return f"{key!r}: not a fleet signal (one of {', '.join(KEYS)})"
        if key == "odd":
            if not (isinstance(test, list) and test and all(isinstance(t, str) and ": " in t for t in test)):
                return "odd: must be a non-empty list of \"area: key\" strings"
        elif key == "fabric":  # the rule names are fleet/fabric.py's RULES (tests/fleet/test_fabric.py holds them equal)
            if not (isinstance(test, list) and test and all(isinstance(t, str) and t for t in test)):
                return "fabric: must be a non-empty list of fabric rule names"
        elif not isinstance(test, bool):
            return f"{key}: must be true or false"
    return None


def eval_fleet(value: Any, facts: Facts) -> list[Check]:
    fleet = facts.fleet
    checks = []
    for key, test in value.items():
        name = f"fleet.{key}"
        if not isinstance(fleet, dict):
            checks.append(Check(name, False, SINGLE))
            continue
        if key == "odd":
            odd = [str(x) for x in fleet.get("odd") or []]
            hits = [label for label in odd if any(fnmatchcase(label, pattern) for pattern in test)]
            where = f"node {fleet.get('node')}"
            checks.append(Check(name, bool(hits), f"{where} is the odd one on {', '.join(hits)}" if hits
                                else f"{where} is on the majority for {', '.join(test)}"))
            continue
        if key == "fabric":
            checks.append(_fabric(test, fleet))
            continue
        got = _flag(key, fleet)
        if got is None:
            checks.append(Check(name, None, f"{key.replace('_', ' ')} unknown on node {fleet.get('node')}"))
            continue
        checks.append(Check(name, got is test, _evidence(key, got, fleet)))
    return checks


def _fabric(rules: list[str], fleet: Mapping[str, object]) -> Check:
    rows = fleet.get("fabric_findings")
    if not isinstance(rows, list):
        return Check("fleet.fabric", None, f"no fabric facts from node {fleet.get('node')}")
    hits = [r for r in rows if isinstance(r, dict) and r.get("rule") in rules]
    if not hits:
        return Check("fleet.fabric", False, f"node {fleet.get('node')}: {', '.join(rules)} found nothing")
    return Check("fleet.fabric", True, "; ".join(f"node {r.get('node')}, link {r.get('link')}, {r.get('setting')}: "
                                                 f"{r.get('detail')}" for r in hits))


def _flag(key: str, fleet: Mapping[str, object]) -> bool | None:
    if key == "multi_node":
        nodes = fleet.get("nodes")
        return None if not isinstance(nodes, int) else nodes >= 2
    if key == "nccl_pip_system_split":
        nccl = fleet.get("nccl")
        return bool(nccl.get("pip_system_same_version_other_build")) if isinstance(nccl, dict) else None
    if key == "cma_zero":
        cma = fleet.get("cma")
        total = cma.get("total_kib") if isinstance(cma, dict) else None
        return None if not isinstance(total, int) else total == 0
    if key == "nccl_conf":
        confs = fleet.get("nccl_conf")
        return None if not isinstance(confs, list) else bool(confs)
    links = fleet.get("unpaired_links")
    return None if not isinstance(links, list) else bool(links)


def _evidence(key: str, got: bool, fleet: dict[str, Any]) -> str:
    node = fleet.get("node")
    if key == "multi_node":
        return f"{fleet.get('nodes')} nodes checked together"
    if key == "nccl_pip_system_split":
        loaded = (fleet.get("nccl") or {}).get("loaded") or {}
        return (f"node {node}: pip and system libnccl of one version, different builds; loaded: "
                f"{loaded.get('path')} ({loaded.get('source')})" if got else f"node {node}: no same-version NCCL pair that differs")
    if key == "cma_zero":
        return f"node {node}: CmaTotal {(fleet.get('cma') or {}).get('total_kib')} kB"
    if key == "nccl_conf":
        paths = [str(c.get("path")) for c in fleet.get("nccl_conf") or [] if isinstance(c, dict)]
        return f"node {node}: NCCL reads {', '.join(paths)}" if paths else f"node {node}: no NCCL config file"
    links = fleet.get("unpaired_links") or []
    return f"node {node}: {', '.join(map(str, links))} up on a subnet no other node has" if links else \
        f"node {node}: every addressed link shares its subnet with another node"
