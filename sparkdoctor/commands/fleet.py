"""`sparkdoctor fleet check`: every node of a multi-node launch checked and compared; the exit code is the
pre-launch gate (docs/fleet.md). options -> run -> Result("fleet check", "fleet") -> emit.

Exit 0: go (every node answered, no risky difference, no finding at or above --fail-on); 1: no-go (a risky
difference between nodes, or a node's finding); 2: usage (bad options or inventory, Ray not installed);
3: no-go, a node (or the Ray cluster) could not be checked: the others are still judged and compared.
With --recipe the launch is also sized and judged on every node's memory: a node where it does not fit is exit 1.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from sparkdoctor.commands.options import (
    NAMES_A_FILE,
    Fmt,
    Ignore,
    Matrix,
    Output,
    Sets,
    format_option,
    parse_sets,
    refuse_bad_arch,
    refuse_bad_seconds,
    verb,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.fleet import FleetResult
from sparkdoctor.result import Format, Result
from sparkdoctor.views.fleet import VIEW

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.status import Status

    from sparkdoctor.fleet.transport import Node

FORMATS = VIEW.formats


@dataclass
class FleetCommand:
    ray: Annotated[str | None, typer.Option("--ray", metavar="ADDRESS", help="Check every live node of this Ray cluster (e.g. 10.0.0.1:6379, or auto).")] = None
    hosts: Annotated[str | None, typer.Option("--hosts", metavar="A,B,...", help="Check these ssh destinations (your ssh config and keys); `local` is this machine, without ssh.")] = None
    inventory: Annotated[Path | None, typer.Option("--inventory", metavar="FILE", help="Nodes from a file: one ssh destination per line, TOML with node tables, a sparkrun cluster (.yaml, or sparkrun:NAME) or eugr's .env with CLUSTER_NODES (docs/fleet.md).")] = None
    ssh_config: Annotated[Path | None, typer.Option("--ssh-config", metavar="FILE", help="An ssh config file to use instead of ~/.ssh/config (ssh -F).")] = None
    python: Annotated[str | None, typer.Option("--remote-python", metavar="PATH", help="The serving interpreter on every node (default: $VIRTUAL_ENV's, else python3; Ray: the worker's).")] = None
    container: Annotated[str | None, typer.Option("--container", metavar="NAME", help="Probe inside this running container on every node.")] = None
    runtime: Annotated[str, typer.Option("--runtime", help="Container CLI on the nodes: docker or podman.")] = "docker"
    node_timeout: Annotated[float, typer.Option("--node-timeout", help="Seconds each node may take; a node past it is reported, the rest go on.")] = 60.0
    arch: Annotated[str | None, typer.Option("--arch", help="Judge every node as this GPU arch (default: detected per node).")] = None
    fail_on: Annotated[str, typer.Option("--fail-on", help="Lowest severity of a node's finding that refuses the launch: info | warn | error.")] = "error"
    ignore: Ignore = field(default_factory=list)
    matrix: Matrix = None
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show benign differences and every finding.")] = False
    measure: Annotated[bool, typer.Option("--measure", help="Also measure every link: ib_write_bw per rail, nccl-tests all_reduce_perf across the nodes and over the GPUs of each node of several, up to 1 GiB (bounded; absent tools are reported).")] = False
    # --recipe, --model, --set: the memory preflight per node (docs/memory.md, memory/pernode.py); recipe check's names
    recipe: Annotated[str | None, typer.Option("--recipe", metavar="FILE", help="Size this recipe's launch (a file, or a shipped recipe's name) and judge it on every node's memory now."), NAMES_A_FILE] = None
    model: Annotated[str | None, typer.Option("--model", help="The checkpoint the launch loads, read here (default: the recipe's model); every node serves the same one.")] = None
    sets: Sets = field(default_factory=list)

    def refuse_bad_options(self) -> None:
        """Every usage error of `fleet check` (exit 2, one line), before a node is reached."""
        Format.parse(self.fmt, FORMATS)
        if self.fail_on not in ("info", "warn", "error"):
            raise UsageError(f"--fail-on {self.fail_on}: choose one of info, warn, error")
        refuse_bad_seconds("--node-timeout", self.node_timeout)
        if self.runtime not in ("docker", "podman"):
            raise UsageError(f"--runtime {self.runtime}: choose docker or podman")
        chosen = [name for name, value in (("--ray", self.ray), ("--hosts", self.hosts),
                                           ("--inventory", self.inventory)) if value is not None]
        if len(chosen) != 1:
            raise UsageError("give exactly one of --ray ADDRESS, --hosts A,B,... or --inventory FILE"
                             + (f" (got {' and '.join(chosen)})" if chosen else ""))
        if self.ssh_config is not None and self.ray is not None:
            raise UsageError("--ssh-config is for --hosts and --inventory; Ray reaches its nodes itself")
        if self.ssh_config is not None and not self.ssh_config.is_file():  # a FIFO would hold every ssh until its limit
            why = "not a regular file" if self.ssh_config.exists() else "no such file"
            raise UsageError(f"--ssh-config {self.ssh_config}: {why}")
        refuse_bad_arch(self.arch)
        if self.recipe is None and (self.model is not None or self.sets):
            raise UsageError("--model and --set size a launch: give its --recipe FILE too")


def run(options: FleetCommand) -> Result[FleetResult]:
    """Check the options (UsageError / InputError: one line, exit 2), run the fleet check, wrap its answer."""
    from sparkdoctor import fleet
    from sparkdoctor.fleet.inventory import load_inventory, parse_hosts

    nodes: list[Node] = []
    options.refuse_bad_options()
    if options.hosts is not None:
        nodes = parse_hosts(options.hosts, options.python, options.container, options.runtime)
    elif options.inventory is not None:
        nodes = load_inventory(options.inventory, options.python, options.container, options.runtime)
    memory_judge = None
    if options.recipe is not None:  # a bad recipe or model is one line before any node is reached
        import functools

        from sparkdoctor.memory.pernode import judge_fleet, size_launch

        memory_judge = functools.partial(judge_fleet, size_launch(options.recipe, parse_sets(options.sets), options.model))
    run_options = fleet.FleetOptions(
        ray_address=options.ray, nodes=nodes, ssh_config=str(options.ssh_config) if options.ssh_config else None,
        python=options.python, container=options.container, runtime=options.runtime, node_timeout=options.node_timeout,
        arch=options.arch, matrix_path=options.matrix, fail_on=options.fail_on, ignore=set(options.ignore),
        measure=options.measure, memory_judge=memory_judge)
    if sys.stderr.isatty():  # progress on stderr, only to a terminal: stdout stays the document
        from rich.console import Console

        with Console(stderr=True).status("fleet check…", spinner="dots") as status:
            run_options.progress = progress_to(status)
            found = fleet.run(run_options)
    else:
        found = fleet.run(run_options)
    return Result("fleet check", "fleet", found, exit_code=found.exit_code(), verbose=options.verbose)


def progress_to(status: Status) -> Callable[[str], None]:
    """status.update with the text as it is: a node's names (a netdev `eth[/x]`) are never rich markup."""
    return lambda text: status.update(escape(text))


def register(app: typer.Typer) -> None:
    fleet_app = typer.Typer(help="Check the nodes of a multi-node launch together (the pre-launch gate).",
                            no_args_is_help=True)
    fleet_app.command("check")(verb(FleetCommand, run, """
        Probe every node in parallel, judge each against the matrix, compare them N-way. Exit code gates the launch."""))
    app.add_typer(fleet_app, name="fleet")
