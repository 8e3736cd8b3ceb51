"""The `sparkdoctor` command: parse, call, render. Thin on purpose.

Errors reach the user as one line on stderr and an exit code from sparkdoctor/exitcodes.py.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from sparkdoctor import __version__, check_target, proc
from sparkdoctor.exitcodes import EXIT_USAGE
from sparkdoctor.cli_support import Fatal, _err, _warn
from sparkdoctor.commands import LazyVerbs

app = typer.Typer(
    cls=LazyVerbs,  # fix, bench, ... load on first use: sparkdoctor/commands/__init__.py
    name="sparkdoctor",
    help="Toolchain doctor for LLM serving on NVIDIA DGX Spark (GB10, sm_121a).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
matrix_app = typer.Typer(help="List, show, validate and verify the knowledge base.", no_args_is_help=True)
app.add_typer(matrix_app, name="matrix")
from sparkdoctor.commands import matrix_tracking  # noqa: E402  (matrix track / matrix update)

matrix_tracking.register(matrix_app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sparkdoctor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    pass


DEFAULT_TIMEOUT = 120.0


@app.command()
def check(
    python: Optional[str] = typer.Option(None, "--python", help="Interpreter (or venv folder) of the target environment. Default: $VIRTUAL_ENV, else this interpreter."),
    container: Optional[str] = typer.Option(None, "--container", metavar="NAME", help="A running container (docker or podman) whose serving stack to check; the GPU, driver and health are the host's."),
    container_python: Optional[str] = typer.Option(None, "--container-python", metavar="PATH", help="The interpreter inside the container (default: the one holding vLLM, else the container's python3)."),
    runtime: Optional[str] = typer.Option(None, "--runtime", help="Container CLI for --container: docker or podman (default: $SPARKDOCTOR_CONTAINER_RUNTIME, else docker, else podman)."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Evaluate as if the target ran on this GPU arch (e.g. sm_121a): for CI builders and image builds with no GB10."),
    facts_file: Optional[Path] = typer.Option(None, "--facts", help="Evaluate a saved snapshot instead of probing a live target."),
    save_facts_name: Optional[str] = typer.Option(None, "--save-facts", metavar="PATH", help="Write the collected Facts snapshot (JSON) to this file."),
    fmt: str = typer.Option("console", "--format", "-f", help="console | json | junit | markdown"),
    output_name: Optional[str] = typer.Option(None, "--output", "-o", metavar="PATH", help="Write the report here instead of stdout."),
    fail_on: Optional[str] = typer.Option(None, "--fail-on", help="Lowest severity that fails the check: info | warn | error (default error)."),
    strict: bool = typer.Option(False, "--strict", help="Fail on warnings too (same as --fail-on warn)."),
    ignore: List[str] = typer.Option([], "--ignore", help="Entry id to ignore (repeatable)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Config file with permanent ignores (default ./sparkdoctor.toml, then the user config)."),
    constraints: List[Path] = typer.Option([], "--constraints", "-c", help="Constraints/requirements file whose pins to check (repeatable)."),
    matrix_path: Optional[Path] = typer.Option(None, "--matrix", help="Matrix folder or file to use instead of the bundled one."),
    kernels: bool = typer.Option(True, "--kernels/--no-kernels", help="Run the kernel compile probes (--no-kernels: the fast path)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore cached probe results and file hashes."),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", help="Seconds the whole run may take: every collector and probe shares this budget."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show clear and unevaluated entries and all facts."),
) -> None:
    """Probe the target environment, match it against the matrix, report findings. Exit code gates CI."""
    # Taken as text, not Path: typer turns '' into Path('.'), and '' deserves its own answer.
    output, save_facts = _file_option("--output", output_name), _file_option("--save-facts", save_facts_name)
    _refuse_bad_options(timeout, python, output, save_facts, fmt, fail_on, arch, constraints)
    check_target.refuse_bad_target_options(python, container, container_python, facts_file is not None)
    deadline = time.monotonic() + timeout
    proc.set_deadline(deadline)  # every subprocess of this run, whoever starts it, ends by then
    try:
        prestarted = {}
        if facts_file is None:
            # The target probe is the long pole of a warm check: the entry point started it before
            # typer was imported; check_target reuses it if it probes what typer parsed.
            from sparkdoctor.collect import targetenv

            target = check_target.resolve_target(python, container, container_python, runtime)
            prestarted[targetenv.PRESTART_KEY] = check_target.start_target_probe(target, no_cache)
        else:
            check_target.drop_early_probe()

        from sparkdoctor.check import CheckOptions, apply_arch_override, mark_not_live
        from sparkdoctor.config import ConfigError, load_config
        from sparkdoctor.facts import Facts, FactsError
        from sparkdoctor.findings import build_report
        from sparkdoctor.matrix import MatrixError, load

        try:
            cfg = load_config(config)
            matrix = load(matrix_path)
        except (ConfigError, MatrixError) as exc:
            raise Fatal(str(exc)) from None
        threshold = "warn" if strict else (fail_on or cfg.fail_on or "error")

        if facts_file is not None:
            if python:
                raise Fatal("--facts and --python exclude each other: a snapshot is already of one target")
            try:
                facts = Facts.load(facts_file)
            except FactsError as exc:
                raise Fatal(str(exc)) from None
            apply_arch_override(facts, arch)
            mark_not_live(facts)
        else:
            options = CheckOptions(
                arch=arch,
                constraint_files=list(constraints),
                kernels=kernels,
                use_cache=not no_cache,
                deadline=deadline,
                prestarted=prestarted,
            )
            facts = _collect_with_progress(target, options)
            if save_facts is not None:
                try:
                    facts.save(save_facts)
                except OSError as exc:
                    raise Fatal(f"--save-facts {save_facts}: {exc.strerror or exc}") from None

        _warn_unknown_ignores(matrix, ignore, cfg)
        report = build_report(facts, matrix, fail_on=threshold, ignore=set(ignore) | set(cfg.ignore))
        _emit(report, fmt, output, verbose)
        raise typer.Exit(report.exit_code())
    finally:  # the budget is this run's: a caller in the same process (tests, a library) is not bound by it
        proc.set_deadline(None)


def _file_option(option: str, name: Optional[str]) -> Optional[Path]:
    if name is None:
        return None
    if not name:
        raise Fatal(f"{option} '': give a file name")
    return Path(name)


def _refuse_bad_options(timeout: float, python: Optional[str], output: Optional[Path], save_facts: Optional[Path],
                        fmt: str, fail_on: Optional[str], arch: Optional[str], constraints: List[Path]) -> None:
    """Every usage error of `check`, before a single probe starts (exit 2, one line)."""
    from sparkdoctor.render import FORMATS

    if not (math.isfinite(timeout) and timeout > 0):
        raise Fatal(f"--timeout {timeout}: give a number of seconds above 0")
    if python is not None and not python.strip():
        raise Fatal("--python '': give an interpreter or a venv folder (leave --python out for the default)")
    for option, path in (("--output", output), ("--save-facts", save_facts)):
        if path is not None:
            _check_writable(option, path)
    if output is None and sys.stdout is None:
        raise Fatal("stdout is closed: nowhere to write the report (use -o FILE)")
    if fmt not in FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(FORMATS)}")
    if fail_on is not None and fail_on not in ("info", "warn", "error"):
        raise Fatal(f"--fail-on {fail_on}: choose one of info, warn, error")
    if arch is not None:
        from sparkdoctor.arch import real_arch_problem

        problem = real_arch_problem(arch)
        if problem:
            raise Fatal(f"--arch {arch!r}: {problem}")
    for c in constraints:
        if not c.is_file():
            raise Fatal(f"--constraints {c}: no such file")


def _collect_with_progress(target, options):
    from sparkdoctor.check import collect_facts

    # Progress goes to stderr, and only to a terminal: stdout stays the document.
    if not sys.stderr.isatty():
        return collect_facts(target, options)
    from rich.console import Console

    err = Console(stderr=True)
    finished: list[str] = []
    with err.status("probing the target…", spinner="dots") as status:

        def progress(name: str) -> None:
            finished.append(name)
            status.update(f"probing the target… ({', '.join(finished)} done)")

        options.progress = progress
        return collect_facts(target, options)


def _check_writable(option: str, path: Path) -> None:
    """Refuse a path that is not (or cannot become) a regular file before spending time on probes."""
    from sparkdoctor.files import OutputError, target_of

    try:
        target_of(path)
    except OutputError as exc:
        raise Fatal(f"{option} {str(path) or repr('')}: {exc}") from None


def _warn_unknown_ignores(matrix, ignore: List[str], cfg) -> None:
    """An ignore that names no entry ignores nothing: say so (a warning, not an error, so a config
    shared by boxes on different matrix versions keeps working). probe-<id> findings come from the
    engine, not the matrix, and are always accepted."""
    known = {e.id for e in matrix.entries}
    for source, ids in (("--ignore", ignore), (f"{cfg.path}: ignore", list(cfg.ignore))):
        for entry_id in ids:
            if entry_id not in known and not entry_id.startswith("probe-"):
                _warn(f"{source} {entry_id!r}: no matrix entry has this id; it ignores nothing (see `sparkdoctor matrix list`)")


def _emit(report, fmt: str, output: Optional[Path], verbose: bool) -> None:
    from sparkdoctor.output import OutputError, write_report

    try:
        write_report(report, fmt, output, verbose)
    except OutputError as exc:
        raise Fatal(str(exc)) from None


# ---- matrix ---------------------------------------------------------------------------------------


@matrix_app.command("list")
def matrix_list(
    matrix_path: Optional[Path] = typer.Option(None, "--matrix", help="Matrix folder or file (default: bundled)."),
    fmt: str = typer.Option("console", "--format", "-f", help="console | json"),
) -> None:
    """List every entry and known-good stack."""
    from sparkdoctor.render.matrix import list_matrix

    _check_matrix_format(fmt)
    list_matrix(_load_matrix(matrix_path), fmt)


@matrix_app.command("show")
def matrix_show(
    entry_id: str = typer.Argument(..., help="Entry or stack id."),
    matrix_path: Optional[Path] = typer.Option(None, "--matrix"),
    fmt: str = typer.Option("console", "--format", "-f", help="console | json"),
) -> None:
    """Show one entry (or stack) in full."""
    from sparkdoctor.render.matrix import show_item

    _check_matrix_format(fmt)
    m = _load_matrix(matrix_path)
    item = m.get(entry_id) or next((s for s in m.stacks if s.id == entry_id), None)
    if item is None:
        raise Fatal(f"no matrix entry or stack with id {entry_id!r} (try `sparkdoctor matrix list`)")
    show_item(item, fmt)


@matrix_app.command("validate")
def matrix_validate(path: Optional[Path] = typer.Argument(None, help="Matrix folder or file (default: bundled).")) -> None:
    """Check matrix files against the schema, probe ids and verify tables; errors name the file, entry and field."""
    m = _load_matrix(path)  # the same validation as `check --matrix` and `matrix verify`
    levels = ", ".join(f"{sum(1 for e in m.entries if e.evidence == lv)} {lv}" for lv in ("reproduced", "checked", "reported"))
    typer.echo(f"ok: {_n(len(m.entries), 'entry', 'entries')}, {_n(len(m.stacks), 'known-good stack')} in {_n(len(m.files), 'file')} · evidence: {levels} · matrix: {m.source}")


@matrix_app.command("verify")
def matrix_verify(
    entry_id: Optional[str] = typer.Argument(None, help="Entry id (default: every entry with a verify or files table)."),
    keep: bool = typer.Option(False, "--keep", help="Keep the scratch environments (reused by the next run)."),
    matrix_path: Optional[Path] = typer.Option(None, "--matrix", help="Matrix folder or file (default: bundled)."),
    fmt: str = typer.Option("console", "--format", "-f", help="console | json"),
    kind: str = typer.Option("all", "--kind", help="all | installs (probe in scratch venvs) | files (released wheels)."),
    bisect_id: Optional[str] = typer.Option(None, "--bisect", metavar="ENTRY", help="Walk the released versions to find where ENTRY's file checks stop holding."),
    latest: bool = typer.Option(False, "--latest", help="Run the file checks and verify tables on the newest releases."),
    bounds: bool = typer.Option(False, "--bounds", help="Bracket every version bound with its file checks on released files (read remotely)."),
    stacks: bool = typer.Option(False, "--stacks", help="Resolve every known-good stack for linux aarch64 with a pip dry run (ENTRY: a stack id)."),
) -> None:
    """Prove entries: install affected/fixed versions and run the probe; read their released wheels.
    Exit 0: all confirmed; 1: an entry is contradicted (or its bound differs); 2: could not build, download or probe."""
    from sparkdoctor.verify.command import run_verify

    raise typer.Exit(run_verify(entry_id, keep, matrix_path, fmt, kind, bisect_id, latest, bounds, stacks))


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _check_matrix_format(fmt: str) -> None:
    from sparkdoctor.render.matrix import MATRIX_FORMATS

    if fmt not in MATRIX_FORMATS:
        raise Fatal(f"--format {fmt}: choose one of {', '.join(MATRIX_FORMATS)}")


def _load_matrix(path: Optional[Path]):
    from sparkdoctor.matrix import MatrixError, load

    try:
        return load(path)
    except MatrixError as exc:
        raise Fatal(str(exc)) from None


def main() -> None:
    """Console entry point: every failure is one line and a documented exit code."""
    debug = bool(os.environ.get("SPARKDOCTOR_DEBUG"))
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except Fatal as exc:
        _err(str(exc))
        sys.exit(exc.code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except (KeyboardInterrupt, proc.Interrupted) as exc:
        code, why = proc.interrupted(exc)
        _err(why)
        sys.exit(code)
    except Exception as exc:  # click usage errors and real bugs alike get one line
        # click's errors (vendored inside typer in recent versions) carry format_message();
        # match by behaviour rather than by a private import path.
        if type(exc).__name__ == "Abort":
            _err("aborted")
            sys.exit(EXIT_USAGE)
        format_message = getattr(exc, "format_message", None)
        if callable(format_message):
            message = format_message()
            if message:  # empty: bare `sparkdoctor` (or `matrix`), whose help is already printed
                _err(message)
            sys.exit(EXIT_USAGE)
        if debug:
            raise
        _err(f"internal error: {type(exc).__name__}: {exc} (set SPARKDOCTOR_DEBUG=1 for the traceback)")
        sys.exit(EXIT_USAGE)
