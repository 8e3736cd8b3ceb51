"""`fleet check --measure` on a switched fabric: three or more nodes on one subnet are no cable between two of them
(fabric.topology counts them as a switch, not as links), yet every node's rail is measured: ib_write_bw between the
first node and each other node on that subnet, and all_reduce_perf over all nodes, -H naming each by its address there."""

from __future__ import annotations

import pytest

from sparkdoctor.fleet import measure
from sparkdoctor.fleet.measure import measure_links
from sparkdoctor.fleet.transport import Node
from tests.fleet.fabric_trees import switched
from tests.fleet.test_fabric import read
from tests.fleet.test_fabric_measure import LocalTransport, _gate, _named, stand_in


@pytest.mark.parametrize("n", [3, 4])
def test_every_node_on_a_switch_is_measured_against_the_first(tmp_path, monkeypatch, n):
    monkeypatch.setattr(measure, "SERVER_HEAD_START", 0.0)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir, "ib_write_bw", "ib_write_bw_degraded.txt")
    stand_in(bin_dir, "mpirun", "all_reduce_perf_pair.txt")
    named = _named(read(tmp_path / "trees", switched(n)))
    transport = LocalTransport(bin_dir)
    measured = measure_links(transport, [Node(name) for name, _ in named], named)
    ib = [m for m in measured if m.tool == "ib_write_bw"]
    assert sorted(m.node for m in ib) == [f"spark-{i}" for i in range(2, n + 1)], measured  # each client once
    assert all(m.link.startswith("spark-1:enp1s0f1np1 <-> ") and m.link.endswith("(192.168.100.0/24)") for m in ib)
    servers = [node for node, argv in transport.calls if argv[0] == "ib_write_bw" and "." not in argv[-1]]
    assert servers == ["spark-1"] * (n - 1)
    ports = [argv[argv.index("-p") + 1] for _, argv in transport.calls if argv[0] == "ib_write_bw"]
    assert len(set(ports)) == n - 1  # one port per pair: a stuck server never blocks the next pair
    [mpirun] = [argv for _, argv in transport.calls if argv[0] == "mpirun"]
    assert mpirun[mpirun.index("-H") + 1] == ",".join(f"192.168.100.{11 + i}:1" for i in range(n))
    assert [m.tool for m in measured] == ["ib_write_bw"] * (n - 1) + ["all_reduce_perf"]
    result = _gate(named, measured)  # the degraded stand-in: 13 Gb/s on 200 Gb/s rails
    assert result.exit_code() == 1
    assert sorted(f.node for f in result.fabric if f.rule == "rail-slow") == [f"spark-{i}" for i in range(2, n + 1)]
