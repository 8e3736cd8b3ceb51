"""The fabric gate on fixture Spark trees (tests/fleet/fabric_trees.py): the node probe's fabric facts read
under a root prefix, the topology, each rule, and the gate's verdict through the matrix: a 2-node pair and a
4-node ring with the known mistakes each get a NO-GO naming the node, the link and the setting; correct
ones get GO."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkdoctor import matrix
from sparkdoctor.fleet import FleetOptions, FleetResult, fabric, judge
from sparkdoctor.fleet.bundle import bundle
from sparkdoctor.fleet.node import NodeOutcome
from sparkdoctor.fleet.transport import Node
from sparkdoctor.locations import data_dir
from tests.fleet.fabric_trees import Spark, pair, ring, write
from tests.fleet.test_fleet_compare import fleet_facts
from tests.probe_modules import probe_module

probe = probe_module("fleet_node", "fleetnode_fabric")


def read(tmp_path: Path, sparks: list[Spark]) -> dict[str, dict]:
    return {s.name: probe.fabric(str(write(tmp_path / s.name, s)), s.env, "/root") for s in sparks}


def gate(fabrics: dict[str, dict]) -> FleetResult:
    named = []
    for name, fab in fabrics.items():
        facts = fleet_facts(name)
        facts.fleet["fabric"] = fab
        named.append((name, facts))
    reports, drifts, notes, topo, found = judge(named, matrix.load(), FleetOptions())
    return FleetResult("ssh", [NodeOutcome(Node(n), f) for n, f in named], reports, drifts, notes, 1.0, "error", topo, found)


def evidence(result: FleetResult, entry: str) -> dict[str, list[str]]:
    """{node: evidence lines of `entry`'s finding} for every node where it fired."""
    out: dict[str, list[str]] = {}
    for name, report in result.reports.items():
        for f in report.findings:
            if f.id == entry:
                out[name] = list(f.evidence)
    return out


def test_the_probe_reads_a_spark_tree_under_its_root(tmp_path):
    spark = Spark("spark-1", {"p1": "192.168.100.11/24"}, mtu={"enp1s0f1np1": 1500}, extra_gids=1,
                  nccl_conf="NCCL_IB_GID_INDEX=3\nNCCL_DEBUG=WARN  # quiet\nNCCL_OTHER=1\n",
                  env={"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "rocep1s0f1"})
    fab = probe.fabric(str(write(tmp_path, spark)), spark.env, "/root")
    devices = {d["device"]: d for d in fab["rdma"]}
    assert set(devices) == {"rocep1s0f0", "roceP2p1s0f0", "rocep1s0f1", "roceP2p1s0f1"}
    dev = devices["rocep1s0f1"]
    assert dev["fw_ver"] == "28.45.4028" and dev["netdevs"] == ["enp1s0f1np1"]
    assert dev["pci"] == {"address": "0000:01:00.1", "current_link_width": 4, "max_link_width": 16,
                          "current_link_speed": "32.0 GT/s PCIe", "max_link_speed": "32.0 GT/s PCIe"}
    [port] = dev["ports"]
    assert port["state"] == "ACTIVE" and port["rate_gbps"] == 200 and port["netdev"] == "enp1s0f1np1"
    v2 = [g for g in port["gids"] if g["type"] == "RoCE v2" and g["ipv4"]]
    assert [(g["index"], g["ipv4"]) for g in v2] == [(5, "192.168.100.11")]  # two IPv6 entries moved it from 3
    assert devices["rocep1s0f0"]["ports"][0]["state"] == "DOWN"
    assert fab["netdevs"]["enp1s0f1np1"]["addrs"] == ["192.168.100.11/24"]
    assert fab["netdevs"]["enp1s0f1np1"]["subnets"] == ["192.168.100.0/24"]
    assert fab["netdevs"]["enp1s0f1np1"]["mtu"] == 1500 and fab["addresses_from"] == "/proc/net"
    assert fab["nccl"] == {"NCCL_IB_GID_INDEX": {"value": "3", "source": "/etc/nccl.conf"},
                           "NCCL_DEBUG": {"value": "INFO", "source": "environment"},
                           "NCCL_IB_HCA": {"value": "rocep1s0f1", "source": "environment"}}


def test_the_bundled_node_probe_carries_the_fabric_facts_of_its_root(tmp_path):
    """As ssh and Ray run it: the bundle on stdin, the root from SPARKDOCTOR_HOST_ROOT."""
    root = write(tmp_path / "tree", Spark("spark-1", {"p0": "10.0.0.1/30"}))
    done = subprocess.run([sys.executable, "-B", "-"], input=bundle("fleet_node"), capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SPARKDOCTOR_HOST_ROOT": str(root), "NCCL_ALGO": "Ring"})
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    fab = answer["fabric"]
    assert fab["root"] == str(root)
    ib = {link["name"]: link for link in answer["links"] if link["kind"] == "infiniband"}  # the same reading, as links
    assert set(ib) == {"rocep1s0f0/1", "roceP2p1s0f0/1", "rocep1s0f1/1", "roceP2p1s0f1/1"}
    assert ib["rocep1s0f0/1"]["state"] == "ACTIVE" and ib["rocep1s0f1/1"]["state"] == "DOWN"
    assert answer["roce_v2_gid_index"] == {"enp1s0f0np0": 3}
    assert fab["netdevs"]["enp1s0f0np0"]["subnets"] == ["10.0.0.0/30"]
    assert fab["nccl"]["NCCL_ALGO"] == {"value": "Ring", "source": "environment"}


@pytest.mark.parametrize("sparks,kind", [
    (pair(), "pair"), (ring(3), "triangle"), (ring(4), "ring"), (ring(6), "ring"),
    (pair() + [Spark("spark-3", {"p1": "192.168.100.13/24"})], "switch"),
    (ring(4)[:3], "partial"),  # a ring with a cable pulled: a line, not a ring
])
def test_topology_from_the_subnets(tmp_path, sparks, kind):
    topo = fabric.topology(read(tmp_path, sparks))
    assert topo.kind == kind


def test_a_correct_pair_and_a_correct_ring_are_go(tmp_path):
    for name, sparks in (("pair", pair()), ("ring", ring(4))):
        result = gate(read(tmp_path / name, sparks))
        assert result.fabric == [], [f.line() for f in result.fabric]
        assert result.exit_code() == 0, {n: [f.id for f in r.failing()] for n, r in result.reports.items()}


ONE_TWIN = {"spark-2": {"env": {"NCCL_IB_HCA": "rocep1s0f1"}}}
GID = {n: {"nccl_conf": "NCCL_IB_GID_INDEX=3\n"} for n in ("spark-1", "spark-2")} | \
    {"spark-2": {"nccl_conf": "NCCL_IB_GID_INDEX=3\n", "extra_gids": 1}}
MTU = {"spark-2": {"mtu": {"enP2p1s0f1np1": 9000, "enp1s0f1np1": 1500}}}
SLOW_PCIE = {"spark-2": {"pcie_width": {"rocep1s0f1": 1}}}


@pytest.mark.parametrize("overrides,entry,node,link,setting", [
    (ONE_TWIN, "multinode-fabric-hca-one-twin", "spark-2", "roceP2p1s0f1 port 1 (enP2p1s0f1np1)",
     "NCCL_IB_HCA=rocep1s0f1 (environment)"),
    (GID, "multinode-fabric-gid-index-invalid", "spark-2", "rocep1s0f1 port 1 (enp1s0f1np1)",
     "NCCL_IB_GID_INDEX=3 (/etc/nccl.conf)"),
    (MTU, "multinode-fabric-mtu-mismatch", "spark-2", "spark-1:enp1s0f1np1 <-> spark-2:enp1s0f1np1 (192.168.100.0/24)",
     "mtu 1500 on enp1s0f1np1"),
    (SLOW_PCIE, "multinode-fabric-rail-degraded", "spark-2", "spark-1:enp1s0f1np1 <-> spark-2:enp1s0f1np1",
     "PCIe 0000:01:00.1 x1"),
])
def test_a_pair_with_a_known_mistake_is_no_go_naming_node_link_and_setting(tmp_path, overrides, entry, node, link, setting):
    result = gate(read(tmp_path, pair(**overrides)))
    assert result.exit_code() == 1
    fired = evidence(result, entry)
    assert list(fired) == [node]
    line = next(e for e in fired[node] if e.startswith(f"node {node}, link "))
    assert f"node {node}" in line and link in line and setting in line


RING_ROUTING = {"spark-3": {"env": {}}}
RING_ONE_TWIN = {"spark-2": {"env": {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_IB_HCA": "rocep1s0f0,rocep1s0f1"}}}
RING_GID = {n: {"env": {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_IB_GID_INDEX": "3"}} for n in
            ("spark-1", "spark-2", "spark-3")} | \
    {"spark-4": {"env": {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_IB_GID_INDEX": "3"}, "extra_gids": 2}}
RING_SLOW = {"spark-1": {"rate": {"rocep1s0f0": 100, "roceP2p1s0f0": 100}}}
RING_MERGE = {"spark-4": {"env": {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_IB_MERGE_NICS": "0"}}}


@pytest.mark.parametrize("overrides,entry,node,link,setting", [
    (RING_ROUTING, "multinode-fabric-ring-routing", "spark-3",
     "spark-2:enp1s0f0np0 <-> spark-3:enp1s0f1np1 (192.168.11.0/24)", "NCCL_IB_SUBNET_AWARE_ROUTING unset"),
    (RING_MERGE, "multinode-fabric-ring-routing", "spark-4", "spark-4:enp1s0f0np0", "NCCL_IB_MERGE_NICS=0 (environment)"),
    (RING_ONE_TWIN, "multinode-fabric-hca-one-twin", "spark-2", "roceP2p1s0f0 port 1 (enP2p1s0f0np0)",
     "NCCL_IB_HCA=rocep1s0f0,rocep1s0f1 (environment)"),
    (RING_GID, "multinode-fabric-gid-index-invalid", "spark-4", "rocep1s0f0 port 1 (enp1s0f0np0)",
     "NCCL_IB_GID_INDEX=3 (environment)"),
    (RING_SLOW, "multinode-fabric-rail-degraded", "spark-1",
     "spark-1:enp1s0f0np0 <-> spark-2:enp1s0f1np1 (192.168.10.0/24)", "rate 100 Gb/s on enp1s0f0np0"),
])
def test_a_4_node_ring_with_a_known_mistake_is_no_go_naming_node_link_and_setting(tmp_path, overrides, entry, node,
                                                                                   link, setting):
    result = gate(read(tmp_path, ring(4, **overrides)))
    assert result.topology.kind == "ring"
    assert result.exit_code() == 1
    fired = evidence(result, entry)
    assert list(fired) == [node]
    line = next(e for e in fired[node] if e.startswith(f"node {node}, link "))
    assert f"node {node}" in line and link in line and setting in line


def test_the_gid_finding_says_which_index_is_right_there(tmp_path):
    _, found = fabric.judge(read(tmp_path, pair(**GID)))
    [row] = found
    assert "index 3 holds RoCE v2 fd00:" in row.detail and "RoCE v2 IPv4 GID is index 5" in row.detail


def test_a_triangle_leaves_merge_nics_alone_but_needs_subnet_aware_routing(tmp_path):
    env = {"NCCL_IB_SUBNET_AWARE_ROUTING": "1", "NCCL_IB_MERGE_NICS": "0"}  # what eugr's mesh mode writes
    _, found = fabric.judge(read(tmp_path / "ok", ring(3, **{n: {"env": env} for n in ("spark-1", "spark-2", "spark-3")})))
    assert found == []
    _, found = fabric.judge(read(tmp_path / "bad", ring(3, **{"spark-1": {"env": {}}})))
    assert [(f.rule, f.node) for f in found] == [(fabric.RING_ROUTING, "spark-1")]


@pytest.mark.parametrize("spec,device,port,named", [
    ("rocep1s0f1,roceP2p1s0f1", "roceP2p1s0f1", 1, True),
    ("rocep1s0f1", "roceP2p1s0f1", 1, False),
    ("roce", "roceP2p1s0f1", 1, True),  # a prefix
    ("=roce", "roceP2p1s0f1", 1, False),  # exact names only
    ("^rocep1s0f0", "rocep1s0f1", 1, True),
    ("^rocep1s0f1", "rocep1s0f1", 1, False),
    ("rocep1s0f1:2", "rocep1s0f1", 1, False),
    ("rocep1s0f1:1", "rocep1s0f1", 1, True),
])
def test_nccl_ib_hca_syntax(spec, device, port, named):
    assert fabric.hca_named(spec, device, port) is named


def test_every_fabric_rule_has_one_matrix_entry_and_every_entry_names_a_rule():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    data = tomllib.loads((data_dir("matrix") / "multinode.toml").read_text())
    named = [r for e in data["entry"] for r in (e.get("when", {}).get("fleet", {}).get("fabric") or [])]
    assert sorted(named) == sorted(fabric.RULES)
    for entry in data["entry"]:
        rules = entry.get("when", {}).get("fleet", {}).get("fabric") or []
        for rule in rules:
            assert fabric.RULES[rule][1] in entry["refs"]  # the rule's source is its entry's source


def test_an_nccl_ib_hca_that_names_no_up_device_is_the_socket_fallback(tmp_path):
    _, found = fabric.judge(read(tmp_path, pair(**{"spark-1": {"env": {"NCCL_IB_HCA": "mlx5_0"}}})))
    assert [(f.rule, f.node) for f in found] == [(fabric.HCA_TWIN, "spark-1")] * 2
    assert all("falls back to TCP sockets" in f.detail for f in found)


def test_the_gid_index_is_judged_only_on_the_devices_nccl_uses(tmp_path):
    # spark-2's rocep1s0f1 has its RoCE v2 IPv4 GID at 5, but NCCL_IB_HCA excludes it
    env = {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "^rocep1s0f1"}
    _, found = fabric.judge(read(tmp_path, pair(**{"spark-2": {"env": env, "extra_gids": 1}})))
    assert [f.rule for f in found] == [fabric.HCA_TWIN]  # the exclusion itself leaves a device idle


def test_a_node_answering_a_fabric_of_the_wrong_shape_costs_nothing(tmp_path):
    good = read(tmp_path, pair())
    odd = {"rdma": ["x", {"device": "d", "ports": [7, {"port": 1, "state": "ACTIVE", "link_layer": "Ethernet",
                                                        "gids": "no", "netdev": "n"}], "pci": 3}],
           "netdevs": {"n": {"state": "up", "subnets": [1, "192.168.100.0/24"], "addrs": "x"}, "m": 5},
           "nccl": {"NCCL_IB_HCA": "not a dict", "NCCL_IB_GID_INDEX": {"value": "3", "source": "environment"}}}
    fabrics = {"spark-1": good["spark-1"], "spark-2": fabric.clean(odd)}
    topo, found = fabric.judge(fabrics)
    assert topo.kind == "pair" and found == []
    assert fabric.clean("garbage") is None and fabric.clean([1]) is None
    for dev in good["spark-2"]["rdma"]:  # numbers that are not numbers
        dev["pci"]["current_link_width"] = "x4"
        for port in dev["ports"]:
            port["rate_gbps"] = "fast"
    topo, found = fabric.judge({n: fabric.clean(f) for n, f in good.items()})
    assert topo.kind == "pair" and found == []  # unknown, never a finding


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
                        ["rdma", "ports", "gids", "netdevs", "nccl", "pci", "device", "port", "state", "link_layer",
                         "netdev", "rate_gbps", "subnets", "addrs", "mtu", "value", "type", "ipv4", "index",
                         "current_link_width", "current_link_speed", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "n"]),
                        inner, max_size=5), max_leaves=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), JSON, min_size=1, max_size=3))
def test_the_fabric_rules_never_raise_on_any_node_answer(answers):
    fabrics = {name: cleaned for name, raw in answers.items() if (cleaned := fabric.clean(raw)) is not None}
    topo, found = fabric.judge(fabrics)
    assert topo.kind in ("single", "pair", "triangle", "ring", "switch", "partial", "none")
    assert all(f.node in fabrics for f in found)


def test_proc_net_addresses_agree_with_the_kernel_on_this_machine():
    """/proc/net/route + fib_trie read here give each interface the address and prefix the kernel reports for it
    (SIOCGIFADDR / SIOCGIFNETMASK, the node probe's other reading)."""
    fleetnode_links = probe_module("fleet_node", "fleetnode_links")
    found = probe.proc_addresses("/")
    for name, addrs in found.items():
        addr, prefix = fleetnode_links._ipv4(name)
        assert f"{addr}/{prefix}" in addrs, (name, addrs)
    routed = {line.split()[0] for line in Path("/proc/net/route").read_text().splitlines()[1:] if line.split()[2:3] == ["00000000"]}
    assert set(found) == {n for n in routed if fleetnode_links._ipv4(n)[0] and fleetnode_links._ipv4(n)[1] != 32}


def test_one_node_has_no_fabric_to_judge(tmp_path):
    fabrics = read(tmp_path, pair(**ONE_TWIN))
    topo, found = fabric.judge({"spark-2": fabrics["spark-2"]})
    assert topo.kind == "single" and found == []


@pytest.mark.parametrize("spec,name,named", [
    ("enp1s0f0np0,eth", "eth0", True),  # prefixes
    ("=eth", "eth0", False),  # exact names only
    ("^enp", "enp1s0f0np0", False),
    ("eth0:1", "eth0:1", True),  # an interface alias is one name: no port in NCCL_SOCKET_IFNAME
    ("eth0:1", "eth0", False),
])
def test_nccl_socket_ifname_syntax(spec, name, named):
    assert fabric.hca_named(spec, name) is named
