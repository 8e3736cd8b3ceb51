"""One node's Facts, collected the way `check` collects a target's, through a RemoteTarget: check's own
collectors run unchanged, plus the node probe (probes/fleet_node/), whose answer fills the fields check reads
from this machine directly (host, driver, GPUs, host health) and the node facts only a fleet has (Facts.fleet).

A node whose node probe does not answer (ssh refused, a host key that does not verify, a hang, garbage
on stdout) is not judged: its outcome is one line naming it.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from sparkdoctor import __version__, proc
from sparkdoctor.arch import assumed
from sparkdoctor.collect import (
    Collector,
    CollectorError,
    Context,
    capabilities,
    run_collectors,
    targetenv,
)
from sparkdoctor.collect.gpu import arch_of
from sparkdoctor.facts import Facts
from sparkdoctor.facts_shapes import (
    TEXT,
    Finite,
    ListOf,
    MapOf,
    Opt,
    ShapeError,
    array,
    check_field,
    check_value,
    table,
)
from sparkdoctor.fleet.fabric import clean as clean_fabric
from sparkdoctor.fleet.target import DEFAULT_PYTHON, RemoteTarget
from sparkdoctor.fleet.transport import Node, Transport
from sparkdoctor.targets.container_inspect import image_facts, inspect_container
from sparkdoctor.targets.local import TargetError, parse_json_probe, probe_entry
from sparkdoctor.targets.probe import probe_args
from sparkdoctor.text import one_line

NODE_PROBE = "fleet_node"
MAX_TEXT = 1 << 16  # of a /proc text a node sends
MAX_KERNEL_LINES = 2000  # kernel-log memory lines read from a node (its probe sends at most as many)

_PROCESS = {"pid": int, "name": Opt(TEXT), "rss_kib": Opt(int), "devices": Opt(ListOf(TEXT)), "container": Opt(TEXT),
            "!required": ("pid",)}
MEMORY_HOLDERS = {"holders": ListOf(_PROCESS), "others": ListOf(_PROCESS), "errors": ListOf(TEXT),
                  "containers": ListOf({"id": TEXT, "cgroup": Opt(TEXT), "bytes": int, "pids": Opt(ListOf(int)),
                                        "!required": ("id", "bytes")})}
MAX_ROWS = 4096  # processes or containers read from a node's holders
MAX_DEPTH = 32  # of lists and objects in a node probe's answer: its own nest 5 deep
MAX_WIDTH = 20_000  # entries of one list or object there: a venv's packages are hundreds, the kernel log 2,000 lines

# The node probe's answer as apply_node reads it (probes/fleet_node/): a node is user input, so its answer is
# checked like a --facts snapshot, here before it is read and as Facts after (facts_shapes.py).
NODE_ANSWER: dict[str, object] = {
    "host": dict, "memory": dict, "cma": dict, "driver": dict, "cuda_toolkit": dict, "nccl": dict,
    "roce_v2_gid_index": dict, "node": dict, "gpus": ListOf(dict), "nccl_conf": ListOf(dict), "links": ListOf(dict),
    "env": MapOf(TEXT), "errors": ListOf(TEXT), "python": TEXT, "time": Finite(), "host_texts": dict, "kernel_log": dict,
    "pci_ids": ListOf(TEXT), "memory_holders": MEMORY_HOLDERS, "daemon_log": dict,
    "memory_limit": {"bytes": int, "used_bytes": Opt(int), "cgroup": Opt(TEXT), "!required": ("bytes",)},
}


@dataclass
class _Answer:
    """What the node probe's collector saw, for collect_node to judge after the collectors ran."""

    raw: object = None
    problem: str | None = None
    received: float | None = None  # our clock when the answer arrived


@dataclass
class NodeOutcome:
    node: Node
    facts: Facts | None  # None: the node could not be probed (problem says why)
    problem: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.facts is not None


def collect_node(transport: Transport, node: Node, timeout: float, arch: str | None = None) -> NodeOutcome:
    """Probe one node within `timeout` seconds; never raises."""
    started = time.monotonic()
    deadline = started + timeout
    target = RemoteTarget(transport, node, deadline)
    facts = Facts(tool={"name": "sparkdoctor", "version": __version__, "host_python": platform.python_version()})
    facts.target = target.describe()
    facts.arch = {"value": arch, "source": "given"} if arch else assumed("GPU detection did not finish")
    ctx = Context(target=target, facts=facts, arch_override=arch, cache_dir=None, use_cache=False, kernels=False,
                  timeout=timeout, deadline=deadline, budget="the node's time, --node-timeout")
    answer = _Answer()

    def node_probe(ctx: Context) -> dict[str, object]:
        result = ctx.target.run_script(probe_entry(NODE_PROBE), [], max(0.5, deadline - time.monotonic()))
        answer.received = time.time()
        try:
            answer.raw = parse_json_probe(ctx.target, probe_entry(NODE_PROBE), result)
        except TargetError as exc:
            answer.problem = str(exc)
            raise CollectorError(str(exc)) from None
        return {}

    try:
        target.prefetch([(targetenv.PROBE, probe_args(target, None, False)[0]), ("capabilities", []), (NODE_PROBE, [])])
        # a remote node's limit is the node's: check's per-collector limits are sized for a local run
        remote = [replace(c, timeout=timeout) for c in (targetenv.COLLECTOR, capabilities.COLLECTOR)]
        extra = [Collector("container", lambda ctx: _container(transport, node, deadline), timeout=timeout)] \
            if node.container else []
        run_collectors(ctx, [*remote, Collector("node", node_probe, timeout=timeout), *extra])
    except Exception as exc:  # a surprise must cost this node, never the fleet
        if answer.problem is None:
            answer.problem = f"{type(exc).__name__}: {exc}"
    seconds = time.monotonic() - started
    raw = answer.raw
    if not isinstance(raw, dict) or raw.get("probe") != NODE_PROBE:
        problem = answer.problem or next((e["error"] for e in facts.errors if e.get("collector") == "node"),
                                             "the node probe did not answer")
        if isinstance(raw, dict):
            problem = "answered something that is not the node probe's report"
        return NodeOutcome(node, None, _short(problem), seconds)
    try:
        check_answer(raw)
        apply_node(facts, raw, answer.received or time.time(), arch)
        for column in dataclasses.fields(facts):  # and what check's own probes sent (packages, env, capabilities)
            bounded(column.name, getattr(facts, column.name))
        for name, value in facts.to_dict().items():  # what the node's probes put in: the shapes of a snapshot
            check_field(name, value)
    except RecursionError:  # nested within MAX_DEPTH, yet too deep for the stack left here
        return NodeOutcome(node, None, "answered a report of the wrong shape: nested too deeply", seconds)
    except ShapeError as exc:
        return NodeOutcome(node, None, _short(f"answered a report of the wrong shape: {exc}"), seconds)
    if target.batch is not None and target.batch.clock is not None and facts.fleet is not None:  # the batch's own clock
        facts.fleet["clock_skew_s"] = round(target.batch.clock[0] - target.batch.clock[1], 2)
    return NodeOutcome(node, facts, None, seconds)


def check_answer(raw: Mapping[str, object]) -> None:
    """ShapeError for the first field of the node probe's answer that apply_node cannot read (null: not known)."""
    for key, value in raw.items():  # first: Python's own recursion (asdict, the comparison, a renderer) would end the
        bounded(str(key), value)  # whole fleet check on it, not this node's
    for key, shape in NODE_ANSWER.items():
        if raw.get(key) is not None:
            check_value(raw[key], shape, key)


def bounded(where: str, value: object) -> None:
    """ShapeError when lists and objects in `value` nest deeper than MAX_DEPTH or one holds more than MAX_WIDTH
    entries (each drift row a node's env variable adds costs the whole run), walked without recursion."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ShapeError(f"'{where[:40]}': nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, (dict, list)) and len(item) > MAX_WIDTH:
            raise ShapeError(f"'{where[:40]}': a list or object of {len(item):,} entries (at most {MAX_WIDTH:,})")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _container(transport: Transport, node: Node, deadline: float) -> dict[str, object]:
    """The image of the container a node serves from, read with the node's own container CLI (over ssh, or as
    a Ray task pinned to the node), in the shape `check --container` records: its content fingerprint (over
    the config digest, the layer digests and the platform) is what nodes must share."""
    cli = [node.runtime]

    def on_node(argv: list[str], limit: float) -> proc.ProcResult:  # the node's limit: a Ray worker or an ssh login takes a while
        return transport.command(node, argv, max(limit, deadline - time.monotonic()))

    try:
        record = inspect_container(cli, str(node.container), run=on_node)
    except TargetError as exc:
        raise CollectorError(str(exc)) from None
    config = record.get("Config") or {}
    image_id = str(record.get("Image") or "")
    info: dict[str, object] = {
        "name": str(record.get("Name") or node.container).lstrip("/"), "id": str(record.get("Id") or "")[:12],
        "engine": os.path.basename(node.runtime), "image": str(config.get("Image") or record.get("ImageName") or ""),
        "image_id": image_id, "runtime": (record.get("HostConfig") or {}).get("Runtime"),
    }
    try:
        info.update(image_facts(cli, image_id, run=on_node))
    except (TargetError, ValueError, IndexError, AttributeError, TypeError) as exc:
        info["image_error"] = str(exc)[:300]
    return {"container": info}


def _short(problem: str) -> str:
    """A failed probe's line without the probe plumbing: what ssh, Ray or the node said."""
    text = one_line(problem)
    prefix = f"probe {NODE_PROBE} "
    if text.startswith(prefix):
        text = text[len(prefix):]
        if text.startswith("in ") and ": " in text:
            text = text.split(": ", 1)[1]
    return text[:300]


def apply_node(facts: Facts, raw: dict[str, object], received: float, arch: str | None) -> None:
    """Fill Facts from the node probe's answer, in the shapes facts.py documents."""
    facts.host = table(raw.get("host"))
    driver = table(raw.get("driver"))
    facts.driver = {k: driver.get(k) for k in ("version", "cuda", "libcuda", "source") if k in driver}
    smi = raw.get("gpus")
    if isinstance(smi, list):
        facts.gpus = [{"index": g.get("index"), "name": g.get("name"), "cc": g.get("cc"), "arch": arch_of(str(g.get("cc") or "")),
                       "unified": None} for g in smi if isinstance(g, dict)]
        detected = next((g["arch"] for g in facts.gpus if g.get("arch")), None)
        if detected and not arch:
            facts.arch = {"value": detected, "source": "detected"}
        elif not detected and not arch:
            facts.arch = assumed("no GPU detected on the node")
    elif not arch:
        facts.arch = assumed("no nvidia-smi on the node")
    links = [link for link in array(raw.get("links")) if isinstance(link, dict)]
    facts.host_health = {
        "live": True,
        "root": "/",
        "memory": table(raw.get("memory")),
        "links": [{k: v for k, v in link.items() if k != "gids"} for link in links],
        "gpus": [_gpu_health(g) for g in array(smi) if isinstance(g, dict)],
        "errors": [str(e) for e in array(raw.get("errors"))],
    }
    _host_memory(facts.host_health, raw)
    env = table(raw.get("env"))
    if facts.env is not None:
        facts.env = {**facts.env, **{str(k): str(v) for k, v in env.items()}}

    if facts.target is not None and facts.target.get("python") in (None, "", DEFAULT_PYTHON):
        facts.target["python"] = facts.target.get("executable") or raw.get("python")
    when = raw.get("time")
    facts.fleet = {
        "node": facts.target.get("node") if facts.target else None,
        "hostname": table(raw.get("node")).get("hostname"),
        "boot_id": table(raw.get("node")).get("boot_id"),
        "driver_flavour": driver.get("flavour"),
        "cuda_toolkit": table(raw.get("cuda_toolkit")).get("version"),
        "nccl": table(raw.get("nccl")),
        "nccl_conf": [c for c in array(raw.get("nccl_conf")) if isinstance(c, dict)],
        "cma": raw.get("cma") if isinstance(raw.get("cma"), dict) else None,
        "roce_v2_gid_index": table(raw.get("roce_v2_gid_index")),
        "fabric": clean_fabric(raw.get("fabric")),
        "in_container": raw.get("in_container"),
        "clock_skew_s": round(when - received, 2) if isinstance(when, (int, float)) else None,
        "memory": _memory_holders(raw),
    }


def _host_memory(health: dict[str, Any], raw: dict[str, object]) -> None:
    """The node's memory, PSI and kernel-log readings, parsed as `check` parses this machine's (collect/host_health.py,
    collect/kernel_log.py) from the texts and memory lines its probe sent (probes/fleet_node/fleetnode_hostmem.py);
    a node whose probe predates them keeps its meminfo figures and leaves the rest unknown."""
    from sparkdoctor.collect.host_health import memory_of, pressure_of, unified_of
    from sparkdoctor.collect.kernel_log import counts, daemon_counts, parse

    texts = table(raw.get("host_texts"))
    meminfo, psi = texts.get("meminfo"), texts.get("pressure")
    if isinstance(meminfo, str):
        health["memory"] = memory_of(meminfo[:MAX_TEXT]) or health["memory"]
    health["pressure"] = pressure_of(psi[:MAX_TEXT]) if isinstance(psi, str) else None
    if isinstance(health["memory"], dict):
        health["memory"]["unified"] = unified_of(raw.get("pci_ids"))  # a list of text: NODE_ANSWER checked it
    log = table(raw.get("kernel_log"))
    sent, refusals = log.get("lines"), log.get("refused")
    lines = [line[:4096] for line in (sent if isinstance(sent, list) else []) if isinstance(line, str)][:MAX_KERNEL_LINES]
    health["kernel"] = counts(parse("\n".join(lines))) if isinstance(log.get("source"), str) else None
    health["kernel_source"] = log.get("source") if isinstance(log.get("source"), str) else None
    # why each log tried was not read, as check's host health says it (describe.describe_health prints either)
    health["kernel_refused"] = ([str(r)[:300] for r in refusals[:8]] if isinstance(refusals, list) else []) \
        if health["kernel"] is None else []
    daemons = table(raw.get("daemon_log"))  # earlyoom's and systemd-oomd's kills in the node's journal
    sent = daemons.get("lines")
    lines = [line[:4096] for line in (sent if isinstance(sent, list) else []) if isinstance(line, str)][:MAX_KERNEL_LINES]
    health["oom_daemons"] = daemon_counts("\n".join(lines)) if isinstance(daemons.get("source"), str) else None
    if log and health["kernel"] is None:
        refused = "; ".join(str(r) for r in (refusals if isinstance(refusals, list) else []))[:300]
        health["errors"].append(f"kernel log not readable on the node ({refused}): the NVRM, OOM and hung-task "
                                "entries are unknown there")


def _memory_holders(raw: dict[str, object]) -> dict[str, object] | None:
    """Who holds the node's memory (the probe's holders, bounded) and MemFree, for `fleet check --recipe`
    (memory/pernode.py builds the node's memory.have.Have from it); None from a probe that predates them."""
    held = raw.get("memory_holders")
    if not isinstance(held, dict):
        return None
    from sparkdoctor.collect.host_health import memory_of
    from sparkdoctor.memory.have import kib_bytes, meminfo_fields

    text = str(table(raw.get("host_texts")).get("meminfo") or "")[:MAX_TEXT]
    fields, mem = meminfo_fields(text), memory_of(text) or {}
    hugetlb, hugetlb_free = kib_bytes(mem.get("hugetlb_kib")), kib_bytes(mem.get("hugetlb_free_kib"))
    room = table(raw.get("memory_limit"))  # the memory cgroup a launch from the node's shell starts in (NODE_ANSWER checked it)
    return {"free_kib": fields.get("MemFree"), "hugetlb_bytes": hugetlb, "hugetlb_free_bytes": hugetlb_free,
            "limit_bytes": room.get("bytes"), "limit_used_bytes": room.get("used_bytes"), "limit_cgroup": room.get("cgroup"),
            **{key: list(held.get(key) or [])[:MAX_ROWS] for key in ("holders", "others", "containers")},
            "errors": [str(e)[:300] for e in held.get("errors") or []][:20]}


def _gpu_health(g: Mapping[str, object]) -> dict[str, object]:
    keys = ("index", "clock_graphics_mhz", "clock_graphics_max_mhz", "clock_memory_mhz", "pstate", "temperature_c",
            "power_w", "memory_used_mib")
    return {k: g.get(k) for k in keys}
