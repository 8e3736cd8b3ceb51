"""The options several verbs share, declared once: `--format`, the target (`--python`, `--container`,
`--container-python`, `--runtime`), `--matrix`, `--ledger`, `--arch`, `--output`, `--set`.

Each factory returns a typer option with one wording of its help text. `format_option` also records what
was asked for (sparkdoctor.emit.REQUESTED), so that a command that fails before it has a result still
answers `--format json` with a JSON document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from sparkdoctor.result import Format

PYTHON_HELP = "Interpreter (or venv folder) of the target environment. Default: $VIRTUAL_ENV, else this interpreter."
RUNTIME_HELP = ("Container CLI for --container: docker or podman (default: $SPARKDOCTOR_CONTAINER_RUNTIME, else docker, "
                "else podman).")
MATRIX_HELP = "Matrix folder or file to use instead of the bundled one."
LEDGER_HELP = "Ledger file (default: the state folder's ledger.sqlite)."
ARCH_HELP = "Evaluate as if the target ran on this GPU arch (e.g. sm_121a): for CI builders and image builds with no GB10."


def command_of(ctx: Any) -> str:
    """The verb a click context belongs to, without the program name: "check", "matrix list"."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.append(str(ctx.info_name))
        ctx = ctx.parent
    return " ".join(reversed(names)) or "sparkdoctor"


def format_option(*formats: Format, default: Format = Format.console, help: str | None = None) -> Any:
    """`--format/-f`, choosing among `formats` (a usage error, exit 2, names the choices)."""
    from sparkdoctor.emit import note_format

    allowed = tuple(formats)

    def callback(ctx: typer.Context, value: str) -> Format:
        return note_format(command_of(ctx), value, allowed)

    text = help or " | ".join(f.value for f in allowed)
    return typer.Option(default.value, "--format", "-f", help=text, callback=callback)


def python_option(help: str = PYTHON_HELP) -> Any:
    return typer.Option(None, "--python", help=help)


def container_option(help: str = "A running container (docker or podman) whose serving stack to use; the GPU, driver "
                                  "and health are the host's.") -> Any:
    return typer.Option(None, "--container", metavar="NAME", help=help)


def container_python_option() -> Any:
    return typer.Option(None, "--container-python", metavar="PATH",
                        help="The interpreter inside the container (default: the one holding vLLM, else the container's python3).")


def runtime_option() -> Any:
    return typer.Option(None, "--runtime", help=RUNTIME_HELP)


def matrix_option(help: str = MATRIX_HELP) -> Any:
    return typer.Option(None, "--matrix", help=help)


def ledger_option() -> Any:
    return typer.Option(None, "--ledger", help=LEDGER_HELP)


def arch_option(help: str = ARCH_HELP) -> Any:
    return typer.Option(None, "--arch", help=help)


def output_option(help: str = "Write the document here (atomically) instead of stdout.") -> Any:
    """Taken as text, not Path: typer turns '' into Path('.'), and '' deserves its own answer (output_path)."""
    return typer.Option(None, "--output", "-o", metavar="PATH", help=help)


def output_path(option: str, name: str | None) -> Path | None:
    """The file `--output NAME` (or `--save-facts NAME`) names, refused in one line (exit 2) when it cannot become
    a regular file, before any work starts."""
    from sparkdoctor.errors import UsageError
    from sparkdoctor.files import OutputError, target_of

    if name is None:
        return None
    if option == "--output":  # a failure is not written over the file, nor onto a stdout nobody reads
        from sparkdoctor.emit import REQUESTED

        REQUESTED.output = Path(name)
    if not name:
        raise UsageError(f"{option} '': give a file name")
    try:
        target_of(Path(name))
    except OutputError as exc:
        raise UsageError(f"{option} {name}: {exc}") from None
    return Path(name)


def parse_sets(values: list[str] | None) -> dict[str, str]:
    """--set key=value (repeatable) into a dict; UsageError on a value without '='."""
    from sparkdoctor.errors import UsageError

    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: write key=value (e.g. --set port=9000 or --set env.NAME=value)")
        out[key.strip()] = value
    return out
