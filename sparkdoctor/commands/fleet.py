"""`sparkdoctor fleet check`: every node of a multi-node launch checked and compared; the exit code is the
pre-launch gate (docs/fleet.md). options -> run -> Result("fleet check", "fleet") -> emit.

Exit 0: go (every node answered, no risky difference, no finding at or above --fail-on); 1: no-go (a risky
difference between nodes, or a node's finding); 2: usage (bad options or inventory, Ray not installed);
3: no-go, a node (or the Ray cluster) could not be checked: the others are still judged and compared.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from sparkdoctor.commands.options import (
    arch_option,
    format_option,
    matrix_option,
    output_option,
    output_path,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.fleet import FleetResult
from sparkdoctor.result import Format, Result
from sparkdoctor.views.fleet import VIEW

FORMATS = VIEW.formats


@dataclass
class FleetCommand:
    ray: str | None = None
    hosts: str | None = None
    inventory: Path | None = None
    ssh_config: Path | None = None
    python: str | None = None
    container: str | None = None
    runtime: str = "docker"
    node_timeout: float = 60.0
    arch: str | None = None
    fail_on: str = "error"
    ignore: list[str] = field(default_factory=list)
    matrix: Path | None = None
    fmt: Format = Format.console
    output: Path | None = None
    verbose: bool = False
    measure: bool = False

    def refuse_bad_options(self) -> None:
        """Every usage error of `fleet check` (exit 2, one line), before a node is reached."""
        Format.parse(self.fmt, FORMATS)
        if self.fail_on not in ("info", "warn", "error"):
            raise UsageError(f"--fail-on {self.fail_on}: choose one of info, warn, error")
        if not (math.isfinite(self.node_timeout) and self.node_timeout > 0):
            raise UsageError(f"--node-timeout {self.node_timeout}: give a number of seconds above 0")
        if self.runtime not in ("docker", "podman"):
            raise UsageError(f"--runtime {self.runtime}: choose docker or podman")
        chosen = [name for name, value in (("--ray", self.ray), ("--hosts", self.hosts),
                                           ("--inventory", self.inventory)) if value is not None]
        if len(chosen) != 1:
            raise UsageError("give exactly one of --ray ADDRESS, --hosts A,B,... or --inventory FILE"
                             + (f" (got {' and '.join(chosen)})" if chosen else ""))
        if self.ssh_config is not None and self.ray is not None:
            raise UsageError("--ssh-config is for --hosts and --inventory; Ray reaches its nodes itself")
        if self.ssh_config is not None and not self.ssh_config.is_file():
            raise UsageError(f"--ssh-config {self.ssh_config}: no such file")
        if self.arch is not None:
            from sparkdoctor.arch import real_arch_problem

            problem = real_arch_problem(self.arch)
            if problem:
                raise UsageError(f"--arch {self.arch!r}: {problem}")


def run(options: FleetCommand) -> Result[FleetResult]:
    """Check the options (UsageError / InputError: one line, exit 2), run the fleet check, wrap its answer."""
    from sparkdoctor import fleet
    from sparkdoctor.fleet.inventory import load_inventory, parse_hosts

    nodes: list[Any] = []
    options.refuse_bad_options()
    if options.hosts is not None:
        nodes = parse_hosts(options.hosts, options.python, options.container, options.runtime)
    elif options.inventory is not None:
        nodes = load_inventory(options.inventory, options.python, options.container, options.runtime)
    run_options = fleet.FleetOptions(
        ray_address=options.ray, nodes=nodes, ssh_config=str(options.ssh_config) if options.ssh_config else None,
        python=options.python, container=options.container, runtime=options.runtime, node_timeout=options.node_timeout,
        arch=options.arch, matrix_path=options.matrix, fail_on=options.fail_on, ignore=set(options.ignore),
        measure=options.measure)
    if sys.stderr.isatty():  # progress on stderr, only to a terminal: stdout stays the document
        from rich.console import Console

        with Console(stderr=True).status("fleet check…", spinner="dots") as status:
            run_options.progress = status.update
            found = fleet.run(run_options)
    else:
        found = fleet.run(run_options)
    return Result("fleet check", "fleet", found, exit_code=found.exit_code(), options={"verbose": options.verbose})


def register(app: typer.Typer) -> None:
    fleet_app = typer.Typer(help="Check the nodes of a multi-node launch together (the pre-launch gate).",
                            no_args_is_help=True)
    fleet_app.command("check")(check)
    app.add_typer(fleet_app, name="fleet")


def check(
    ray: str | None = typer.Option(None, "--ray", metavar="ADDRESS", help="Check every live node of this Ray cluster (e.g. 10.0.0.1:6379, or auto)."),
    hosts: str | None = typer.Option(None, "--hosts", metavar="A,B,...", help="Check these ssh destinations (your ssh config and keys)."),
    inventory: Path | None = typer.Option(None, "--inventory", metavar="FILE", help="Nodes from a file: one ssh destination per line, TOML with node tables, a sparkrun cluster (.yaml, or sparkrun:NAME) or eugr's .env with CLUSTER_NODES (docs/fleet.md)."),
    ssh_config: Path | None = typer.Option(None, "--ssh-config", metavar="FILE", help="An ssh config file to use instead of ~/.ssh/config (ssh -F)."),
    python: str | None = typer.Option(None, "--remote-python", metavar="PATH", help="The serving interpreter on every node (default: $VIRTUAL_ENV's, else python3; Ray: the worker's)."),
    container: str | None = typer.Option(None, "--container", metavar="NAME", help="Probe inside this running container on every node."),
    runtime: str = typer.Option("docker", "--runtime", help="Container CLI on the nodes: docker or podman."),
    node_timeout: float = typer.Option(60.0, "--node-timeout", help="Seconds each node may take; a node past it is reported, the rest go on."),
    arch: str | None = arch_option("Judge every node as this GPU arch (default: detected per node)."),
    fail_on: str = typer.Option("error", "--fail-on", help="Lowest severity of a node's finding that refuses the launch: info | warn | error."),
    ignore: list[str] = typer.Option([], "--ignore", help="Entry id to ignore (repeatable)."),
    matrix_path: Path | None = matrix_option(),
    fmt: str = format_option(*FORMATS),
    output_name: str | None = output_option(),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show benign differences and every finding."),
    measure: bool = typer.Option(False, "--measure", help="Also measure every link: ib_write_bw per rail, nccl-tests all_reduce_perf up to 1 GiB (bounded; absent tools are reported)."),
) -> None:
    """Probe every node in parallel, judge each against the matrix, compare them N-way. Exit code gates the launch."""
    from sparkdoctor.emit import emit

    options = FleetCommand(ray=ray, hosts=hosts, inventory=inventory, ssh_config=ssh_config, python=python,
                           container=container, runtime=runtime, node_timeout=node_timeout, arch=arch, fail_on=fail_on,
                           ignore=list(ignore), matrix=matrix_path, fmt=Format(fmt),
                           output=output_path("--output", output_name), verbose=verbose, measure=measure)
    raise typer.Exit(emit(run(options), options.fmt, options.output))
