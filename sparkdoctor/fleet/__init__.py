"""`sparkdoctor fleet check`: every node of a multi-node launch checked as `check` checks one box, then
all nodes compared N-way; the exit code is the pre-launch gate.

Modules, each importing only those above it:
  on_node    the body of a Ray task (standard library only, sent by value)
  bundle     a probe folder as one script for a node's stdin (nothing installed on nodes)
  transport  ssh (the user's own client and config) and Ray (tasks pinned per node)
  target     a node as a check Target
  node       one node's Facts: check's collectors plus the node probe (probes/fleet_node/)
  topology   the fabric's shape: links and switched subnets from the subnets, a node's LAN-only ports
  fabric     the RDMA fabric judged across nodes: topology, NCCL_IB_HCA, GID index, ring routing, MTU, rails
  rules      verdicts for the fleet-only node facts
  compare    N-way comparison: majority value, odd nodes
  measure    --measure: per-rail ib_write_bw and nccl-tests all_reduce_perf, parsed and judged
  inventory  --hosts and inventory files
  run        options -> FleetResult (this module)
Ray is imported by transport.RayTransport only, never on check's path.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sparkdoctor import lookup
from sparkdoctor.check import CheckRequest, check
from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK, EXIT_UNPROBEABLE, EXIT_USAGE
from sparkdoctor.facts import Facts
from sparkdoctor.findings import Report
from sparkdoctor.fleet import fabric
from sparkdoctor.fleet.compare import compare_nodes, unpaired_links
from sparkdoctor.fleet.drift import Drift
from sparkdoctor.fleet.measure import Measurement, measure_links
from sparkdoctor.fleet.node import NodeOutcome, collect_node
from sparkdoctor.fleet.transport import LOCAL, Node, RayTransport, SshTransport
from sparkdoctor.matrix import load
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.text import one_line

DEFAULT_NODE_TIMEOUT = 60.0
MAX_PARALLEL = 64

EXIT_FLEET_GO = EXIT_OK  # every node answered, no risky difference, no finding at or above --fail-on
EXIT_FLEET_REFUSE = EXIT_FINDINGS  # a risky difference between nodes, or a finding at or above --fail-on on a node
EXIT_FLEET_NODE_DOWN = EXIT_UNPROBEABLE  # a node (or the Ray cluster) could not be checked: no launch


class FleetError(SparkdoctorError):
    """The fleet as a whole cannot be checked (a Ray address that does not answer, a cluster with no live
    node): one line, exit 3; Ray not installed is a usage error (exit 2)."""

    exit_code = EXIT_UNPROBEABLE
    code = "fleet-unreachable"

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


@dataclass
class FleetOptions:
    ray_address: str | None = None
    nodes: list[Node] = field(default_factory=list)  # for ssh
    ssh_config: str | None = None
    python: str | None = None  # the serving interpreter on every Ray node (ssh: in each Node)
    container: str | None = None
    runtime: str = "docker"
    node_timeout: float = DEFAULT_NODE_TIMEOUT
    arch: str | None = None
    matrix_path: Path | None = None
    fail_on: str = "error"
    ignore: set[str] = field(default_factory=set)
    measure: bool = False
    # --recipe: (named nodes) -> memory.pernode.FleetFit, the launch judged on every node's memory; the command
    # builds it (fleet never imports the memory pipeline, which reads checkpoints through audit)
    memory_judge: Any = None
    progress: Callable[[str], None] | None = None  # what the run is doing now (the command shows it on a terminal)


@dataclass
class FleetResult:
    transport: str
    outcomes: list[NodeOutcome]  # in the order the nodes were named
    reports: dict[str, Report]  # by node name
    drifts: list[Drift]
    notes: list[str]
    seconds: float
    fail_on: str
    topology: fabric.Topology | None = None  # of the nodes that answered
    fabric: list[fabric.FabricFinding] = field(default_factory=list)  # static and measured
    measured: list[Measurement] = field(default_factory=list)
    memory: Any = None  # memory.pernode.FleetFit (--recipe), else None

    @property
    def down(self) -> list[NodeOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def risky(self) -> list[Drift]:
        return [d for d in self.drifts if d.verdict == "risky"]

    @property
    def unprobed(self) -> list[str]:
        """Nodes that answered, but whose serving stack could not be probed (no packages observed)."""
        return [name for name, r in self.reports.items() if not r.probed()]

    def exit_code(self) -> int:
        if self.down or not self.reports or self.unprobed:  # a node not checked: never "0 risky differences"
            return EXIT_FLEET_NODE_DOWN
        blocked = self.memory is not None and self.memory.blocking()  # the launch does not fit on a node as written
        if blocked or self.risky or any(r.failing() for r in self.reports.values()):
            return EXIT_FLEET_REFUSE
        return EXIT_FLEET_GO

    def verdict(self) -> str:
        return {EXIT_FLEET_GO: "go", EXIT_FLEET_REFUSE: "no-go", EXIT_FLEET_NODE_DOWN: "no-go: node down"}[self.exit_code()]


def run(options: FleetOptions) -> FleetResult:
    """Probe every node in parallel (each within options.node_timeout), judge, compare. FleetError when
    the fleet itself cannot be reached; a node that cannot be is an outcome, never an exception."""
    matrix = load(options.matrix_path)  # MatrixError: the caller's one line
    started = time.monotonic()
    transport, nodes = _connect(options)
    say = options.progress or (lambda _: None)
    say(f"probing {len(nodes)} node(s)…")
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(nodes)))) as pool:
            outcomes = list(pool.map(lambda n: collect_node(transport, n, options.node_timeout, options.arch), nodes))
        named = [(o.node.name, o.facts) for o in outcomes if o.facts is not None]
        measured: list[Measurement] = []
        if options.measure and named:  # links need two nodes; the GPUs of one node are measured alone
            measured = measure_links(transport, [o.node for o in outcomes if o.ok], named, say)
    finally:
        if isinstance(transport, RayTransport):  # ssh keeps no connection
            transport.close()
    reports, drifts, notes, topo, found = judge(named, matrix, options, measured)
    notes += unspecified_addresses(nodes) if transport.kind == "ray" else []
    if options.measure and named and not measured:  # asked for, and silence would read as "measured, all fine"
        notes.append("--measure: nothing to measure: no RDMA link between two nodes that answered, and no node with "
                     "two or more GPUs")
    fit = None
    if options.memory_judge is not None and named:
        say("judging the launch on every node's memory…")
        fit = options.memory_judge(named)
    kind = "local" if nodes and all(n.name == LOCAL for n in nodes) and transport.kind == "ssh" else transport.kind
    return FleetResult(kind, outcomes, reports, drifts, notes, time.monotonic() - started, options.fail_on,
                       topo, found, measured, fit)


def judge(named: list[tuple[str, Facts]], matrix: Matrix, options: FleetOptions, measured: list[Measurement] | None = None
          ) -> tuple[dict[str, Report], list[Drift], list[str], fabric.Topology, list[fabric.FabricFinding]]:
    """(reports, drifts, notes, topology, fabric findings) of the nodes that answered: the
    N-way comparison and the fabric rules fill each node's Facts.fleet, then the matrix judges each node."""
    drifts = compare_nodes(named)
    lonely = unpaired_links(named) if len(named) > 1 else {}
    risky = [d.label for d in drifts if d.verdict == "risky"]
    topo, found = fabric.judge(fabric.of(named))
    found += [f for m in measured or [] for f in m.findings()]
    for name, facts in named:
        facts.fleet = {**(facts.fleet or {}), "nodes": len(named), "drift": risky,
                       "odd": [d.label for d in drifts if d.verdict == "risky" and name in d.odd],
                       "unpaired_links": lonely.get(name, []), "topology": topo.kind,
                       "fabric_findings": [f.to_dict() for f in found if f.node == name]}
    reports = {name: check(CheckRequest(facts=facts, matrix=matrix, fail_on=options.fail_on, ignore=sorted(options.ignore))).report
               for name, facts in named}
    return reports, drifts, _notes(named), topo, found


def _connect(options: FleetOptions) -> tuple[SshTransport | RayTransport, list[Node]]:
    if options.ray_address is None:
        return SshTransport(options.ssh_config), list(options.nodes)
    _reachable(options.ray_address)
    try:
        import ray  # noqa: F401  (the optional extra [fleet]: imported only for --ray)
    except ImportError:
        raise FleetError("--ray needs Ray, which is not installed: pip install 'sparkdoctor-gb10[fleet]'", EXIT_USAGE) from None
    transport = _join(options.ray_address, options.node_timeout)
    nodes = transport.nodes(options.python, options.container, options.runtime)
    if not nodes:
        transport.close()
        raise FleetError(f"--ray {options.ray_address}: the cluster has no live node")
    return transport, nodes


RAY_CONNECT_TIMEOUT = 10.0
RAY_ADDRESS_RE = re.compile(r"^(ray://)?[A-Za-z0-9_.:\[\]-]{1,255}$")


def _join(address: str, limit: float) -> RayTransport:
    """ray.init under the run's deadline: an address that takes the TCP connection but is no GCS keeps Ray
    retrying for many minutes. It runs in a thread that is left behind (and dies with the process) at `limit`."""
    joined: list[RayTransport] = []
    failed: list[Exception] = []

    def connect() -> None:
        try:
            joined.append(RayTransport(address))
        except Exception as exc:  # ConnectionError, a version mismatch, a timeout: Ray's own words, one line
            failed.append(exc)

    joining = threading.Thread(target=connect, name="ray-init", daemon=True)
    with _quiet_fd2() as keep_quiet:  # Ray's core prints its retries on fd 2, from threads of its own
        joining.start()
        joining.join(limit)
        keep_quiet[0] = joining.is_alive()
    if joining.is_alive():
        raise FleetError(f"--ray {address}: no Ray cluster answered within {limit:g} s (--node-timeout); is it a GCS address?")
    if failed:
        exc = failed[0]
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise FleetError(f"--ray {address}: cannot join the cluster: {first[:300]}")
    return joined[0]


@contextlib.contextmanager
def _quiet_fd2() -> Iterator[list[bool]]:
    """fd 2 on /dev/null inside; after, back where it was, unless the caller sets [0]: a Ray left retrying keeps
    /dev/null, and sys.stderr (our one line) moves to a copy of the old fd 2."""
    if sys.stderr is not None:
        sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    keep = [False]
    try:
        yield keep
    finally:
        if keep[0] and sys.stderr is not None and _fd_of(sys.stderr) == 2:
            sys.stderr = open(saved, "w", encoding=sys.stderr.encoding, errors="backslashreplace", closefd=True)  # noqa: SIM115
        else:
            os.dup2(saved, 2)
            os.close(saved)


def _fd_of(stream: TextIO) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):  # a test's captured stream
        return None


def _reachable(address: str) -> None:
    """A GCS address that refuses or never answers a TCP connection: one line now, instead of ray.init waiting
    minutes and printing its retries; a port that is no port is a usage error. ("auto" and ray:// addresses are
    left to Ray.)"""
    if not RAY_ADDRESS_RE.match(address) or ("://" not in address and ":" not in address
                                             and address not in ("auto", "local")):  # a host with no port: Ray refuses it
        raise FleetError(f"--ray {one_line(address[:80])}: not a Ray address (host:port, auto, or ray://host:port)", EXIT_USAGE)
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address:
        return
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise FleetError(f"--ray {address[:200]}: the port must be a number from 1 to 65535, not {port[:20]!r}", EXIT_USAGE)
    try:
        lookup.create_connection((host.strip("[]"), int(port)), RAY_CONNECT_TIMEOUT).close()
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise FleetError(f"--ray {address}: cannot reach the cluster's GCS: {why}") from None


def unspecified_addresses(nodes: list[Node]) -> list[str]:
    """A Ray node whose address is 0.0.0.0 or :: (`ray start --node-ip-address=0.0.0.0`): its ports listen on every
    interface, and another machine's node or vLLM worker that connects to that address reaches itself."""
    found = []
    for node in nodes:
        try:
            unspecified = ipaddress.ip_address(node.name.split("#")[0]).is_unspecified
        except ValueError:
            continue
        if unspecified:
            found.append(f"Ray node {node.name} has the address {node.name.split('#')[0]}: it listens on every interface, "
                         "and a node on another machine cannot reach it there; start it with --node-ip-address set to "
                         "its address on the fabric")
    return found


def _notes(named: list[tuple[str, Facts]]) -> list[str]:
    """Things worth knowing that gate nothing: two names reaching one machine; nodes whose image is unseen."""
    by_boot: dict[str, list[str]] = {}
    for name, facts in named:
        boot = (facts.fleet or {}).get("boot_id")
        if boot:
            by_boot.setdefault(boot, []).append(name)
    notes = [f"{', '.join(names)} are one machine (same boot id): they are not independent nodes"
             for names in by_boot.values() if len(names) > 1]
    inside = [name for name, facts in named if (facts.fleet or {}).get("in_container") is True and not facts.container]
    if inside:
        notes.append(f"{', '.join(inside)} run inside a container whose image cannot be read from inside it: their image "
                     "digests are not compared (name the container instead: --container, or container = in the inventory)")
    return notes
