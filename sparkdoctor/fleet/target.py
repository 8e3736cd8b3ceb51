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


class RemoteTarget:
    shares_files = True  # the probes read the node's own files (host, kernel): nothing is taken from this machine

    def __init__(self, transport: Any, node: Node, deadline: float):
        self.transport, self.node, self.deadline = transport, node, deadline
        self.kind = transport.kind

    def describe(self) -> dict[str, Any]:
        found: dict[str, Any] = {"kind": self.kind, "python": self.node.python or "", "chosen_by": "fleet",
                                 "node": self.node.name}
        if self.node.container:
            found.update(container=self.node.container, engine=self.node.runtime)
        return found

    def start_script(self, script: Path, args: list[str], env: dict[str, str] | None = None) -> proc.Running:
        left = max(0.5, self.deadline - time.monotonic())
        return self.transport.start(self.node, probe_of(script), list(args), left)

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None) -> proc.ProcResult:
        return self.start_script(script, args, env).result(timeout)

    def run_command(self, argv: list[str], timeout: float, input: str | None = None) -> proc.ProcResult:
        return self.transport.command(self.node, argv, timeout)

    def file_transport(self) -> Any:
        raise TargetError(f"{self.node.name}: fleet nodes are read, never written")
