"""`fleet check --measure` and the tool parsers: ibv_devinfo, show_gids, ib_write_bw and all_reduce_perf
outputs (tests/data/fabric/README.md says where each format comes from), the measured rail judged against
its rated speed into the fabric finding shape, absent tools reported and never fatal, and
benchmarks/nccl_allreduce.py's table read by the same parser."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from sparkdoctor import matrix
from sparkdoctor.fleet import FleetOptions, FleetResult, judge
from sparkdoctor.fleet import run as fleet_run
from sparkdoctor.fleet.inventory import load_inventory
from sparkdoctor.fleet.measure import (
    ALLREDUCE_MAX_BYTES,
    FAIR_SHARE,
    from_all_reduce,
    from_ib_write_bw,
    measure_links,
    on_node,
)
from sparkdoctor.fleet.node import NodeOutcome
from sparkdoctor.fleet.toolparse import parse_all_reduce_perf, parse_ib_write_bw
from sparkdoctor.fleet.transport import LOCAL, Node, SshTransport
from sparkdoctor.proc import run
from tests.fleet.fabric_trees import pair, ring
from tests.fleet.test_fabric import read
from tests.fleet.test_fleet_compare import fleet_facts
from tests.fleet.toolformats import devices_from_tools, parse_show_gids

DATA = Path(__file__).resolve().parent.parent / "data" / "fabric"


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_ibv_devinfo_and_show_gids_give_the_probe_shape():
    devices = {d["device"]: d for d in devices_from_tools(text("ibv_devinfo.txt"), text("show_gids.txt"))}
    assert set(devices) == {"rocep1s0f1", "roceP2p1s0f1", "rocep1s0f0"}
    dev = devices["rocep1s0f1"]
    assert dev["fw_ver"] == "28.45.4028" and dev["board_id"] == "NVD0000000033"
    [port] = dev["ports"]
    assert (port["port"], port["state"], port["link_layer"], port["active_mtu"]) == (1, "ACTIVE", "Ethernet", 4096)
    assert port["netdev"] == "enp1s0f1np1"
    v2 = [g for g in port["gids"] if g["type"] == "RoCE v2" and g["ipv4"]]
    assert [(g["index"], g["ipv4"]) for g in v2] == [(3, "192.168.100.11")]
    assert devices["rocep1s0f0"]["ports"][0]["state"] == "DOWN"
    assert devices["roceP2p1s0f1"]["ports"][0]["active_mtu"] == 1024  # the twin negotiated less
    assert sum(len(v) for v in parse_show_gids(text("show_gids.txt")).values()) == 8  # n_gids_found=8


def test_ib_write_bw_in_gbits_and_in_mib():
    healthy = parse_ib_write_bw(text("ib_write_bw_healthy.txt"))
    assert (healthy.device, healthy.gid_index, healthy.qps, healthy.message_bytes) == ("rocep1s0f1", 3, 4, 65536)
    assert healthy.average_gbps == 92.54 and healthy.peak_gbps == 0.0  # duration mode: no peak
    assert parse_ib_write_bw(text("ib_write_bw_degraded.txt")).average_gbps == 13.23
    mib = parse_ib_write_bw(text("ib_write_bw_mib.txt"))
    assert mib.average_gbps == pytest.approx(11020.47 * 8 * 1.048576 / 1000)
    assert parse_ib_write_bw("Couldn't connect to 192.168.100.11:18515").average_gbps is None


def test_all_reduce_perf_table():
    parsed = parse_all_reduce_perf(text("all_reduce_perf_pair.txt"))
    assert parsed.ranks == 2 and len(parsed.rows) == 8 and parsed.largest_bytes == ALLREDUCE_MAX_BYTES
    assert parsed.peak_busbw_gbs == 23.12 and parsed.average_busbw_gbs == 19.27875 and parsed.wrong == 0
    assert parse_all_reduce_perf(text("all_reduce_perf_wrong.txt")).wrong == 4


def test_a_degraded_rail_and_a_one_twin_all_reduce_are_rail_slow_findings_naming_node_link_and_setting():
    link = "spark-1:enp1s0f1np1 <-> spark-2:enp1s0f1np1 (192.168.100.0/24)"
    ok = from_ib_write_bw(text("ib_write_bw_healthy.txt"), "spark-2", link, 200.0, "ib_write_bw -d rocep1s0f1 ...")
    assert ok.status == "measured" and ok.findings() == []
    slow = from_ib_write_bw(text("ib_write_bw_degraded.txt"), "spark-2", link, 200.0, "ib_write_bw -d rocep1s0f1 -x 3")
    [finding] = slow.findings()
    assert (finding.rule, finding.node, finding.link, finding.setting) == ("rail-slow", "spark-2", link,
                                                                            "ib_write_bw -d rocep1s0f1 -x 3")
    assert "13.2 Gb/s measured, rated 200 Gb/s" in finding.detail
    twin = from_all_reduce(text("all_reduce_perf_one_twin.txt"), "spark-1", "all 2 nodes (pair)", 200.0, "mpirun ...")
    assert twin.gbps == pytest.approx(3.08 * 8) and twin.gbps < FAIR_SHARE * 200 and twin.findings()
    assert from_all_reduce(text("all_reduce_perf_pair.txt"), "spark-1", "x", 200.0, "m").findings() == []
    wrong = from_all_reduce(text("all_reduce_perf_wrong.txt"), "spark-1", "x", 200.0, "m")
    assert wrong.status == "failed" and "4 wrong" in wrong.detail
    unrated = from_ib_write_bw(text("ib_write_bw_degraded.txt"), "spark-2", link, None, "s")
    assert unrated.findings() == []  # nothing to judge against


def _benchmark():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "nccl_allreduce.py"
    spec = importlib.util.spec_from_file_location("sd_bench_nccl_allreduce", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_torch_benchmark_prints_what_the_all_reduce_parser_reads():
    bench = _benchmark()
    sizes = [8 << 20, 16 << 20, 32 << 20]
    rows = [bench.row(size, size / 20e9, 0) for size in sizes]  # 20 GB/s algbw: 20 GB/s busbw on 2 ranks
    out = "\n".join([bench.header(["spark-1", "spark-1"], sizes[0], sizes[-1], 20, 5), *rows,
                     bench.footer([20.0] * 3, 0)])
    parsed = parse_all_reduce_perf(out)
    assert parsed.ranks == 2 and [r["bytes"] for r in parsed.rows] == sizes
    assert parsed.peak_busbw_gbs == 20.0 and parsed.average_busbw_gbs == 20.0 and parsed.wrong == 0
    found = from_all_reduce(out, "spark-1", "2 GPUs of one host", 200.0, "nccl_allreduce.py", tool="nccl_allreduce.py")
    assert found.status == "measured" and found.gbps == 160.0 and found.findings() == []
    slow = "\n".join([bench.header(["h", "h"], sizes[0], sizes[0], 20, 5), bench.row(sizes[0], sizes[0] / 3e9, 0),
                      bench.footer([3.0], 0)])
    [finding] = from_all_reduce(slow, "spark-1", "2 GPUs of one host", 200.0, "nccl_allreduce.py").findings()
    assert finding.rule == "rail-slow" and finding.node == "spark-1"
    assert bench.parse_size("1G") == ALLREDUCE_MAX_BYTES and bench.MAX_BYTES == ALLREDUCE_MAX_BYTES


class LocalTransport:
    """Runs a node's command line here, with PATH = one folder: the tools a test puts there, and nothing else."""

    kind = "local"

    def __init__(self, path: Path, coreutils: bool = True):
        self.path, self.calls = path, []
        for tool in ("setsid", "sh", "timeout") if coreutils else ("setsid", "sh"):  # what a measurement runs under
            if not (path / tool).exists():
                (path / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")

    def command(self, node: Node, argv: list[str], timeout: float):
        wrapper = len(on_node([], 1)[0])
        self.calls.append((node.name, argv[wrapper:] if argv[:1] == ["setsid"] else argv))  # the tool's own command line
        return run(argv, timeout=timeout, env={"PATH": str(self.path)})


def stand_in(folder: Path, name: str, output: str) -> None:
    """A stand-in for a tool: prints a captured output of the real one."""
    script = folder / name
    script.write_text(f"#!/bin/sh\nexec /bin/cat '{DATA / output}'\n")
    script.chmod(0o755)


def _named(fabrics):
    named = []
    for name, fab in fabrics.items():
        facts = fleet_facts(name)
        facts.fleet["fabric"] = fab
        named.append((name, facts))
    return named


def _gate(named, measured):
    reports, drifts, notes, topo, found = judge(named, matrix.load(), FleetOptions(measure=True), measured)
    return FleetResult("local", [NodeOutcome(Node(n), f) for n, f in named], reports, drifts, notes, 1.0, "error",
                       topo, found, measured)


def test_absent_tools_are_reported_and_never_fatal(tmp_path):
    (tmp_path / "bin").mkdir()
    named = _named(read(tmp_path / "trees", pair()))
    transport = LocalTransport(tmp_path / "bin")
    measured = measure_links(transport, [Node(n) for n, _ in named], named)
    assert [(m.tool, m.status) for m in measured] == [("ib_write_bw", "absent"), ("all_reduce_perf", "absent")]
    assert "ib_write_bw is not installed" in measured[0].detail
    result = _gate(named, measured)
    assert result.exit_code() == 0 and result.fabric == []


def test_measured_rails_of_a_ring_with_a_slow_one_are_no_go(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir, "ib_write_bw", "ib_write_bw_degraded.txt")
    stand_in(bin_dir, "mpirun", "all_reduce_perf_pair.txt")
    named = _named(read(tmp_path / "trees", ring(4)))
    transport = LocalTransport(bin_dir)
    said: list[str] = []
    measured = measure_links(transport, [Node(n) for n, _ in named], named, said.append)
    assert said[0].startswith("measuring spark-1:enp1s0f0np0 <-> spark-2:enp1s0f1np1") and "(1/4)" in said[0]
    assert said[-1] == "all_reduce_perf over 4 nodes…"
    assert [m.tool for m in measured] == ["ib_write_bw"] * 4 + ["all_reduce_perf"]
    servers = [argv for _, argv in transport.calls if argv[0] == "ib_write_bw" and "." not in argv[-1]]
    clients = [argv for _, argv in transport.calls if argv[0] == "ib_write_bw" and "." in argv[-1]]
    assert len(servers) == len(clients) == 4 and all("-x" in a and "3" in a for a in clients)
    [mpirun] = [argv for _, argv in transport.calls if argv[0] == "mpirun"]
    assert mpirun[mpirun.index("-e") + 1] == str(ALLREDUCE_MAX_BYTES) and "-np" in mpirun
    result = _gate(named, measured)
    assert result.exit_code() == 1
    slow = [f for f in result.fabric if f.rule == "rail-slow"]
    assert len(slow) == 4  # every rail ran the degraded stand-in
    first = slow[0]
    report = result.reports[first.node]
    [entry] = [f for f in report.findings if f.id == "multinode-fabric-rail-slow"]
    line = next(e for e in entry.evidence if e.startswith(f"node {first.node}, link "))
    assert first.link in line and "ib_write_bw -d " in line and "13.2 Gb/s measured" in line


def test_a_real_two_gpu_nccl_all_reduce_is_read_into_the_same_finding_shape():
    """benchmarks/nccl_allreduce.py run for real on two H200s of one host (NCCL over NVLink, 8 MiB to 256 MiB,
    each result checked): tests/data/h200/nccl-allreduce-2gpu.txt, its output as fleet check reads it."""
    real = (Path(__file__).resolve().parents[1] / "data" / "h200" / "nccl-allreduce-2gpu.txt").read_text()
    parsed = parse_all_reduce_perf(real)
    assert parsed.ranks == 2 and len(parsed.rows) == 6 and parsed.wrong == 0
    assert parsed.peak_busbw_gbs == 264.70 and parsed.largest_bytes == 256 << 20
    measured = from_all_reduce(real, "vm", "2 GPUs of one host", 200.0, "nccl_allreduce.py", tool="nccl_allreduce.py")
    assert measured.status == "measured" and measured.gbps == pytest.approx(264.70 * 8) and measured.findings() == []
    # the same numbers judged against a link rated far above them (a stand-in for a slow rail) are a finding
    [slow] = from_all_reduce(real, "vm", "2 GPUs of one host", 20000.0, "nccl_allreduce.py").findings()
    assert slow.rule == "rail-slow" and slow.node == "vm" and "2 GPUs of one host" == slow.link


H200 = Path(__file__).resolve().parents[1] / "data" / "h200"


def _tool_on_path(folder: Path, name: str, body: str, monkeypatch) -> None:
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


def test_the_local_node_is_probed_here_without_ssh(tmp_path, monkeypatch):
    """host "local" (an inventory's or --hosts') is this machine: its probes run in a subprocess here; an ssh
    on PATH that records being called is never called."""
    called = tmp_path / "ssh-called"
    _tool_on_path(tmp_path / "bin", "ssh", f"echo \"$@\" > '{called}'; exit 255", monkeypatch)
    inventory = tmp_path / "fleet.toml"
    inventory.write_text('[[node]]\nhost = "local"\n')
    nodes = load_inventory(inventory, sys.executable, None, "docker")
    result = fleet_run(FleetOptions(nodes=nodes, node_timeout=120.0))
    [outcome] = result.outcomes
    assert outcome.ok, outcome.problem
    assert not called.exists()
    assert result.transport == "local" and result.exit_code() == 0
    assert outcome.facts.fleet["hostname"] == socket.gethostname()
    assert SshTransport().argv(Node(LOCAL), ["python3", "-B", "-"]) == ["python3", "-B", "-"]
    assert SshTransport().argv(Node("spark-1"), ["python3"])[0] == "ssh"


def test_measure_with_nothing_to_measure_says_so(tmp_path):
    """`fleet check --hosts local --measure` on a box with no RDMA link and fewer than two GPUs printed nothing about
    the measurement it was asked for: a note now says there was nothing to measure."""
    result = fleet_run(FleetOptions(nodes=[Node(LOCAL, python=sys.executable)], node_timeout=120.0, measure=True))
    assert result.outcomes[0].ok and result.measured == []
    assert any(n.startswith("--measure: nothing to measure") for n in result.notes), result.notes


def test_a_node_of_two_gpus_gets_all_reduce_perf_over_its_gpus(tmp_path, monkeypatch):
    """--measure on one node of several GPUs: all_reduce_perf -g N on that node (no mpirun), bounded at 1 GiB,
    reported and never judged (no rated speed between its GPUs); a node of one GPU gets none. The stand-in
    prints the real output of the binary on two H200s (tests/data/h200/all-reduce-perf-2gpu.txt)."""
    argv_file = tmp_path / "argv"
    _tool_on_path(tmp_path / "bin", "all_reduce_perf",
                  f"echo \"$@\" > '{argv_file}'; exec cat '{H200 / 'all-reduce-perf-2gpu.txt'}'", monkeypatch)
    two, one = fleet_facts(LOCAL), fleet_facts("spark-1")
    two.gpus = [{"index": 0, "name": "NVIDIA H200", "cc": "9.0"}, {"index": 1, "name": "NVIDIA H200", "cc": "9.0"}]
    one.gpus = [{"index": 0, "name": "NVIDIA GB10", "cc": "12.1"}]
    said: list[str] = []
    [measured] = measure_links(SshTransport(), [Node(LOCAL)], [(LOCAL, two)], said.append)
    assert said == ["all_reduce_perf over the 2 GPUs of local…"]
    assert argv_file.read_text().split() == ["-b", str(8 << 20), "-e", str(ALLREDUCE_MAX_BYTES), "-f", "2", "-g", "2"]
    assert (measured.tool, measured.node, measured.link, measured.status) == ("all_reduce_perf", LOCAL, "2 GPUs of local",
                                                                              "measured")
    assert measured.gbps == pytest.approx(325.27 * 8) and measured.rated_gbps is None and measured.findings() == []
    assert measure_links(SshTransport(), [Node(LOCAL)], [(LOCAL, one)]) == []


def test_fleet_check_measure_on_two_real_gpus_of_one_host():
    """`fleet check --inventory local.toml --measure` run for real on a host of two H200s (NVLink, NCCL 2.28.9 of
    the host's torch, nccl-tests' all_reduce_perf built without MPI, NCCL_NVLS_ENABLE=0): its JSON document
    and the tool's own table as it printed it on the same host (docs/evidence/h200-2026-11-28.md)."""
    doc = json.loads((H200 / "fleet-measure-2gpu.json").read_text())
    assert (doc["command"], doc["transport"], doc["verdict"], doc["exit_code"]) == ("fleet check", "local", "go", 0)
    [node] = doc["nodes"]
    assert node["name"] == LOCAL and node["ok"] and len(node["facts"]["gpus"]) == 2
    assert node["facts"]["env"]["NCCL_NVLS_ENABLE"] == "0"
    [m] = doc["fabric"]["measured"]
    assert (m["tool"], m["link"], m["status"], m["rated_gbps"], m["slow"]) == ("all_reduce_perf", "2 GPUs of local",
                                                                              "measured", None, False)
    assert m["setting"] == f"all_reduce_perf -b {8 << 20} -e {ALLREDUCE_MAX_BYTES} -f 2 -g 2"
    assert 100 * 8 < m["gbps"] < 900 * 8 and "over 2 ranks, 0 wrong" in m["detail"]  # NVLink: hundreds of GB/s
    assert doc["fabric"]["findings"] == []
    table = parse_all_reduce_perf((H200 / "all-reduce-perf-2gpu.txt").read_text())
    assert table.ranks == 2 and len(table.rows) == 8 and table.wrong == 0
    assert table.largest_bytes == ALLREDUCE_MAX_BYTES and table.peak_busbw_gbs == 325.27
    assert table.average_busbw_gbs == 264.517
    console = (H200 / "fleet-measure-2gpu.txt").read_text()
    assert "fleet check over local: 1 node(s), 1 answered" in console and "2 GPUs of local" in console


def test_a_nodes_answers_never_become_options_of_the_tools_measure_runs(tmp_path):
    """A node reports its own addresses and RDMA device names; the address of one node is the last argument of
    ib_write_bw on another, where `--out_json_file=PATH` (perftest) writes a file. Only an IP address and a device
    name are taken; anything else is no addressed device."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir, "ib_write_bw", "ib_write_bw_healthy.txt")
    stand_in(bin_dir, "mpirun", "all_reduce_perf_pair.txt")
    fabrics = read(tmp_path / "trees", pair())
    for fab in fabrics.values():
        for info in fab["netdevs"].values():
            info["addrs"] = [f"--out_json_file=/tmp/pwned/{a.split('/')[-1]}" for a in info["addrs"]]
    named = _named(fabrics)
    transport = LocalTransport(bin_dir)
    measured = measure_links(transport, [Node(n) for n, _ in named], named)
    argvs = [argv for _, argv in transport.calls]
    assert argvs and not any("out_json_file" in arg for argv in argvs for arg in argv), argvs
    assert any("no addressed RoCE v2 device" in m.detail for m in measured), measured
    fabrics = read(tmp_path / "trees2", pair())
    for fab in fabrics.values():
        for dev in fab["rdma"]:
            dev["device"] = "--hostile"
    named = _named(fabrics)
    transport = LocalTransport(bin_dir)
    measure_links(transport, [Node(n) for n, _ in named], named)
    assert not any("--hostile" in argv for _, argv in transport.calls), transport.calls


def _shell_stand_in(folder: Path, name: str, body: str) -> None:
    script = folder / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)


@pytest.mark.parametrize("ib_body,mpirun_body,failed", [
    # all_reduce_perf counted #wrong results: the collective returned corrupt sums (docs: any #wrong fails it)
    (f"exec /bin/cat '{DATA / 'ib_write_bw_healthy.txt'}'", f"exec /bin/cat '{DATA / 'all_reduce_perf_wrong.txt'}'",
     ["all_reduce_perf"]),
    # the client could not reach its server, mpirun could not start its ranks
    ("echo \"Couldn't connect to 192.168.100.11:18515\" >&2; exit 1",
     "echo 'mpirun was unable to launch the specified application' >&2; exit 1", ["ib_write_bw", "all_reduce_perf"]),
], ids=["wrong-results", "no-connection"])
def test_a_failed_or_wrong_measurement_refuses_the_launch(tmp_path, ib_body, mpirun_body, failed, monkeypatch):
    monkeypatch.setattr("sparkdoctor.fleet.measure.SERVER_HEAD_START", 0.0)  # the stand-ins need no listening server
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _shell_stand_in(bin_dir, "ib_write_bw", ib_body)
    _shell_stand_in(bin_dir, "mpirun", mpirun_body)
    named = _named(read(tmp_path / "trees", pair()))
    measured = measure_links(LocalTransport(bin_dir), [Node(n) for n, _ in named], named)
    assert sorted(m.tool for m in measured if m.status == "failed") == sorted(failed), measured
    result = _gate(named, measured)
    assert result.exit_code() == 1
    found = [f for f in result.fabric if f.rule == "measure-failed"]
    assert sorted(f.detail.split(" ")[0] for f in found) == sorted(failed)
    report = result.reports[found[0].node]
    [entry] = [f for f in report.findings if f.id == "multinode-fabric-measure-failed"]
    assert entry.severity == "error" and any(found[0].setting in e for e in entry.evidence)


def test_a_login_shell_saying_command_not_found_is_not_an_absent_tool(tmp_path, monkeypatch):
    """A login shell printing "bash: conda: command not found" on stderr of every command: the tools ran, and
    their numbers are read; a tool that really is missing is still absent (exit 127, or its own name)."""
    monkeypatch.setattr("sparkdoctor.fleet.measure.SERVER_HEAD_START", 0.0)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    noise = "echo 'bash: conda: command not found' >&2; echo 'ls: /opt/x: No such file or directory' >&2"
    _shell_stand_in(bin_dir, "ib_write_bw", f"{noise}; exec /bin/cat '{DATA / 'ib_write_bw_healthy.txt'}'")
    _shell_stand_in(bin_dir, "mpirun", f"{noise}; exec /bin/cat '{DATA / 'all_reduce_perf_pair.txt'}'")
    named = _named(read(tmp_path / "trees", pair()))
    measured = measure_links(LocalTransport(bin_dir), [Node(n) for n, _ in named], named)
    assert [(m.tool, m.status) for m in measured] == [("ib_write_bw", "measured"), ("all_reduce_perf", "measured")]
    assert measured[0].gbps == 92.54 and _gate(named, measured).exit_code() == 0
    # failing for another reason with the same noise: failed (a finding), not absent
    _shell_stand_in(bin_dir, "mpirun", f"{noise}; exit 1")
    [*_, ar] = measure_links(LocalTransport(bin_dir), [Node(n) for n, _ in named], named)
    assert ar.status == "failed"
    # the tool's own name said missing by a login shell on the node: absent
    _shell_stand_in(bin_dir, "mpirun", "echo 'bash: mpirun: command not found' >&2; exit 1")
    [*_, ar] = measure_links(LocalTransport(bin_dir), [Node(n) for n, _ in named], named)
    assert ar.status == "absent"


def test_both_twins_on_one_subnet_measure_between_the_nodes_not_within_one(tmp_path, monkeypatch):
    """Both twins of each Spark's port addressed on one /24: one link of four ends, two per node. ib_write_bw's
    server and client ran on the same node (a loopback measurement of nothing)."""
    monkeypatch.setattr("sparkdoctor.fleet.measure.SERVER_HEAD_START", 0.0)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in(bin_dir, "ib_write_bw", "ib_write_bw_healthy.txt")
    stand_in(bin_dir, "mpirun", "all_reduce_perf_pair.txt")
    fabrics = read(tmp_path / "trees", pair())
    for i, fab in enumerate(fabrics.values()):  # address the second twin on the same subnet
        twin = fab["netdevs"]["enP2p1s0f1np1"]
        twin.update(state="up", addrs=[f"192.168.100.{21 + i}/24"], subnets=["192.168.100.0/24"])
        for dev in fab["rdma"]:
            for port in dev["ports"]:
                if port.get("netdev") == "enP2p1s0f1np1":
                    port["gids"] = [{"index": 3, "gid": "x", "type": "RoCE v2", "ndev": "enP2p1s0f1np1",
                                     "ipv4": f"192.168.100.{21 + i}"}]
    named = _named(fabrics)
    transport = LocalTransport(bin_dir)
    measured = measure_links(transport, [Node(n) for n, _ in named], named)
    ib = [node for node, argv in transport.calls if argv[0] == "ib_write_bw"]
    assert sorted(ib) == ["spark-1", "spark-2"], transport.calls
    assert measured[0].status == "measured"


@pytest.mark.parametrize("size", ["²", "9" * 5000])
def test_a_row_whose_size_int_refuses_is_skipped_not_the_whole_measurement(tmp_path, monkeypatch, size):
    """`"²".isdigit()` is true and int() refuses it (and any number of 4,300+ digits): one such line in a node's
    all_reduce_perf output made the whole measurement "failed: ValueError: invalid literal for int()", a
    measure-failed finding (no-go, exit 1) on a fabric its table measured. The parser skips a line it does not know."""
    real = (H200 / "all-reduce-perf-2gpu.txt").read_text()
    table = tmp_path / "table.txt"
    table.write_text(f"{size}  2 float sum -1 1.0 2.0 3.0 0 1.0 2.0 3.0 0\n{real}")
    _tool_on_path(tmp_path / "bin", "all_reduce_perf", f"exec cat '{table}'", monkeypatch)
    two = fleet_facts(LOCAL)
    two.gpus = [{"index": 0, "name": "NVIDIA H200", "cc": "9.0"}, {"index": 1, "name": "NVIDIA H200", "cc": "9.0"}]
    [measured] = measure_links(SshTransport(), [Node(LOCAL)], [(LOCAL, two)])
    assert measured.status == "measured" and measured.gbps == pytest.approx(325.27 * 8)
