"""What sparkdoctor reads of a Ray cluster's state is the cluster's word, and a node registers its own: `ray.nodes()`
(each node's NodeManagerAddress, NodeID, Alive) and each probe task's return value. A node of odd shape there is that
node's problem, never an exception out of the fleet check, and its address is never a value a command line reads as
more than one host (mpirun's -H, when the fabric gives no address).

RAY_NODE is one entry of `ray.nodes()` as Ray 2.60 answered it (a real one-node cluster on 127.0.0.1, socket paths
shortened); the tests hand odd variants of it to the transport's own readers, without a cluster."""

from __future__ import annotations

import copy
import time
from types import SimpleNamespace

import pytest

from sparkdoctor.fleet import on_node
from sparkdoctor.fleet.measure import all_reduce
from sparkdoctor.fleet.topology import Topology
from sparkdoctor.fleet.transport import RayTransport, _RayRunning

RAY_NODE = {
    "NodeID": "162cc95adfa856dcc8f0a6d42fd99cb350e357fa07530f692aa2139e", "Alive": True, "NodeManagerAddress": "127.0.0.1",
    "NodeManagerHostname": "vm", "NodeManagerPort": 42269, "ObjectManagerPort": 40519,
    "ObjectStoreSocketName": "/tmp/ray/session_2026-12-02_18-26-57_179987_19999/sockets/plasma_store",
    "RayletSocketName": "/tmp/ray/session_2026-12-02_18-26-57_179987_19999/sockets/raylet", "MetricsExportPort": -1,
    "MetricsAgentPort": -1, "DashboardAgentListenPort": -1, "NodeName": "127.0.0.1", "RuntimeEnvAgentPort": 41183,
    "DeathReason": 0, "DeathReasonMessage": "", "alive": True,
    "Resources": {"node:127.0.0.1": 1.0, "object_store_memory": 157286400.0, "memory": 22946430976.0,
                  "node:__internal_head__": 1.0, "CPU": 1.0},
    "Labels": {"ray.io/node-id": "162cc95adfa856dcc8f0a6d42fd99cb350e357fa07530f692aa2139e"},
}


def _node(**changes: object) -> dict[str, object]:
    node = copy.deepcopy(RAY_NODE)
    node.update(changes)
    return node


def _transport(entries: list[object]) -> RayTransport:
    transport = object.__new__(RayTransport)  # no cluster: the state Ray answered is all that is read here
    transport.ray = SimpleNamespace(nodes=lambda: entries)  # type: ignore[assignment]
    return transport


ODD = {
    "address-with-hosts": _node(NodeManagerAddress="10.0.0.1:1,-oProxyCommand=touch /tmp/x"),
    "address-int": _node(NodeManagerAddress=5),
    "address-none": _node(NodeManagerAddress=None),
    "id-missing": {k: v for k, v in RAY_NODE.items() if k != "NodeID"},
    "id-int": _node(NodeID=12345),
    "not-an-object": ["NodeID", "Alive"],
}


@pytest.mark.parametrize("case", ODD)
def test_a_node_of_odd_shape_in_rays_state_is_a_node_with_a_plain_name(case):
    """Before: KeyError 'NodeID', "TypeError: '<' not supported between instances of 'int' and 'str'", "'list' object
    has no attribute 'get'" (each the whole fleet check's internal error), or the node named by what it registered."""
    good = _node(NodeID="aa" * 28, NodeManagerAddress="10.0.0.2")
    nodes = _transport([good, ODD[case]]).nodes()
    names = [n.name for n in nodes]
    assert "10.0.0.2" in names and all("," not in n and " " not in n and not n.startswith("-") for n in names), names


def test_an_odd_address_never_reaches_mpiruns_host_list():
    nodes = _transport([_node(NodeID="aa" * 28, NodeManagerAddress="10.0.0.2"), ODD["address-with-hosts"]]).nodes()
    ran: list[list[str]] = []

    def command(node, argv, timeout):
        ran.append(argv)
        return SimpleNamespace(ok=False, returncode=127, stderr="mpirun: command not found", stdout="", start_error=None,
                               argv=argv, timed_out=False)

    all_reduce(SimpleNamespace(command=command), nodes, {}, Topology("none", [], []))  # type: ignore[arg-type]
    hosts = ran[0][ran[0].index("-H") + 1]
    assert "ProxyCommand" not in hosts and hosts.count(",") == 1, hosts


class _Ray:
    """ray as _RayRunning uses it: get() answers what the node's task returned; the object directory says `size`."""

    class exceptions:
        class GetTimeoutError(Exception):
            pass

        class RayError(Exception):
            pass

    def __init__(self, answer: object, size: object = 100):
        self.answer, self.size, self.fetched = answer, size, False
        self.experimental = SimpleNamespace(get_object_locations=self._locations)

    def _locations(self, refs: list[object]) -> dict[object, dict[str, object]]:
        if self.size is None:
            raise AssertionError("the Ray client has no object directory")
        return {ref: {"object_size": self.size, "node_ids": []} for ref in refs}

    def wait(self, refs: list[object], timeout: float, fetch_local: bool) -> tuple[list[object], list[object]]:
        assert fetch_local is False
        return refs, []

    def get(self, ref: object, timeout: float) -> object:
        self.fetched = True
        return self.answer

    def cancel(self, ref: object, force: bool) -> None:
        pass


def _result(ray: _Ray) -> object:
    running = _RayRunning(["ray task on n"], object(), ray)  # type: ignore[arg-type]
    running.started = time.monotonic()
    return running.result(5.0)


@pytest.mark.parametrize("answer", [5, None, ["stdout"], {"returncode": 0, "stdout": 5}, {"returncode": "0", "stdout": b"{}"},
                                    {"returncode": 0, "stdout": b"{}", "stderr": {"a": 1}}, {"returncode": 0, "stdout": "{}"}])
def test_a_probe_task_returning_something_else_is_said_so_in_one_line(answer):
    """Before: AttributeError ("'int' object has no attribute 'get'", "'int' object has no attribute 'strip'") as the
    node's line, or `exited 0` for a status that is the text "0"."""
    done = _result(_Ray(answer))
    assert not done.ok and done.start_error == "the Ray task answered something that is not a probe's record", done


def test_a_probe_tasks_record_is_read_as_its_bytes_decoded():
    done = _result(_Ray({"returncode": 0, "stdout": b'{"a": 1}\n\xff', "stderr": b"", "timed_out": False}))
    assert done.ok and done.stdout == '{"a": 1}\n\ufffd' and done.stderr == "", done


def test_an_answer_larger_than_a_probes_record_is_the_nodes_failure_and_never_fetched():
    """Before: ray.get fetched whatever the node's worker returned, whole, into this process (a 40 MB answer: 40 MB
    held here, a larger one as much as the node liked); the ssh transport keeps at most a head and a tail."""
    ray = _Ray({"returncode": 0, "stdout": b"x"}, size=on_node.MAX_ANSWER + 1)
    done = _result(ray)
    assert not ray.fetched and not done.ok and "\n" not in str(done.start_error)
    assert done.start_error == (f"the Ray task answered {on_node.MAX_ANSWER + 1:,} bytes, more than the "
                                f"{on_node.MAX_ANSWER:,} a probe's record may hold: not read")


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_an_oversized_stream_where_ray_cannot_say_the_size_is_refused_before_it_is_decoded(stream):
    most = on_node.MAX_OUTPUT if stream == "stdout" else on_node.MAX_ERROR
    done = _result(_Ray({"returncode": 0, stream: b"x" * (most + 1)}, size=None))
    assert not done.ok and done.start_error.startswith(f"the Ray task answered {most + 1:,} bytes of output, more than")
