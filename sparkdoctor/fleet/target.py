"""A node of the fleet as a `check` Target: its probes travel over a transport (ssh, Ray) instead of
running here, so check's own collectors (the target probe, the static capabilities) run unchanged.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sparkdoctor import proc
from sparkdoctor.fleet.bundle import probe_of
from sparkdoctor.fleet.transport import Node
from sparkdoctor.target import TargetError


DEFAULT_PYTHON = "the node's default python"


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


class RemoteTarget:
    shares_files = True  # the probes read the node's own files (host, kernel): nothing is taken from this machine

    def __init__(self, transport: Any, node: Node, deadline: float):
        self.transport, self.node, self.deadline = transport, node, deadline
        self.kind = transport.kind

    def describe(self) -> dict[str, Any]:
        found: dict[str, Any] = {"kind": self.kind, "python": self.node.python or DEFAULT_PYTHON, "chosen_by": "fleet",
                                 "node": self.node.name}
        if self.node.container:
            found.update(container=self.node.container, engine=self.node.runtime)
        return found

    def start_script(self, script: Path, args: list[str], env: dict[str, str] | None = None) -> proc.Running:
        left = max(0.5, self.deadline - time.monotonic())
        return _UntilDeadline(self.transport.start(self.node, probe_of(script), list(args), left), self.deadline)

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None) -> proc.ProcResult:
        return self.start_script(script, args, env).result(timeout)

    def run_command(self, argv: list[str], timeout: float, input: str | None = None) -> proc.ProcResult:
        return self.transport.command(self.node, argv, timeout)

    def file_transport(self) -> Any:
        raise TargetError(f"{self.node.name}: fleet nodes are read, never written")
