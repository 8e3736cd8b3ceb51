"""`sparkdoctor whatif SPEC [SPEC ...]`: what an upgrade would do to this box, before it is installed.

A verb of its own (not `check --upgrade`): it needs the registry and a dry-run resolution, check
needs neither, and its exit code gates an upgrade rather than a deploy. Pipeline: sparkdoctor/whatif/.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from sparkdoctor.commands.options import (
    NAMES_A_FILE,
    ContainerPython,
    Fmt,
    Output,
    Parsed,
    format_option,
    refuse_bad_arch,
    refuse_unwritable_output,
    verb,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.views.whatif import VIEW
from sparkdoctor.whatif.judge import WhatIf

MAX_SPEC_CHARS = 1000
DEFAULT_TIMEOUT = 600.0  # seconds for the whole run: a cold vLLM upgrade took 31 s here, --probe compiles too
FORMATS = VIEW.formats
SEVERITIES = ("error", "warn", "info")


@dataclass
class WhatifCommand:
    specs: Annotated[list[str], typer.Argument(help="Requirements to upgrade to, as pip takes them (vllm==0.33.0, 'nvidia-cutlass-dsl[cu13]==4.5.2')."),
                     Parsed(default=...)] = field(default_factory=list)
    python: Annotated[str | None, typer.Option("--python", help="The target's interpreter (default: $VIRTUAL_ENV, then this one)."), NAMES_A_FILE] = None
    container: Annotated[str | None, typer.Option("--container", metavar="NAME", help="A running container whose environment to judge (its own pip resolves).")] = None
    container_python: ContainerPython = None
    facts_file: Annotated[Path | None, typer.Option("--facts", help="Today's Facts from a snapshot instead of probing the target.")] = None
    matrix: Annotated[Path | None, typer.Option("--matrix", help="Matrix folder or file (default: installed, else bundled).")] = None
    arch: Annotated[str | None, typer.Option("--arch", help="Judge as if on this GPU arch (e.g. sm_121a).")] = None
    fail_on: Annotated[str, typer.Option("--fail-on", help="Exit 1 when the upgrade introduces a finding at or above: error | warn | info")] = "error"
    read: Annotated[bool, typer.Option("--no-read", help="Do not read the new releases' files (capabilities stay today's, said)."),
                    Parsed(make=operator.not_, default=False)] = True
    fmt: Annotated[Fmt, format_option(*FORMATS)] = Format.console
    output: Output = None
    ledger: Annotated[Path | None, typer.Option("--ledger", help="The benchmark ledger whose conclusions the upgrade would make stale (default: the state folder's).")] = None
    probe: Annotated[bool, typer.Option("--probe", help="Compile the CuTe DSL probes with today's and the proposed cutlass-dsl set in a throwaway uv venv, and the PTX probes with each ptxas the upgrade moves (triton, nvidia-cuda-nvcc).")] = False
    recipe: Annotated[str | None, typer.Option("--recipe", help="Also judge this recipe today and after: flags and env vars the new vLLM drops, stale workarounds."), NAMES_A_FILE] = None
    no_deps: Annotated[bool, typer.Option("--no-deps", help="Resolve as `pip install --no-deps` would (for a target installed that way): only the named distributions change.")] = False
    allow_url: Annotated[bool, typer.Option("--allow-url", help="Also judge a wheel's URL requirement (name @ file:///x.whl); refused by default. An sdist or folder is never built.")] = False
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 also when a finding at or above --fail-on stays after the upgrade (box, recipe or mods), not only when one is introduced.")] = False
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds the whole run may take (the target's probe, pip's dry run, reading the new releases, --probe); past it: one line, exit 2.")] = DEFAULT_TIMEOUT

    def refuse_bad_options(self) -> None:
        """Every usage error of `whatif` (exit 2, one line), before the target is probed or pip runs."""
        from sparkdoctor.runlimit import refuse_bad_timeout
        from sparkdoctor.targets.choose import refuse_bad_target_options

        Format.parse(self.fmt, FORMATS)
        refuse_bad_timeout(self.timeout)
        if self.fail_on not in SEVERITIES:
            raise UsageError(f"--fail-on {self.fail_on}: choose one of {', '.join(SEVERITIES)}")
        if not self.specs:
            raise UsageError("give the requirements to upgrade to, as pip takes them (e.g. vllm==0.33.0)")
        for spec in self.specs:  # never a 100,000-character name sent to pip and the index
            if len(spec) > MAX_SPEC_CHARS or not spec.isprintable():
                from sparkdoctor.text import one_line

                raise UsageError(f"{one_line(spec[:80])}: not a requirement as pip takes them (e.g. vllm==0.33.0)")
        from sparkdoctor.whatif.resolve import ResolveError, check_specs

        try:
            check_specs(self.specs, self.allow_url)
        except ResolveError as exc:
            raise UsageError(str(exc)) from None
        refuse_bad_arch(self.arch)
        if self.ledger is not None and not self.ledger.exists():
            raise UsageError(f"ledger {self.ledger}: no such file")
        refuse_bad_target_options(self.python, self.container, self.container_python, self.facts_file is not None)
        refuse_unwritable_output(self.output)  # before pip's dry run (minutes for vLLM), not after


def run(options: WhatifCommand) -> Result[WhatIf]:
    """The upgrade judged; exit 1 when it introduces a finding at or above --fail-on. A matrix, snapshot, target
    or resolution that fails says itself (exit 2, or 3 for a target that cannot be probed); so does a run past --timeout
    (OutOfTime, exit 2: every process it started is stopped)."""
    from sparkdoctor.exitcodes import EXIT_FINDINGS, EXIT_OK
    from sparkdoctor.progress import progress_line
    from sparkdoctor.runlimit import run_limit
    from sparkdoctor.whatif.upgrade import UpgradeQuestion, judge_upgrade

    options.refuse_bad_options()
    with run_limit(options.timeout, "whatif"), progress_line(command="whatif") as progress:
        whatif = judge_upgrade(UpgradeQuestion(
            list(options.specs), python=options.python, container=options.container, container_python=options.container_python,
            facts_file=options.facts_file, matrix=options.matrix, arch=options.arch, read=options.read, recipe=options.recipe,
            ledger=options.ledger, probe=options.probe, no_deps=options.no_deps, allow_url=options.allow_url), progress)
    failed = whatif.gate(options.fail_on) or (options.strict and whatif.remaining(options.fail_on))
    return Result("whatif", "whatif", whatif, exit_code=EXIT_FINDINGS if failed else EXIT_OK)


def register(app: typer.Typer) -> None:
    app.command("whatif")(verb(WhatifCommand, run, """
        Resolve an upgrade with the target's pip (dry run), build the Facts it would give (versions, cutlass-dsl build, capabilities read from the new releases' files) and diff the findings against today.

        Exit 0: nothing at or above --fail-on introduced; 1: introduced (--strict: or left in place); 2: cannot resolve / bad input, or --timeout ran out; 3: the target cannot be probed; 5: the ledger cannot be read; 130: interrupted."""))
