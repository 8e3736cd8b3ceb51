"""A healthy fleet is GO: differences a launch does not ride on (a container's veth on one node, a management
port's speed, a RoCE GID index NCCL picks itself) are listed as benign and never refuse it; the ones it does
ride on (a fabric link's MTU, an interface NCCL_SOCKET_IFNAME names, a pinned NCCL_IB_GID_INDEX) still do."""

from __future__ import annotations

from pathlib import Path

from sparkdoctor import matrix
from sparkdoctor.fleet import FleetOptions, FleetResult, judge
from sparkdoctor.fleet.compare import compare_nodes
from sparkdoctor.fleet.node import NodeOutcome
from sparkdoctor.fleet.transport import Node
from tests.fleet.fabric_trees import pair
from tests.fleet.test_fabric import read
from tests.fleet.test_fleet_compare import fleet_facts

CX = {"name": "enp1s0f1np1", "kind": "net", "state": "up", "mtu": 9000, "speed_mbps": 200000, "physical": True}
MGMT = {"name": "enP7s7", "kind": "net", "state": "up", "mtu": 1500, "physical": True}


def _pair(tmp_path, links: dict[str, list[dict]], envs: dict[str, dict[str, str]] | None = None):
    sparks = pair()
    for spark in sparks:
        spark.env.update((envs or {}).get(spark.name, {}))
    fabrics = read(tmp_path, sparks)
    named = []
    for name, fab in fabrics.items():
        facts = fleet_facts(name)
        facts.fleet["fabric"] = fab
        facts.host_health = {**(facts.host_health or {}), "links": links[name]}
        named.append((name, facts))
    return named


def _gate(named) -> FleetResult:
    reports, drifts, notes, topo, found = judge(named, matrix.load(), FleetOptions())
    return FleetResult("ssh", [NodeOutcome(Node(n), f) for n, f in named], reports, drifts, notes, 1.0, "error", topo, found)


def test_a_container_on_one_node_and_a_slower_management_port_are_benign(tmp_path):
    veth = {"name": "veth3f2a1b0", "kind": "net", "state": "up", "mtu": 1500, "physical": False}
    docker0 = {"name": "docker0", "kind": "net", "state": "up", "mtu": 1500, "physical": False}
    wifi = {"name": "wlP9s9", "kind": "net", "state": "up", "mtu": 1500, "physical": True}
    named = _pair(tmp_path, {"spark-1": [CX, {**MGMT, "speed_mbps": 10000}, docker0, veth, wifi],
                             "spark-2": [CX, {**MGMT, "speed_mbps": 1000}, {**docker0, "state": "down"}]})
    drifts = {d.label: d for d in compare_nodes(named)}
    for label in ("host_health: link veth3f2a1b0", "host_health: link docker0 state",
                  "host_health: link enP7s7 speed_mbps", "host_health: link wlP9s9"):
        assert drifts[label].verdict == "benign", drifts[label]  # listed in the document, not a refusal
    assert "virtual interface" in drifts["host_health: link veth3f2a1b0"].why
    assert "NCCL does not use" in drifts["host_health: link enP7s7 speed_mbps"].why
    result = _gate(named)
    assert result.risky == [] and result.exit_code() == 0, result.risky


def test_a_fabric_link_or_the_socket_interface_differing_is_still_risky(tmp_path):
    named = _pair(tmp_path, {"spark-1": [CX, {**MGMT, "speed_mbps": 10000}],
                             "spark-2": [{**CX, "mtu": 1500}, {**MGMT, "speed_mbps": 1000}]},
                  envs={"spark-1": {"NCCL_SOCKET_IFNAME": "enP7"}, "spark-2": {"NCCL_SOCKET_IFNAME": "enP7"}})
    drifts = {d.label: d for d in compare_nodes(named)}
    assert drifts["host_health: link enp1s0f1np1 mtu"].verdict == "risky"  # the RDMA netdev
    assert drifts["host_health: link enP7s7 speed_mbps"].verdict == "risky"  # NCCL_SOCKET_IFNAME=enP7 names it
    assert _gate(named).exit_code() == 1
    # a node that sent no fabric facts: nothing can be ruled out
    for _, facts in named:
        facts.fleet.pop("fabric")
        facts.env = {}
    assert {d.label: d for d in compare_nodes(named)}["host_health: link enP7s7 speed_mbps"].verdict == "risky"


def _gids(tmp_path, gids: dict[str, dict[str, int]], env: dict[str, str] | None = None):
    named = _pair(tmp_path, {"spark-1": [CX], "spark-2": [CX]},
                  envs={name: dict(env or {}) for name in gids})
    for name, facts in named:
        facts.fleet["roce_v2_gid_index"] = gids[name]
        facts.env = {**(facts.env or {}), **(env or {})}
    return named


def test_a_gid_index_that_differs_is_benign_while_nccl_picks_it_and_refuses_when_pinned(tmp_path):
    """"4 on the head and 3 on the worker" (multinode-roce-gid-index-hardcoded) breaks only a pinned
    NCCL_IB_GID_INDEX; unset, NCCL picks each device's RoCE v2 IPv4 GID itself."""
    four_three = {"spark-1": {"enp1s0f1np1": 4}, "spark-2": {"enp1s0f1np1": 3}}
    named = _gids(tmp_path / "unset", four_three)
    [drift] = [d for d in compare_nodes(named) if d.area == "links"]
    assert drift.verdict == "benign" and "unset on every node" in drift.why
    assert _gate(named).exit_code() == 0
    named = _gids(tmp_path / "pinned", four_three, env={"NCCL_IB_GID_INDEX": "3"})
    [drift] = [d for d in compare_nodes(named) if d.area == "links"]
    assert drift.verdict == "risky" and drift.values == {"spark-1": "4", "spark-2": "3"}
    result = _gate(named)
    assert result.exit_code() == 1
    assert any(f.id == "multinode-roce-gid-index-hardcoded" for r in result.reports.values() for f in r.findings)


def test_a_pair_cabled_port_0_to_port_1_compares_no_gid_index(tmp_path):
    named = _gids(tmp_path, {"spark-1": {"enp1s0f0np0": 3}, "spark-2": {"enp1s0f1np1": 3}},
                  env={"NCCL_IB_GID_INDEX": "3"})
    assert [d for d in compare_nodes(named) if d.area == "links"] == []


def test_a_node_whose_serving_stack_could_not_be_probed_is_exit_3_with_the_collectors_error():
    """Not "NO-GO: 0 risky difference(s)" and exit 1: the node was not checked (the exit table's 3), and its line
    says why."""
    from rich.console import Console

    from sparkdoctor.views.fleet import render_console

    good, blind = fleet_facts("spark-1"), fleet_facts("spark-2")
    blind.packages = None
    blind.errors = [{"collector": "target", "error": "the target probe printed no JSON: not json"}]
    result = _gate([("spark-1", good), ("spark-2", blind)])
    assert result.unprobed == ["spark-2"] and result.exit_code() == 3 and result.verdict() == "no-go: node down"
    console = Console(record=True, width=300, color_system=None)
    render_console(result, console)
    text = console.export_text()
    assert "spark-2  not checked: its serving stack could not be probed: target: the target probe printed no JSON" in text
    assert "NO-GO: 1 node(s) could not be checked" in text and "(exit 3)" in text


def test_progress_text_naming_a_nodes_netdev_is_never_markup():
    """`measuring spark-1:eth[/x] <-> ...` raised rich's MarkupError out of the spinner on a terminal."""
    import io

    from rich.console import Console

    from sparkdoctor.commands.fleet import progress_to

    status = Console(file=io.StringIO(), force_terminal=False).status("fleet check…")
    progress_to(status)("measuring spark-1:eth[/x] <-> spark-2:eth[bold] (1/1)…")
    assert str(status.renderable.text) == "measuring spark-1:eth[/x] <-> spark-2:eth[bold] (1/1)…"


def test_a_node_answering_nan_or_infinity_is_refused_before_any_json_document():
    """Python's json writes and reads NaN and Infinity; no strict JSON reader does (--format json carried them)."""
    import json
    import sys

    import pytest

    from sparkdoctor.fleet.toolparse import parse_ib_write_bw
    from sparkdoctor.proc import ProcResult
    from sparkdoctor.targets.local import PythonTarget, TargetError, parse_json_probe

    target = PythonTarget(sys.executable, "--python")
    for text in ('{"cma": {"total_kib": Infinity}}', '{"fabric": {"note": NaN}}', '{"x": -Infinity}', '{"x": 1e999}'):
        with pytest.raises(TargetError, match="non-finite number"):
            parse_json_probe(target, Path("fleet_node"), ProcResult(["p"], 0, text, "", 0.1))
    assert parse_json_probe(target, Path("p"), ProcResult(["p"], 0, json.dumps({"x": 1.5}), "", 0.1)) == {"x": 1.5}
    row = " 65536      1000           nan                  inf                   0.0\n"
    assert parse_ib_write_bw(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n" + row).average_gbps is None


LAN = {"name": "enp1s0f0np0", "kind": "net", "state": "up", "mtu": 1500, "speed_mbps": 200000, "physical": True,
       "subnet": "10.20.0.0/24"}


def _lan_port(tmp_path, hca: str | None, ifname: str | None = None):
    """A healthy pair whose spark-1 also has its other ConnectX port (p0, an RDMA device like every CX-7 port) up on
    the office LAN, 10.20.0.0/24, a subnet no other node has: a management port, not a fabric link."""
    sparks = pair()
    sparks[0].ports["p0"] = "10.20.0.5/24"
    for spark in sparks:
        spark.env.pop("NCCL_IB_HCA")
        spark.env.update({"NCCL_IB_HCA": hca} if hca else {})
        spark.env.update({"NCCL_SOCKET_IFNAME": ifname} if ifname else {})
    named = []
    for name, fab in read(tmp_path, sparks).items():
        facts = fleet_facts(name)
        facts.fleet["fabric"] = fab
        facts.host_health = {**(facts.host_health or {}), "links": [CX, LAN] if name == "spark-1" else [CX]}
        named.append((name, facts))
    return named


def test_a_lan_only_port_of_one_node_is_benign_when_nccl_ib_hca_leaves_it_out(tmp_path):
    """Before: hca-twin on rocep1s0f0 and its twin ("up but not named: NCCL leaves it idle") and the LAN link risky
    (an RDMA device's netdev), NO-GO, though NCCL_IB_HCA names both twins of the fabric port and leaves the LAN port
    out on purpose."""
    named = _lan_port(tmp_path, "rocep1s0f1,roceP2p1s0f1")
    result = _gate(named)
    assert [f for f in result.fabric if f.rule == "hca-twin"] == [], result.fabric
    [drift] = [d for d in result.drifts if d.label == "host_health: link enp1s0f0np0"]
    assert drift.verdict == "benign" and "NCCL does not use" in drift.why
    assert result.exit_code() == 0, (result.risky, result.fabric)
    assert [f.id for f in result.reports["spark-1"].findings if f.id.startswith("multinode-link")] == [
        "multinode-link-unpaired"]  # still said (a warning): a port on a subnet no other node has


def test_a_lan_port_nccl_is_told_to_use_is_still_risky(tmp_path):
    # NCCL_IB_HCA unset: NCCL uses every active RDMA device, the LAN port too
    assert [d.verdict for d in _gate(_lan_port(tmp_path / "unset", None)).drifts
            if d.label == "host_health: link enp1s0f0np0"] == ["risky"]
    # NCCL_IB_HCA names it
    result = _gate(_lan_port(tmp_path / "hca", "rocep1s0f0,rocep1s0f1,roceP2p1s0f1"))
    assert [d.verdict for d in result.drifts if d.label == "host_health: link enp1s0f0np0"] == ["risky"]
    assert result.exit_code() == 1
    # NCCL_SOCKET_IFNAME names it
    result = _gate(_lan_port(tmp_path / "ifname", "rocep1s0f1,roceP2p1s0f1", ifname="enp1s0f0"))
    assert [d.verdict for d in result.drifts if d.label == "host_health: link enp1s0f0np0"] == ["risky"]
    # the fabric port's own twin left out of NCCL_IB_HCA is still the one-twin finding, LAN port or not
    result = _gate(_lan_port(tmp_path / "twin", "rocep1s0f1"))
    assert sorted((f.node, f.link) for f in result.fabric if f.rule == "hca-twin") == [
        (node, "roceP2p1s0f1 port 1 (enP2p1s0f1np1)") for node in ("spark-1", "spark-2")]
