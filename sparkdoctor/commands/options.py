"""How a verb's options are declared: once, as the fields of its options dataclass (each carries its typer
metadata: `name: Annotated[type, typer.Option("--name", help=...)] = default`), and the options several verbs
share: `--format`, the target (`--python`, `--container`, `--container-python`, `--runtime`), `--matrix`,
`--ledger`, `--arch`, `--output`, `--set`.

A field that needs another wording of a shared option's help declares its own typer.Option. `format_option` also
records what was asked for (sparkdoctor.emit.REQUESTED), so that a command that fails before it has a result still
answers `--format json` with a JSON document.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import os
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import typer
from typer.models import ParameterInfo

from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Parsed:
    """A field the command line reads otherwise: as type `cli` (typer parses that type: its metavar, its errors;
    default: the field's), with `default` when given (default: the field's); `make`, when given, turns the parsed
    value into the field's once every option is parsed; `name`, when given, names the parameter."""

    cli: Any = None
    make: Callable[[Any], Any] | None = None
    default: Any = inspect.Parameter.empty  # `...`: required
    name: str | None = None  # the parameter's name, where it is not the field's (an argument's shows in --help)


class NamesAFile:
    """Marks a text (str) field that names a file the command reads (a recipe, a log, an interpreter): `-o` must not
    replace it. A Path field always names one; any other str field is text (a recipe or conclusion name, a model id),
    which may equal the output's name without being that file."""


NAMES_A_FILE = NamesAFile()


def _listed(values: list[T] | None) -> list[T]:
    return list(values or [])


MATRIX_HELP = "Matrix folder or file to use instead of the bundled one."


def command_of(ctx: Any) -> str:
    """The verb a click context belongs to, without the program name: "check", "matrix list"."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.append(str(ctx.info_name))
        ctx = ctx.parent
    return " ".join(reversed(names)) or "sparkdoctor"


def format_option(*formats: Format, help: str | None = None) -> Any:
    """`--format/-f`, choosing among `formats` (a usage error, exit 2, names the choices)."""
    from sparkdoctor.emit import note_format

    allowed = tuple(formats)

    def callback(ctx: typer.Context, value: str) -> Format:
        return note_format(command_of(ctx), value, allowed)

    return typer.Option("--format", "-f", help=help or " | ".join(f.value for f in allowed), callback=callback)


def output_option(help: str = "Write the document here (atomically) instead of stdout (- is stdout).") -> Any:
    """Read as text, not Path (`Output`): typer turns '' into Path('.'), and '' deserves its own answer (output_path)."""
    return typer.Option("--output", "-o", metavar="PATH", help=help)


def output_path(option: str, name: str | None, dash_is_stdout: bool = False) -> Path | None:
    """The file `--output NAME` (or `--save-facts NAME`) names, refused in one line (exit 2) when it cannot become
    a regular file, before any work starts. `-` is stdout where the option replaces stdout (`dash_is_stdout`: None,
    as when it is left out); where it writes a file besides stdout's document it is refused: never a file named `-`."""
    from sparkdoctor.files import OutputError, target_of

    if name is None or (name == "-" and dash_is_stdout):
        return None
    if name == "-":
        raise UsageError(f"{option} -: this file is written besides the document on stdout; name a file (./- for one named -)")
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


def empty_path(option: str) -> Exception:
    """The one line (exit 2) for '' where a path is taken: typer reads it as Path('.'), the working folder."""
    return UsageError(f"{option} '': an empty path (it would name the working folder); give a file or folder")


EMPTY = Parsed(make=_listed, default=None)  # a repeatable option given no value: None on the command line, [] here
Fmt = Annotated[Format, Parsed(str)]  # the callback of format_option makes the Format: its error names the choices
Python = Annotated[str | None, typer.Option("--python", help=(
    "Interpreter (or venv folder) of the target environment. Default: $VIRTUAL_ENV, else this interpreter.")), NAMES_A_FILE]
Container = Annotated[str | None, typer.Option("--container", metavar="NAME", help=(
    "A running container (docker or podman) whose serving stack to use; the GPU, driver and health are the host's."))]
ContainerPython = Annotated[str | None, typer.Option("--container-python", metavar="PATH", help=(
    "The interpreter inside the container (default: the one holding vLLM, else the container's python3)."))]
Runtime = Annotated[str | None, typer.Option("--runtime", help=(
    "Container CLI for --container: docker or podman (default: $SPARKDOCTOR_CONTAINER_RUNTIME, else docker, else podman)."))]
Matrix = Annotated[Path | None, typer.Option("--matrix", help=MATRIX_HELP)]
Ledger = Annotated[Path | None, typer.Option("--ledger", help="Ledger file (default: the state folder's ledger.sqlite).")]
Arch = Annotated[str | None, typer.Option("--arch", help=(
    "Evaluate as if the target ran on this GPU arch (e.g. sm_121a): for CI builders and image builds with no GB10."))]
Recipe = Annotated[str, typer.Argument(help="A recipe file (.toml, .yaml) or the name of a shipped recipe."), NAMES_A_FILE]
Sets = Annotated[list[str], typer.Option("--set", help="Override a parameter: key=value, or env.NAME=value (repeatable)."),
                 EMPTY]
Ignore = Annotated[list[str], typer.Option("--ignore", help="Entry id to ignore (repeatable).")]
Timeout = Annotated[float, typer.Option(
    "--timeout", help="Seconds the whole run may take (reading, parsing, matching); past it: one line, exit 2.")]
Output = Annotated[Path | None, output_option(), Parsed(str | None, functools.partial(output_path, "--output", dash_is_stdout=True))]
AlsoOutput = Annotated[Path | None, Parsed(str | None, functools.partial(output_path, "--output"))]
"""An --output written besides stdout's document (`-` refused); give it its output_option with the help."""


def command(options: type[T], body: Callable[[T], None]) -> Callable[..., None]:
    """The typer command of `options`' fields (those carrying a typer Option or Argument, in field order) whose help
    is `body`'s docstring and which calls `body(options(**parsed))`."""
    hints = typing.get_type_hints(options, include_extras=True)
    parameters, makers, names, files = [], {}, {}, []
    for f in dataclasses.fields(options):  # type: ignore[arg-type]  # a dataclass, as every caller's is
        meta = getattr(hints[f.name], "__metadata__", ())
        infos = [m for m in meta if isinstance(m, ParameterInfo)]
        if not infos:
            continue
        parsed = next((m for m in meta if isinstance(m, Parsed)), Parsed())
        cli_type = typing.get_args(hints[f.name])[0] if parsed.cli is None else parsed.cli
        if parsed.make:
            makers[f.name] = parsed.make
        default = parsed.default
        if default is inspect.Parameter.empty and f.default is not dataclasses.MISSING:
            default = f.default
        elif default is inspect.Parameter.empty and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        names[parsed.name or f.name] = f.name
        if NAMES_A_FILE in meta:
            files.append(f.name)
        parameters.append(inspect.Parameter(parsed.name or f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                            annotation=Annotated[cli_type, infos[-1]]))

    def call(**given: object) -> None:
        fields = {names[name]: value for name, value in given.items()}
        for name in files:  # a Path field's '' is refused by the parser (commands.options_take_no_options)
            value = fields[name]
            if value == "" or (isinstance(value, list) and "" in value):
                raise empty_path(_label(name, hints[name]))
        body(options(**{name: makers[name](value) if name in makers else value for name, value in fields.items()}))

    call.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # typer reads it
    call.__doc__, call.__name__ = body.__doc__, body.__name__
    return call


class Emitting(Protocol):
    """The options of a verb that writes one document: in the `--format` asked for, to `--output` or stdout."""

    fmt: Format
    output: Path | None


E = TypeVar("E", bound=Emitting)


def verb(options: type[E], run: Callable[[E], Result[object]], help: str, say_errors: bool = False) -> Callable[..., None]:
    """The typer command of `options` (its --help: `help`) that writes `run(options)`'s document (sparkdoctor.emit)
    and exits with its code; `say_errors`: then each of the Result's errors, one line on stderr (a verb whose
    document is written even when it fails: fix's refusal, report's target that could not be probed)."""

    def body(parsed: E) -> None:
        from sparkdoctor.emit import emit
        from sparkdoctor.stderr import err

        if hasattr(parsed, "ledger"):  # a verb that reads or writes the ledger (--ledger PATH or None) never writes over it
            ledger = parsed.ledger
            refuse_writing_over_the_ledger(parsed.output, ledger if isinstance(ledger, Path) else None)
        refuse_writing_over_what_it_reads(parsed)
        result = run(parsed)
        code = emit(result, parsed.fmt, parsed.output)
        for error in result.errors if say_errors else []:
            err(str(error["message"]))
        raise typer.Exit(code)

    body.__doc__ = help
    return command(options, body)


def refuse_bad_constraints(paths: list[Path]) -> None:
    """--constraints FILE (check, fix): each a regular file; a FIFO, device or folder is one line, never read."""
    for c in paths:
        if not c.is_file():
            why = "not a regular file (a device, FIFO, socket or folder); sparkdoctor reads only regular files here"
            raise UsageError(f"--constraints {c}: {why if c.exists() else 'no such file'}")


def refuse_unwritable_output(output: Path | None, flag: str = "--output") -> None:
    """`-o FILE` that the document could not be written to, refused before anything is read or changed: emit writes
    it only after the command ran, and what it ran must not have happened with nowhere to say so (fix's apply or
    rollback and its undo command, bench's and rerun's measurements, whatif's dry run; `--export` too). The file is judged as files.write_text judges it (a regular file or a new
    name, never a folder, FIFO or device); its folder must exist and take a new file (the write is atomic: a
    temporary file beside it, then a rename)."""
    from sparkdoctor.files import OutputError, target_of

    if output is None:
        return
    try:
        final = target_of(output)
    except OutputError as exc:
        raise UsageError(f"{flag} {output}: {exc}") from None
    if final == Path(os.devnull):
        return
    folder = final.parent
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise UsageError(f"{flag} {output}: its folder {folder} {why}; nothing was done")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {output}: its folder {folder} is not writable; nothing was done")


def refuse_writing_over_the_ledger(output: Path | None, ledger: Path | None, flag: str = "--output") -> None:
    """`-o FILE` (or `--html FILE`) that is the ledger the command reads or writes (a link to it, or its -wal, -shm or
    -journal file): the document would replace every stored run. One line, exit 2, before anything is read."""
    from sparkdoctor.ledger import default_path

    if output is None:
        return
    led = ledger or default_path()
    for suffix in ("", "-wal", "-shm", "-journal"):
        if any(_same_file(output, n) for n in {f"{led}{suffix}", f"{os.path.realpath(led)}{suffix}"}):
            what = f"its {suffix[1:]} file" if suffix else "the ledger itself"
            raise UsageError(f"{flag} {output}: is {what} ({led}); the document would replace the ledger: write it elsewhere")


def _same_file(output: Path, name: str | Path) -> bool:
    """One name for the same file, or two links to it; where either does not exist, the names decide."""
    try:
        return os.path.realpath(output) == os.path.realpath(name) or os.path.samefile(output, name)
    except OSError:
        return False


def refuse_writing_over_an_input(output: Path | None, inputs: dict[str, Path | None]) -> None:
    """`-o FILE` that is a file the command reads (`diff A B -o A`): the document would replace the snapshot it was
    made from. One line, exit 2, before anything is read."""
    for option, name in inputs.items():
        if output is not None and name is not None and _same_file(output, name):
            raise UsageError(f"--output {output}: is {option} {name}; the document would replace it: write it elsewhere")


# Fields that name files a verb writes (beside --output), never reads.
WRITTEN = frozenset({"output", "save_facts", "html", "export"})


def refuse_writing_over_what_it_reads(parsed: object) -> None:
    """`-o FILE` that is a file any option or argument names (explain's log, a --facts snapshot, a --matrix file, a
    recipe, a mod, a link to one of them): the document would replace what the command reads. Only an existing file
    can be lost, so only one counts; a str field counts only when marked NAMES_A_FILE (else it is text). One line,
    exit 2, before anything is read."""
    output = getattr(parsed, "output", None)
    if output is None or not dataclasses.is_dataclass(parsed) or not os.path.isfile(output):
        return
    hints = typing.get_type_hints(type(parsed), include_extras=True)
    for f in dataclasses.fields(parsed):
        if f.name in WRITTEN:
            continue
        value = getattr(parsed, f.name)
        text_is_a_file = NAMES_A_FILE in getattr(hints[f.name], "__metadata__", ())
        for name in value if isinstance(value, list) else [value]:
            if not (isinstance(name, Path) or (type(name) is str and text_is_a_file)) or not str(name):
                continue  # text (a recipe name, a str enum such as --format) names no file
            try:
                same = os.path.samefile(output, name)
            except (OSError, ValueError):  # not there, or no path at all
                continue
            if same:
                raise UsageError(f"--output {output}: is {_label(f.name, hints[f.name])} {name}; the document would "
                                 "replace it: write it elsewhere")


def _label(field_name: str, hint: object) -> str:
    """How the command line names a field: its option (`--facts`) or its argument's metavar."""
    info = next((m for m in getattr(hint, "__metadata__", ()) if isinstance(m, ParameterInfo)), None)
    decls = [d for d in (getattr(info, "default", None), *(getattr(info, "param_decls", None) or ())) if isinstance(d, str)]
    flag = next((d for d in decls if d.startswith("--")), None)
    return flag or getattr(info, "metavar", None) or field_name.upper()


def refuse_bad_seconds(option: str, seconds: float) -> None:
    """A time limit that is not a finite number above 0 (nan: a wait that never ends): one line, exit 2."""
    if not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"{option} {seconds}: give a number of seconds above 0")


def refuse_bad_arch(arch: str | None) -> None:
    """--arch that is not a real GPU arch: one line, exit 2, before anything is probed."""
    from sparkdoctor.arch import real_arch_problem

    problem = real_arch_problem(arch) if arch is not None else None
    if problem:
        raise UsageError(f"--arch {arch!r}: {problem}")


def parse_sets(values: list[str] | None) -> dict[str, str]:
    """--set key=value (repeatable) into a dict; UsageError on a value without '='."""
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: write key=value (e.g. --set port=9000 or --set env.NAME=value)")
        out[key.strip()] = value
    return out
