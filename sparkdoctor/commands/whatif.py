"""`sparkdoctor whatif SPEC [SPEC ...]`: what an upgrade would do to this box, before it is installed.

A verb of its own (not `check --upgrade`): it needs the registry and a dry-run resolution, check
needs neither, and its exit code gates an upgrade rather than a deploy. Pipeline: sparkdoctor/whatif/.
"""

from __future__ import annotations

from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format


def register(app: typer.Typer) -> None:
    @app.command("whatif")
    def whatif(
        specs: list[str] = typer.Argument(..., help="Requirements to upgrade to, as pip takes them (vllm==0.33.0, 'nvidia-cutlass-dsl[cu13]==4.5.2')."),
        python: str | None = typer.Option(None, "--python", help="The target's interpreter (default: $VIRTUAL_ENV, then this one)."),
        container: str | None = typer.Option(None, "--container", help="A running container whose environment to judge (its own pip resolves)."),
        container_python: str | None = typer.Option(None, "--container-python", help="The interpreter inside --container."),
        facts_file: Path | None = typer.Option(None, "--facts", help="Today's Facts from a snapshot instead of probing the target."),
        matrix_path: Path | None = typer.Option(None, "--matrix", help="Matrix folder or file (default: installed, else bundled)."),
        arch: str | None = typer.Option(None, "--arch", help="Judge as if on this GPU arch (e.g. sm_121a)."),
        fail_on: str = typer.Option("error", "--fail-on", help="Exit 1 when the upgrade introduces a finding at or above: error | warn | info"),
        no_read: bool = typer.Option(False, "--no-read", help="Do not read the new releases' files (capabilities stay today's, said)."),
        fmt: str = format_option(Format.console, Format.json),
        ledger: Path | None = typer.Option(None, "--ledger", help="The benchmark ledger whose conclusions the upgrade would make stale (default: the state folder's)."),
        probe: bool = typer.Option(False, "--probe", help="Compile the CuTe DSL probes with today's and the proposed cutlass-dsl set in a throwaway uv venv, and the PTX probes with each ptxas the upgrade moves (triton, nvidia-cuda-nvcc)."),
        recipe: str | None = typer.Option(None, "--recipe", help="Also judge this recipe today and after: flags and env vars the new vLLM drops, stale workarounds."),
        no_deps: bool = typer.Option(False, "--no-deps", help="Resolve as `pip install --no-deps` would (for a target installed that way): only the named distributions change."),
    ) -> None:
        """Resolve an upgrade with the target's pip (dry run), build the Facts it would give (versions,
        cutlass-dsl build, capabilities read from the new releases' files) and diff the findings against today.
        Exit 0: nothing at or above --fail-on introduced; 1: introduced; 2: cannot resolve / bad input."""
        from sparkdoctor.whatif.command import run_whatif

        if fmt not in ("console", "json"):
            raise Fatal(f"--format {fmt}: choose one of console, json")
        if fail_on not in ("error", "warn", "info"):
            raise Fatal(f"--fail-on {fail_on}: choose one of error, warn, info")
        raise typer.Exit(run_whatif(specs, python, facts_file, matrix_path, arch, fail_on, not no_read, fmt, recipe, ledger, container, container_python, probe,
                                    no_deps))
