"""`sparkdoctor fleet check`: every node of a multi-node launch checked and compared; the exit code is the
pre-launch gate (docs/fleet.md).

Exit 0: go (every node answered, no risky difference, no finding at or above --fail-on); 1: no-go (a risky
difference between nodes, or a node's finding); 2: usage (bad options or inventory, Ray not installed);
3: no-go, a node (or the Ray cluster) could not be checked: the others are still judged and compared.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import List, Optional

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format

FORMATS = ("console", "json")


def register(app: typer.Typer) -> None:
    fleet_app = typer.Typer(help="Check the nodes of a multi-node launch together (the pre-launch gate).",
                            no_args_is_help=True)
    fleet_app.command("check")(check)
    app.add_typer(fleet_app, name="fleet")


def check(
    ray: Optional[str] = typer.Option(None, "--ray", metavar="ADDRESS", help="Check every live node of this Ray cluster (e.g. 10.0.0.1:6379, or auto)."),
    hosts: Optional[str] = typer.Option(None, "--hosts", metavar="A,B,...", help="Check these ssh destinations (your ssh config and keys)."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", metavar="FILE", help="Nodes from a file: one ssh destination per line, or TOML with node tables (docs/fleet.md)."),
    ssh_config: Optional[Path] = typer.Option(None, "--ssh-config", metavar="FILE", help="An ssh config file to use instead of ~/.ssh/config (ssh -F)."),
    python: Optional[str] = typer.Option(None, "--remote-python", metavar="PATH", help="The serving interpreter on every node (default: $VIRTUAL_ENV's, else python3; Ray: the worker's)."),
    container: Optional[str] = typer.Option(None, "--container", metavar="NAME", help="Probe inside this running container on every node."),
    runtime: str = typer.Option("docker", "--runtime", help="Container CLI on the nodes: docker or podman."),
    node_timeout: float = typer.Option(60.0, "--node-timeout", help="Seconds each node may take; a node past it is reported, the rest go on."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Judge every node as this GPU arch (default: detected per node)."),
    fail_on: str = typer.Option("error", "--fail-on", help="Lowest severity of a node's finding that refuses the launch: info | warn | error."),
    ignore: List[str] = typer.Option([], "--ignore", help="Entry id to ignore (repeatable)."),
    matrix_path: Optional[Path] = typer.Option(None, "--matrix", help="Matrix folder or file to use instead of the bundled one."),
    fmt: str = format_option(Format.console, Format.json),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show benign differences and every finding."),
) -> None:
    """Probe every node in parallel, judge each against the matrix, compare them N-way. Exit code gates the launch."""
    from sparkdoctor.fleet import FleetOptions, run
    from sparkdoctor.fleet.inventory import load_inventory, parse_hosts

    if fmt not in FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    if fail_on not in ("info", "warn", "error"):
        raise Fatal(f"--fail-on {fail_on}: choose one of info, warn, error")
    if not (math.isfinite(node_timeout) and node_timeout > 0):
        raise Fatal(f"--node-timeout {node_timeout}: give a number of seconds above 0")
    if runtime not in ("docker", "podman"):
        raise Fatal(f"--runtime {runtime}: choose docker or podman")
    chosen = [name for name, value in (("--ray", ray), ("--hosts", hosts), ("--inventory", inventory)) if value is not None]
    if len(chosen) != 1:
        raise Fatal("give exactly one of --ray ADDRESS, --hosts A,B,... or --inventory FILE"
                    + (f" (got {' and '.join(chosen)})" if chosen else ""))
    if ssh_config is not None and ray is not None:
        raise Fatal("--ssh-config is for --hosts and --inventory; Ray reaches its nodes itself")
    if ssh_config is not None and not ssh_config.is_file():
        raise Fatal(f"--ssh-config {ssh_config}: no such file")
    if arch is not None:
        from sparkdoctor.arch import real_arch_problem

        problem = real_arch_problem(arch)
        if problem:
            raise Fatal(f"--arch {arch!r}: {problem}")
    # an InventoryError or MatrixError (2) and a FleetError (3 unless it says otherwise) end the command by themselves
    if hosts is not None:
        nodes = parse_hosts(hosts, python, container, runtime)
    elif inventory is not None:
        nodes = load_inventory(inventory, python, container, runtime)
    else:
        nodes = []
    options = FleetOptions(ray_address=ray, nodes=nodes, ssh_config=str(ssh_config) if ssh_config else None,
                           python=python, container=container, runtime=runtime, node_timeout=node_timeout, arch=arch,
                           matrix_path=matrix_path, fail_on=fail_on, ignore=set(ignore))
    result = run(options)
    if sys.stdout is None:
        raise Fatal("stdout is closed: nowhere to write the result")
    from sparkdoctor.emit import emit_console, emit_json
    from sparkdoctor.fleet.render import fleet_json, render_console

    if fmt == "json":
        emit_json("fleet check", "fleet", fleet_json(result, verbose), result.exit_code())
    else:
        from rich.console import Console

        emit_console(lambda console: render_console(result, console, verbose), Console(soft_wrap=True, highlight=False))
    sys.stdout.flush()
    raise typer.Exit(result.exit_code())
