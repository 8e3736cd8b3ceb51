"""`fleet check --measure`: each link's bandwidth measured with the tools users already run, parsed and judged
against the link's rated speed (the port rate the two ends report).

  ib_write_bw   per rail: the server on one end of each link, the client on the other (on a switched subnet: the
                first node's end against each other node's), over the addressed RDMA device and its RoCE v2
                IPv4 GID, IB_SECONDS long, each side within IB_TIMEOUT
  all_reduce_perf  nccl-tests over every node (mpirun from the first node), 8 MiB to ALLREDUCE_MAX_BYTES:
                never the 16 GB size that exhausts a Spark's unified memory (dgx-spark-playbooks#102); and on
                each node of several GPUs, over its own GPUs (one process, -g N): reported, not judged (no
                rated speed is known for NVLink, PCIe or C2C between them)

Every command runs under the node's own `timeout -k GRACE SECONDS` (coreutils) in a session of its own (setsid,
util-linux), swept when it ends: when its time is up the node stops it and all it started, not only the ssh here that
carried it; a node without `timeout` or `setsid` runs nothing (absent, said so).
A tool that is not installed on a node is a Measurement with status "absent": reported, never fatal, and
never a finding. A rail below FAIR_SHARE of its rated speed is a rail-slow fabric finding; a measurement that
failed (no result, `#wrong` results, a tool that could not connect or exited non-zero) is a measure-failed one.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial

from sparkdoctor import proc
from sparkdoctor.facts import Facts
from sparkdoctor.fleet import fabric
from sparkdoctor.fleet.toolparse import parse_all_reduce_perf, parse_ib_write_bw
from sparkdoctor.fleet.transport import SSH_CONNECT_TIMEOUT, Node, Transport

FAIR_SHARE = 0.25  # 13 Gb/s on a 200 Gb/s rail (PR #108) and 3 GB/s busbw (#102) are far below it
IB_SECONDS = 3
IB_TIMEOUT = 30.0
IB_PORT = 18515
SERVER_HEAD_START = 1.0  # the client connects once the server listens
ALLREDUCE_MIN_BYTES = 8 << 20
ALLREDUCE_MAX_BYTES = 1 << 30
ALLREDUCE_TIMEOUT = 180.0
GRACE = 5  # seconds from `timeout`'s TERM to its KILL on the node


@dataclass
class Measurement:
    tool: str
    node: str
    link: str
    status: str  # measured | absent | failed
    gbps: float | None  # ib_write_bw: average Gb/s; all_reduce_perf: peak bus bandwidth in Gb/s
    rated_gbps: float | None
    setting: str  # the command line that measured it
    detail: str

    def slow(self) -> bool:
        return self.status == "measured" and bool(self.rated_gbps) and self.gbps is not None \
            and self.gbps < FAIR_SHARE * float(self.rated_gbps or 0)

    def findings(self) -> list[fabric.FabricFinding]:
        if self.status == "failed":  # no number, or a wrong one: never "measured, all fine"
            return [fabric.FabricFinding(fabric.MEASURE_FAILED, self.node, self.link, self.setting or self.tool,
                                         f"{self.tool} failed: {self.detail}")]
        if not self.slow():
            return []
        return [fabric.FabricFinding(fabric.RAIL_SLOW, self.node, self.link, self.setting,
                                     f"{self.gbps:.1f} Gb/s measured, rated {self.rated_gbps:g} Gb/s "
                                     f"(under {FAIR_SHARE:.0%}): {self.detail}")]

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "slow": self.slow()}


def _not_found(text: str, tools: Iterable[str]) -> str | None:
    """The first of `tools` that `text` says a shell could not find, or None."""
    names = "|".join(map(re.escape, tools))
    found = re.search(rf"(?<![\w.-])({names}): (command not found|not found|No such file)|command not found: ({names})\b",
                      text)
    return (found.group(1) or found.group(3)) if found else None


_PACKAGE = {"timeout": "coreutils", "setsid": "util-linux"}
_UNRESOLVED = re.compile(r"Could not resolve hostname ([^\s:]+)[^\n]*")
_BANNER = re.compile(r"^[-=*\s]*$")
# Run by `setsid -w sh -c SWEEP sh GRACE SECONDS TOOL ARGS...` on the node: the tool under timeout, in a session of its
# own; then every process still in that session is killed (mpirun starts its ssh children in process groups of their
# own, out of reach of timeout's signal to its group). $$ is the session's leader: its id is the session's.
SWEEP = ('g=$1; shift; timeout -k "$g" "$@"; rc=$?; for f in /proc/[0-9]*/stat; do p=${f#/proc/}; p=${p%/stat}; '
         '[ "$p" = "$$" ] && continue; read -r l 2>/dev/null < "$f" || continue; set -- ${l##*) }; '
         '[ "$4" = "$$" ] && kill -KILL "$p" 2>/dev/null; done; exit $rc')


def on_node(argv: list[str], seconds: float) -> tuple[list[str], float, int]:
    """(argv under the node's `timeout -k GRACE N` in a session of its own, swept when it ends; the local limit; N):
    N is `seconds`, or less where the run's deadline is nearer; the local limit adds the grace and ssh's connect
    time, so the node stops the command and all it started before the ssh here is given up on."""
    left = proc.time_left()
    seconds = seconds if left is None else min(seconds, left - GRACE - SSH_CONNECT_TIMEOUT)
    limit = max(1, int(seconds))
    wrapped = ["setsid", "-w", "sh", "-c", SWEEP, "sh", str(GRACE), str(limit), *argv]
    return wrapped, float(limit + GRACE + SSH_CONNECT_TIMEOUT), limit


def _bounded(transport: Transport, node: Node, argv: list[str], seconds: float) -> tuple[proc.ProcResult, int]:
    wrapped, local, limit = on_node(argv, seconds)
    return transport.command(node, wrapped, local), limit


def _missing(result: proc.ProcResult, tools: tuple[str, ...], absent: str, node: str) -> str | None:
    """Why nothing was measured on `node` because something is not installed there, or None: `timeout` or `setsid`,
    or one of `tools` (then `absent`): the shell said so (exit 127), or the command could not start for a missing
    file, or the message names one of `tools` as not found. A login shell's unrelated "bash: conda: command not
    found" on a run that succeeded or failed otherwise is not absence."""
    if result.ok:
        return None
    start = result.start_error or ""
    name = "setsid" if start and result.argv[:1] == ["setsid"] else (
        _not_found(result.stderr or "", _PACKAGE) if result.returncode == 127 else None)
    if name:
        return (f"`{name}` ({_PACKAGE[name]}) is not installed on {node}: nothing is started there that could outlive "
                f"the measurement (install {_PACKAGE[name]})")
    if result.returncode == 127 or any(said in start for said in ("No such file", "FileNotFoundError", "not found")):
        return absent
    return absent if _not_found(f"{start}\n{result.stderr or ''}", tools) else None


def _failure(result: proc.ProcResult, name: str, limit: int, node: str) -> str:
    """One line: why the measurement command `name` ran and gave nothing to read."""
    if result.returncode in (124, 137) and not result.timed_out:  # timeout's own codes: TERM, then KILL
        return f"{name} ran past its {limit} s limit on {node} and was stopped there (timeout)"
    said = f"{result.stderr or ''}\n{result.stdout or ''}"
    unresolved = _UNRESOLVED.search(said)
    if name == "mpirun" and unresolved:
        host = unresolved.group(1)
        return (f"mpirun on {node} cannot start a rank on host {host}: the name does not resolve on {node} "
                f"({unresolved.group(0).strip()[:120]}); name that node by its address, or add it to {node}'s /etc/hosts")
    if result.returncode is not None and result.returncode > 0:
        lines = [ln.strip() for ln in said.splitlines() if not _BANNER.match(ln)]
        if lines:
            return f"{name} exited {result.returncode}: {lines[0][:300]}"
    return result.describe_failure()[:300]


def from_ib_write_bw(text: str, node: str, link: str, rated: float | None, setting: str) -> Measurement:
    bw = parse_ib_write_bw(text)
    if bw.average_gbps is None:
        return Measurement("ib_write_bw", node, link, "failed", None, rated, setting, "no result row in its output")
    return Measurement("ib_write_bw", node, link, "measured", round(bw.average_gbps, 2), rated, setting,
                       f"{bw.device or '?'} GID {bw.gid_index}, {bw.qps or 1} QP, {bw.message_bytes} B messages")


def from_all_reduce(text: str, node: str, link: str, rated: float | None, setting: str,
                    tool: str = "all_reduce_perf") -> Measurement:
    """nccl-tests' table (or benchmarks/nccl_allreduce.py's, which prints the same) as a Measurement."""
    parsed = parse_all_reduce_perf(text)
    peak = parsed.peak_busbw_gbs
    if peak is None:
        return Measurement(tool, node, link, "failed", None, rated, setting, "no result row in its output")
    detail = (f"peak bus bandwidth {peak:.2f} GB/s up to {parsed.largest_bytes} B over {parsed.ranks or '?'} ranks, "
              f"{parsed.wrong} wrong")
    if parsed.wrong:
        return Measurement(tool, node, link, "failed", round(peak * 8, 2), rated, setting, detail + ": wrong results")
    return Measurement(tool, node, link, "measured", round(peak * 8, 2), rated, setting, detail)


_DEVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")  # an RDMA device name (rocep1s0f1, mlx5_0)


def _rail(fab: fabric.Fabric, netdev: str) -> tuple[str, int, int, float] | None:
    """(device, port, RoCE v2 IPv4 GID index, rate) of the addressed RDMA device on a netdev."""
    for dev in fab.get("rdma") or []:
        for port in dev.get("ports") or []:
            gid = next((g for g in port.get("gids") or [] if g.get("ndev") == netdev and "v2" in str(g.get("type")).lower()
                        and g.get("ipv4")), None)
            number, index, rate = port.get("port") or 1, gid.get("index") if gid else None, port.get("rate_gbps") or 0
            name = str(dev.get("device"))
            if (isinstance(number, int) and isinstance(index, int) and isinstance(rate, (int, float))
                    and _DEVICE.fullmatch(name)):  # a node's answer is never an option of the tool it names
                return name, number, index, float(rate)
    return None


def _address(fab: fabric.Fabric, netdev: str, subnet: str) -> str | None:
    prefix = subnet.split("/")[-1]
    addrs = ((fab.get("netdevs") or {}).get(netdev) or {}).get("addrs") or []
    for a in addrs:
        if a.endswith("/" + prefix):
            try:  # only an address: a node's answer is the last argument of ib_write_bw on another node
                return str(ipaddress.ip_address(a.split("/")[0]))
            except ValueError:
                continue
    return None


def ib_write_bw(transport: Transport, nodes: dict[str, Node], fabrics: dict[str, fabric.Fabric], link: fabric.Link,
                port: int) -> Measurement:
    """One rail: ib_write_bw's server on the link's first end, its client on the first end of another node (both
    twins of a port on one subnet give a link of four ends, two on each node: never a node measuring itself)."""
    server, client = _ends(link)
    a, b = _rail(fabrics[server.node], server.netdev), _rail(fabrics[client.node], client.netdev)
    address = _address(fabrics[server.node], server.netdev, link.subnet)
    if a is None or b is None or address is None:
        return Measurement("ib_write_bw", client.node, link.label, "failed", None, None, "",
                           "no addressed RoCE v2 device on both ends")
    rated = min(a[3], b[3]) or None
    common = ["--report_gbits", "-D", str(IB_SECONDS), "-q", "4", "-F", "-p", str(port)]
    server_argv = ["ib_write_bw", "-d", a[0], "-i", str(a[1]), "-x", str(a[2]), *common]
    client_argv = ["ib_write_bw", "-d", b[0], "-i", str(b[1]), "-x", str(b[2]), *common, address]
    setting = " ".join(client_argv)
    with ThreadPoolExecutor(max_workers=1) as pool:
        serving = pool.submit(_bounded, transport, nodes[server.node], server_argv, IB_TIMEOUT)
        time.sleep(SERVER_HEAD_START)
        done, limit = _bounded(transport, nodes[client.node], client_argv, IB_TIMEOUT)
        served, _ = serving.result()
    for result, where in ((done, client.node), (served, server.node)):
        if (missing := _missing(result, ("ib_write_bw",), f"ib_write_bw is not installed on {where} (perftest)",
                                   where)) is not None:
            return Measurement("ib_write_bw", where, link.label, "absent", None, rated, setting, missing)
    if not done.ok:
        return Measurement("ib_write_bw", client.node, link.label, "failed", None, rated, setting,
                           _failure(done, "ib_write_bw", limit, client.node))
    return from_ib_write_bw(done.stdout, client.node, link.label, rated, setting)


def _ends(link: fabric.Link) -> tuple[fabric.End, fabric.End]:
    server = link.ends[0]
    return server, next((e for e in link.ends if e.node != server.node), link.ends[-1])


def all_reduce(transport: Transport, nodes: list[Node], fabrics: dict[str, fabric.Fabric], topo: fabric.Topology) -> Measurement:
    """nccl-tests all_reduce_perf over every node, one GPU each, started by mpirun on the first node."""
    hosts = []
    for node in nodes:
        fab = fabrics.get(node.name) or {}
        mine = [(e.netdev, lk.subnet) for lk in topo.pairs() for e in lk.ends if e.node == node.name]
        address = next((a for a in (_address(fab, nd, sn) for nd, sn in mine) if a), None)
        hosts.append(f"{address or node.name.rpartition('@')[2]}:1")
    rates = [r for lk in topo.pairs() for e in lk.ends if (r := _rail(fabrics[e.node], e.netdev)) is not None]
    rated = min((r[3] for r in rates), default=0.0) or None
    argv = ["mpirun", "--allow-run-as-root", "-np", str(len(nodes)), "-H", ",".join(hosts), "all_reduce_perf",
            "-b", str(ALLREDUCE_MIN_BYTES), "-e", str(ALLREDUCE_MAX_BYTES), "-f", "2", "-g", "1"]
    return _all_reduce_on(transport, nodes[0], argv, f"all {len(nodes)} nodes ({topo.kind})", rated,
                          "mpirun or nccl-tests' all_reduce_perf")


def all_reduce_in_node(transport: Transport, node: Node, gpus: int) -> Measurement:
    """nccl-tests all_reduce_perf over the GPUs of one node, one process driving all of them (-g N, no MPI)."""
    argv = ["all_reduce_perf", "-b", str(ALLREDUCE_MIN_BYTES), "-e", str(ALLREDUCE_MAX_BYTES), "-f", "2", "-g", str(gpus)]
    return _all_reduce_on(transport, node, argv, f"{gpus} GPUs of {node.name}", None, "nccl-tests' all_reduce_perf")


def _all_reduce_on(transport: Transport, node: Node, argv: list[str], link: str, rated: float | None, tools: str) -> Measurement:
    done, limit = _bounded(transport, node, argv, ALLREDUCE_TIMEOUT)
    setting = " ".join(argv)
    if (missing := _missing(done, ("mpirun", "all_reduce_perf"), f"{tools} is not installed on {node.name}",
                                   node.name)) is not None:
        return Measurement("all_reduce_perf", node.name, link, "absent", None, rated, setting, missing)
    if not done.ok:
        return Measurement("all_reduce_perf", node.name, link, "failed", None, rated, setting,
                           _failure(done, argv[0], limit, node.name))
    return from_all_reduce(done.stdout, node.name, link, rated, setting)


def measure_links(transport: Transport, nodes: list[Node], named: list[tuple[str, Facts]],
                  progress: Callable[[str], None] | None = None) -> list[Measurement]:
    """Every link's rail, and on a switch each node's against the first node's, one after another (two tests on
    one wire would halve each other), then one all-reduce over all nodes, then one over the GPUs of each node that
    has several. Never raises: what could not be measured is a Measurement that says why."""
    fabrics = fabric.of(named)
    by_name = {n.name: n for n in nodes if n.name in fabrics}
    topo = fabric.topology(fabrics)
    say = progress or (lambda _: None)
    out = []
    pairs = topo.pairs()  # on a switch: every node against the first
    for i, link in enumerate(pairs):
        say(f"measuring {link.label} with ib_write_bw ({i + 1}/{len(pairs)})…")
        out.append(_guarded(partial(ib_write_bw, transport, by_name, fabrics, link, IB_PORT + i),
                            "ib_write_bw", _ends(link)[1].node, link.label))
    if pairs and len(by_name) > 1:
        say(f"all_reduce_perf over {len(by_name)} nodes…")
        out.append(_guarded(partial(all_reduce, transport, list(by_name.values()), fabrics, topo),
                            "all_reduce_perf", next(iter(by_name)), "all nodes"))
    gpus = {name: len(facts.gpus or []) for name, facts in named}
    for node in nodes:
        if gpus.get(node.name, 0) > 1:
            say(f"all_reduce_perf over the {gpus[node.name]} GPUs of {node.name}…")
            out.append(_guarded(partial(all_reduce_in_node, transport, node, gpus[node.name]),
                                "all_reduce_perf", node.name, f"{gpus[node.name]} GPUs of {node.name}"))
    return out


def _guarded(measure: Callable[[], Measurement], tool: str, node: str, link: str) -> Measurement:
    """measure(), or a failed Measurement saying why: a transport surprise costs this measurement only."""
    try:
        return measure()
    except Exception as exc:
        return Measurement(tool, node, link, "failed", None, None, "", f"{type(exc).__name__}: {exc}"[:300])
