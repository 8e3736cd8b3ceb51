"""`sparkdoctor matrix track` and `sparkdoctor matrix update`: registered on the matrix group.

track: re-check every entry on the releases newer than the matrix's tracked-through versions
(sparkdoctor.track). update: install a newer matrix into the user data dir, pinned, validated,
never executed (sparkdoctor.track.update).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from sparkdoctor.commands.options import (
    NAMES_A_FILE,
    AlsoOutput,
    Fmt,
    Output,
    command,
    format_option,
    output_option,
    refuse_writing_over_what_it_reads,
    verb,
)
from sparkdoctor.errors import UsageError
from sparkdoctor.result import Format, Result
from sparkdoctor.track.answer import TrackAnswer
from sparkdoctor.track.update import Updated
from sparkdoctor.views.track import TRACK, UPDATE

TRACK_FORMATS = TRACK.formats
UPDATE_FORMATS = UPDATE.formats


def parse_through(values: list[str]) -> dict[str, str]:
    """--through PACKAGE=VERSION (repeatable) into a dict; UsageError on anything else."""
    from packaging.version import InvalidVersion, Version

    out = {}
    for value in values:
        name, sep, version = value.partition("=")
        if not sep or not name.strip() or not version.strip():
            raise UsageError(f"--through {value}: give PACKAGE=VERSION, e.g. vllm=0.33.0")
        package, version = name.strip(), version.strip().lstrip("=")
        try:
            Version(version)
        except InvalidVersion:
            raise UsageError(f"--through {package}={version}: {version!r} is not a version (e.g. vllm=0.33.0)") from None
        out[package] = version
    return out


@dataclass
class TrackCommand:
    through: Annotated[list[str], typer.Option("--through", metavar="PKG=VERSION", help="Read new releases of PKG up to VERSION (default: the newest).")] = field(default_factory=list)
    matrix: Annotated[Path | None, typer.Option("--matrix", help="Matrix folder (default: the installed, else the bundled one).")] = None
    fmt: Annotated[Fmt, format_option(*TRACK_FORMATS)] = Format.console
    output: Annotated[AlsoOutput, output_option("Also write the JSON document to this file (atomically), whatever --format prints.")] = None
    platform: Annotated[str, typer.Option("--platform", help="Whose wheels to read: linux-aarch64 | linux-x86_64")] = "linux-aarch64"
    python: Annotated[str, typer.Option("--python-version", help="The CPython whose wheels to read.")] = "3.12"
    since: Annotated[str | None, typer.Option("--since", metavar="DATE", help="Also re-check releases uploaded after DATE (YYYY-MM-DD) whatever their version; default: the matrix's tracked_on.")] = None
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="List every package and entry, not only proposals and entries that need an edit.")] = False
    apply: Annotated[bool, typer.Option("--apply", help="Write the proposed edits into the --matrix folder (for a scheduled job that opens a pull request).")] = False
    probe: Annotated[bool, typer.Option("--probe", help="Also compile each new triton / nvidia-cuda-nvcc ptxas, cutlass-dsl and FlashInfer arch list for --arch; propose an entry where a release starts or stops refusing it (needs uv for cutlass-dsl).")] = False
    arch: Annotated[str, typer.Option("--arch", help="The arch --probe compiles for.")] = "sm_121a"

    def refuse_bad_options(self) -> dict[str, str]:
        """Every usage error of `matrix track` (exit 2, one line); the --through versions."""
        from sparkdoctor.released import PLATFORMS

        Format.parse(self.fmt, TRACK_FORMATS)
        through = parse_through(self.through)
        if self.platform not in PLATFORMS:
            raise UsageError(f"--platform {self.platform}: choose one of {', '.join(PLATFORMS)}")
        if self.apply and (self.matrix is None or not self.matrix.is_dir()):
            raise UsageError("--apply writes into a matrix folder: give it with --matrix DIR")
        if self.since is not None:
            import datetime as dt

            try:
                dt.date.fromisoformat(self.since)
            except ValueError:
                raise UsageError(f"--since {self.since}: not a date YYYY-MM-DD") from None
        from sparkdoctor.arch import real_arch_problem

        if self.probe and (why := real_arch_problem(self.arch)):
            raise UsageError(f"--arch {self.arch}: {why}")
        return through


def run_track(options: TrackCommand) -> Result[TrackAnswer]:
    from sparkdoctor.track.answer import track_matrix

    through = options.refuse_bad_options()
    answer = track_matrix(options.matrix, through, options.platform, options.python, options.since,
                          options.arch if options.probe else None)
    if options.apply and options.matrix is not None:
        from sparkdoctor.track.apply import apply_proposals

        applied, skipped = apply_proposals(answer.document, options.matrix)
        answer.document["applied"], answer.document["not_applied"] = applied, skipped
    result = Result("matrix track", "track", answer, exit_code=answer.exit_code, verbose=options.verbose)
    unlisted = [p for p in answer.document["packages"] if p.get("error")]
    if unlisted:  # exit 2 says why, in `errors` and on stderr, as every failing command does
        from sparkdoctor.released.http import RemoteError

        why = f"{len(unlisted)} package(s) could not be listed from the registry: {unlisted[0]['note']}"
        result.fail(RemoteError(why)).notes.append(f"matrix track: {why}")
    return result


@dataclass
class UpdateCommand:
    source: Annotated[str | None, typer.Argument(help="A git repository (URL or path) or a .tar.gz (path or https URL) holding matrix/*.toml."), NAMES_A_FILE] = None
    sha256: Annotated[str | None, typer.Option("--sha256", help="The tarball's sha256 (required for a tarball).")] = None
    commit: Annotated[str | None, typer.Option("--commit", help="The full commit id to install (required for git).")] = None
    rollback: Annotated[bool, typer.Option("--rollback", help="Restore the matrix installed before the last update.")] = False
    fmt: Annotated[Fmt, format_option(*UPDATE_FORMATS)] = Format.console
    output: Output = None

    def refuse_bad_options(self) -> None:
        Format.parse(self.fmt, UPDATE_FORMATS)
        if self.rollback and (self.source or self.sha256 or self.commit):
            raise UsageError("--rollback takes no SOURCE, --sha256 or --commit")
        if not self.rollback and not self.source:
            raise UsageError("give a SOURCE (a git repository with --commit, or a tarball with --sha256), or --rollback")


def run_update(options: UpdateCommand) -> Result[Updated]:
    """The matrix installed (or the previous one restored); an UpdateError carries its exit code (2)."""
    from sparkdoctor.track.update import rollback_matrix, update_matrix

    options.refuse_bad_options()
    if options.rollback:
        done = rollback_matrix()
    else:
        assert options.source is not None  # refuse_bad_options
        done = update_matrix(options.source, sha256=options.sha256, commit=options.commit)
    return Result("matrix update", "matrix-update", Updated(done))


def register(app: typer.Typer) -> None:
    app.command("track")(command(TrackCommand, matrix_track))
    app.command("update")(verb(UpdateCommand, run_update, """
        Install a newer matrix without a new sparkdoctor release: pinned, validated before it replaces anything, never executed; --rollback restores the previous one.

        Exit 0: done; 2: refused (says why)."""))


def matrix_track(options: TrackCommand) -> None:
    """Re-check every entry on releases newer than the matrix's tracked-through versions, or uploaded since it was tracked (backports); propose edits.

    Exit 0: nothing to change; 1: an edit is proposed (an entry's, --probe's, or moving tracked-through) or a check is broken; 2: a registry read failed."""
    from sparkdoctor.emit import emit

    refuse_writing_over_what_it_reads(options)  # -o M with --matrix M: the document would replace the matrix
    result = run_track(options)
    if options.output is not None:
        emit(Result(result.command, result.kind, result.data, result.exit_code, result.errors), Format.json, options.output)
    raise typer.Exit(emit(result, options.fmt))
