"""A node of the fleet as a `check` Target: its probes travel over a transport (ssh, Ray) instead of
running here, so check's own collectors (the target probe, the static capabilities) run unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from pathlib import Path
from typing import NoReturn

from sparkdoctor import proc
from sparkdoctor.fleet.bundle import bundle, multi_bundle, probe_of
from sparkdoctor.fleet.transport import Node, Transport
from sparkdoctor.inputs import NotJSON, json_answer
from sparkdoctor.targets.local import TargetError
from sparkdoctor.text import one_line

DEFAULT_PYTHON = "the node's default python"
INTERPRETER = "the node's interpreter"  # it exited non-zero before the batch answered: ssh passed its status on
PART = "the probe on the node"  # what failed when a probe of the batch did ("ssh exited 1" sent users to ssh)


class _UntilDeadline(proc.Running):
    """A remote probe's Running: the time it may take is the node's (--node-timeout), not the limit a
    collector sets for a local run (a Ray worker or an ssh login takes seconds to start on a busy node)."""

    def __init__(self, inner: proc.Running, deadline: float):
        super().__init__(inner.argv, None, inner.started)
        self.inner, self.deadline = inner, deadline

    def result(self, timeout: float) -> proc.ProcResult:
        return self.inner.result(max(timeout, self.deadline - self.inner.started))

    def kill(self) -> None:
        self.inner.kill()

    def cancel(self) -> None:
        self.inner.cancel()


class _Batch:
    """Several probes in one session; the first to ask collects it, the others wait for that."""

    def __init__(self, running: proc.Running, jobs: list[tuple[str, tuple[str, ...]]], deadline: float):
        self.running, self.jobs, self.deadline = running, jobs, deadline
        self.lock = threading.Lock()
        self.result: proc.ProcResult | None = None
        self.parts: list[dict[str, object]] | None = None
        self.clock: tuple[float, float] | None = None  # (the node's time as it answered, ours when it arrived)

    def collect(self) -> None:
        with self.lock:
            if self.result is not None:
                return
            self.result = self.running.result(max(0.5, self.deadline - self.running.started))
            arrived = time.time()
            if self.result.ok:
                self.parts, node_time = _parts(self.result.stdout, len(self.jobs))
                if node_time is not None:
                    self.clock = (node_time, arrived)

    def part(self, index: int) -> proc.ProcResult:
        self.collect()
        whole = self.result
        assert whole is not None
        if self.parts is None:  # ssh failed, the node hung, or something else answered: each probe says so
            if not whole.ok and whole.returncode is not None and not (whole.argv[:1] == ["ssh"] and whole.returncode == 255):
                return dataclasses.replace(whole, argv=[INTERPRETER])  # ssh ran: the status is the node's interpreter's
            return whole
        item = self.parts[index]
        if item.get("start_error"):
            return dataclasses.replace(whole, argv=[PART], returncode=None, stdout="", stderr="",
                                       start_error=one_line(str(item["start_error"]))[:300])  # the node's words
        code = item.get("returncode")  # the probe's own status: ssh ran, the node's interpreter exited so
        if code is not None and (not isinstance(code, int) or isinstance(code, bool)):  # not "exited True"
            return dataclasses.replace(whole, argv=[PART], returncode=None, stdout="", stderr="",
                                       start_error=f"the node's batch gave the probe a status that is no number: {one_line(repr(code))[:80]}")
        return dataclasses.replace(whole, argv=[PART], returncode=code if isinstance(code, int) else None,
                                   stdout=str(item.get("stdout") or ""),
                                   stderr=str(item.get("stderr") or ""), timed_out=bool(item.get("timed_out")))


def _parts(stdout: str, count: int) -> tuple[list[dict[str, object]] | None, float | None]:
    lines = stdout.strip().splitlines()
    try:
        data = json_answer(lines[-1]) if lines else None
    except NotJSON:  # not JSON, a number too long, arrays in arrays thousands deep: each probe says so
        return None, None
    parts = data.get("sparkdoctor_multi") if isinstance(data, dict) else None
    if not isinstance(parts, list) or len(parts) != count or not all(isinstance(p, dict) for p in parts):
        return None, None
    assert isinstance(data, dict)
    when = data.get("time")
    clock = float(when) if isinstance(when, (int, float)) and not isinstance(when, bool) else None
    return parts, clock if clock is not None and math.isfinite(clock) else None  # NaN: no clock, strict JSON


class _BatchPart(proc.Running):
    def __init__(self, batch: _Batch, index: int):
        super().__init__(batch.running.argv, None, batch.running.started)
        self.batch, self.index = batch, index

    def result(self, timeout: float) -> proc.ProcResult:
        return self.batch.part(self.index)

    def kill(self) -> None:
        self.batch.running.kill()

    def cancel(self) -> None:
        pass  # the session serves the other probes too; it ends with them or at the node's deadline


class RemoteTarget:
    shares_files = True  # the probes read the node's own files (host, kernel): nothing is taken from this machine

    def __init__(self, transport: Transport, node: Node, deadline: float):
        self.transport, self.node, self.deadline = transport, node, deadline
        self.kind = transport.kind
        self.python = node.python or DEFAULT_PYTHON
        self.batch: _Batch | None = None

    def describe(self) -> dict[str, object]:
        found: dict[str, object] = {"kind": self.kind, "python": self.python, "chosen_by": "fleet",
                                    "node": self.node.name}
        if self.node.container:
            found.update(container=self.node.container, engine=self.node.runtime)
        return found

    def prefetch(self, jobs: list[tuple[str, list[str]]]) -> None:
        """Start these probes now, together: one ssh session (or one Ray task) for all of them."""
        left = max(0.5, self.deadline - time.monotonic())
        running = self.transport.start(self.node, multi_bundle(jobs, left), [], left)
        self.batch = _Batch(running, [(name, tuple(args)) for name, args in jobs], self.deadline)

    def start_script(self, script: Path, args: list[str], env: dict[str, str] | None = None) -> proc.Running:
        name = probe_of(script)
        if self.batch is not None and (name, tuple(args)) in self.batch.jobs:
            return _BatchPart(self.batch, self.batch.jobs.index((name, tuple(args))))
        left = max(0.5, self.deadline - time.monotonic())
        return _UntilDeadline(self.transport.start(self.node, bundle(name), list(args), left), self.deadline)

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None) -> proc.ProcResult:
        return self.start_script(script, args, env).result(timeout)

    def run_command(self, argv: list[str], timeout: float, input: str | None = None) -> proc.ProcResult:
        return self.transport.command(self.node, argv, timeout)

    def file_transport(self) -> NoReturn:
        raise TargetError(f"{self.node.name}: fleet nodes are read, never written")
