"""How a probe reaches a node: over the user's own ssh, or as a Ray task pinned to the node.

Both send the same thing, a script (bundle.py: the probes, bundled) read by the node's interpreter on
stdin, and hand back a proc.Running, so the Target protocol (and with it `check`'s collectors) works
unchanged on a remote node.

SSH: the user's ssh client, configuration and keys (an optional -F file), BatchMode (never a password
prompt, nothing stored), host keys checked as the user's ssh checks them (StrictHostKeyChecking is never
relaxed: an unknown or changed key ends that node's probe with ssh's own message).
The node named `local` (LOCAL) is this machine: its command lines run here as plain subprocesses, no ssh
(a host of several GPUs checked and measured as one node).
Ray: `ray` is imported here only, when --ray is given; the task body is on_node.py, sent by value.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import time
from dataclasses import dataclass
from types import ModuleType

from sparkdoctor import proc
from sparkdoctor.fleet import on_node

SSH_CONNECT_TIMEOUT = 10
BOUNDED = on_node.BOUNDED  # `sh -c BOUNDED sh SECONDS COMMAND...`: COMMAND stopped on the node at SECONDS
LOCAL = "local"  # the node that is this machine: no ssh


@dataclass(frozen=True)
class Node:
    name: str  # as the user named it (an ssh host or alias), or a Ray node's address
    python: str | None = None  # the serving interpreter on the node; None: $VIRTUAL_ENV there, else python3 / the worker's
    container: str | None = None  # probe inside this running container on the node
    runtime: str = "docker"
    ray_node_id: str | None = None


class SshTransport:
    kind = "ssh"

    def __init__(self, config: str | None = None):
        self.config = config

    def prefix(self, node: Node) -> list[str]:
        """`ssh [options] HOST`: what runs a command on the node (the rest of argv is its command line)."""
        options = ["-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT}",
                   "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if self.config:
            options += ["-F", self.config]
        return ["ssh", *options, "--", node.name]  # `--`: a destination is never read as an option

    def argv(self, node: Node, remote: list[str]) -> list[str]:
        if node.name == LOCAL:
            return list(remote)  # this machine: the command line itself, in a subprocess
        return [*self.prefix(node), shlex.join(remote)]

    def remote_argv(self, node: Node, args: list[str], timeout: float) -> list[str]:
        if node.container:  # inside the container under its own sh's limit too: its CLI's end stops nothing there
            return on_node.in_container(node.runtime, node.container, [node.python or "python3", *on_node.NODE_FLAGS, "-",
                                                                        *args], timeout)
        if node.python:
            return [node.python, *on_node.NODE_FLAGS, "-", *args]
        # as `check` picks: the active venv's interpreter, else python3 on the node's PATH
        return ["sh", "-c", 'exec "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/}python3" -S -B -X sparkdoctor_site - "$@"', "sparkdoctor", *args]

    def start(self, node: Node, script: str, args: list[str], timeout: float) -> proc.Running:
        """`script` (a bundle, bundle.py) read by the node's serving interpreter on stdin, under the node's own
        `timeout` where it has one: at the limit ssh is killed here, and sshd (no pty) signals nothing, so an
        interpreter hung on the node (a stalled disk, a wrapper that waits) would run there on and on."""
        remote = self.remote_argv(node, args, timeout)
        if node.name != LOCAL:  # this machine's own children are killed by proc at the limit
            remote = ["sh", "-c", BOUNDED, "sh", str(math.ceil(timeout)), *remote]
        return proc.start(self.argv(node, remote), input=script)

    def command(self, node: Node, argv: list[str], timeout: float) -> proc.ProcResult:
        return proc.run(self.argv(node, argv), timeout=timeout)


class _RayRunning(proc.Running):
    """A probe running as a Ray task: result() waits for it, and cancels it at the time limit."""

    def __init__(self, argv: list[str], ref: object, ray: ModuleType):
        super().__init__(argv, None, time.monotonic())
        self.ref, self.ray = ref, ray

    def result(self, timeout: float) -> proc.ProcResult:
        until = self.started + timeout
        left = proc.time_left()
        if left is not None:
            until = min(until, time.monotonic() + left)
        try:
            # done, and how large its answer is, before any of it is fetched: ray.get holds all of it in memory
            ready, _ = self.ray.wait([self.ref], timeout=max(0.0, until - time.monotonic()), fetch_local=False)
            size = _answer_size(self.ray, self.ref) if ready else None
            if size is not None and size > on_node.MAX_ANSWER:
                self.cancel()
                return self._refused(f"{size:,} bytes")
            out = self.ray.get(self.ref, timeout=max(0.0, until - time.monotonic()))
        except self.ray.exceptions.GetTimeoutError:
            self.cancel()
            return proc.ProcResult(self.argv, None, "", "", time.monotonic() - self.started, timed_out=True,
                                   limit=timeout)
        except self.ray.exceptions.RayError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return proc.ProcResult(self.argv, None, "", "", time.monotonic() - self.started,
                                   start_error=f"the Ray task failed: {first[:300]}")
        seconds = time.monotonic() - self.started
        if not isinstance(out, dict) or not all(isinstance(out.get(k) or b"", bytes) for k in ("stdout", "stderr")) \
                or not isinstance(out.get("returncode"), (int, type(None))):  # a node's Ray worker answers this
            return proc.ProcResult(self.argv, None, "", "", seconds,
                                   start_error="the Ray task answered something that is not a probe's record")
        stdout, stderr = out.get("stdout") or b"", out.get("stderr") or b""
        if len(stdout) > on_node.MAX_OUTPUT or len(stderr) > on_node.MAX_ERROR:  # where Ray could not say its size
            return self._refused(f"{len(stdout) + len(stderr):,} bytes of output")
        if out.get("start_error"):
            return proc.ProcResult(self.argv, None, "", "", seconds,
                                   start_error=f"{str(out.get('python'))[:300]}: {str(out['start_error'])[:300]}")
        return proc.ProcResult(self.argv, out.get("returncode"), stdout.decode("utf-8", "replace"),
                               stderr.decode("utf-8", "replace"), seconds, timed_out=bool(out.get("timed_out")),
                               limit=timeout)

    def _refused(self, size: str) -> proc.ProcResult:
        """An answer larger than a probe's record may be (on_node.MAX_ANSWER): the node's failure, not read."""
        return proc.ProcResult(self.argv, None, "", "", time.monotonic() - self.started,
                               start_error=f"the Ray task answered {size}, more than the {on_node.MAX_ANSWER:,} a "
                                           "probe's record may hold: not read")

    def kill(self) -> None:
        self.cancel()

    def cancel(self) -> None:
        try:
            self.ray.cancel(self.ref, force=True)
        except Exception:  # already finished, or the cluster went away: nothing left to stop
            pass


class RayTransport:
    """The nodes of a running Ray cluster; connects on creation, disconnects in close()."""

    kind = "ray"

    def __init__(self, address: str):
        # Ray is the optional extra [fleet]: imported only by the --ray transport
        import ray
        from ray import cloudpickle

        self.ray = ray
        self.owns_connection = not ray.is_initialized()
        if self.owns_connection:
            # its warnings are not ours to print (ray.init runs in a thread here: fleet._join)
            logging.getLogger("ray").setLevel(logging.ERROR)
            os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")  # its core's retries, printed on stderr
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, configure_logging=False)
        cloudpickle.register_pickle_by_value(on_node)  # nodes need Ray, not sparkdoctor
        self.task = ray.remote(on_node.run_probe)
        self.command_task = ray.remote(on_node.run_command)

    def nodes(self, python: str | None = None, container: str | None = None, runtime: str = "docker") -> list[Node]:
        """The live nodes, each named by the address it registered: a node's own word, so only a plain host name or
        address (one host wherever a command line takes a host, never an option), else `?`."""
        alive = [(_plain(n.get("NodeManagerAddress")), str(n.get("NodeID") or "")) for n in self.ray.nodes()
                 if isinstance(n, dict) and n.get("Alive") is True]
        addresses = [address for address, _ in alive]
        found = []
        for address, node_id in sorted(alive):
            name = address if addresses.count(address) == 1 else f"{address}#{node_id[:8]}"
            found.append(Node(name, python, container, runtime, ray_node_id=node_id))
        return found

    def _pinned(self, node: Node) -> dict[str, object]:
        """The options that run a task on `node` only."""
        from ray.util.scheduling_strategies import (
            NodeAffinitySchedulingStrategy,  # the optional extra [fleet]
        )

        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=str(node.ray_node_id), soft=False),
                "num_cpus": 0, "max_retries": 0}

    def start(self, node: Node, script: str, args: list[str], timeout: float) -> proc.Running:
        ref = self.task.options(**self._pinned(node)).remote(script, args, node.python, node.container, node.runtime,
                                                             timeout)
        return _RayRunning([f"ray task on {node.name}"], ref, self.ray)

    def command(self, node: Node, argv: list[str], timeout: float) -> proc.ProcResult:
        """`argv` run on the node by a task pinned to it (the node's container CLI reading its image)."""
        ref = self.command_task.options(**self._pinned(node)).remote(list(argv), timeout)
        return _RayRunning(list(argv), ref, self.ray).result(timeout)

    def close(self) -> None:
        if self.owns_connection:
            self.ray.shutdown()


def _answer_size(ray: ModuleType, ref: object) -> int | None:
    """The bytes of a finished task's answer as Ray stores it, asked before it is fetched; None where Ray does not say
    (a ray:// client connection has no object directory to ask)."""
    try:
        size = ray.experimental.get_object_locations([ref])[ref].get("object_size")
    except Exception:  # an older or client-mode Ray: the answer's own lengths are checked once it is fetched
        return None
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def _plain(address: object) -> str:
    """A registered address as a node's name: a host name or address of letters, digits, `.`, `:`, `-` (not first),
    else `?` (a comma or a leading `-` would be more hosts, or an option, in mpirun's -H or ssh's argv)."""
    text = address if isinstance(address, str) else ""
    return text if _HOST.fullmatch(text) else "?"


_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:-]{0,252}")
Transport = SshTransport | RayTransport
