"""`sparkdoctor matrix track` and `sparkdoctor matrix update`: registered on the matrix group.

track: re-check every entry on the releases newer than the matrix's tracked-through versions
(sparkdoctor.track). update: install a newer matrix into the user data dir, pinned, validated,
never executed (sparkdoctor.track.update). Both only parse here and call their pipeline.
"""

from __future__ import annotations

from pathlib import Path

import typer

from sparkdoctor.cli_support import Fatal
from sparkdoctor.commands.options import format_option
from sparkdoctor.result import Format

TRACK_FORMATS = ("console", "json", "markdown")


def _through(values: list[str]) -> dict[str, str]:
    out = {}
    for value in values:
        name, sep, version = value.partition("=")
        if not sep or not name.strip() or not version.strip():
            raise Fatal(f"--through {value}: give PACKAGE=VERSION, e.g. vllm=0.33.0")
        out[name.strip()] = version.strip().lstrip("=")
    return out


def register(app: typer.Typer) -> None:
    @app.command("track")
    def matrix_track(
        through: list[str] = typer.Option([], "--through", metavar="PKG=VERSION", help="Read new releases of PKG up to VERSION (default: the newest)."),
        matrix_path: Path | None = typer.Option(None, "--matrix", help="Matrix folder (default: the installed, else the bundled one)."),
        fmt: str = format_option(Format.console, Format.json, Format.markdown),
        output: Path | None = typer.Option(None, "--output", "-o", help="Also write the JSON result to this file."),
        platform: str = typer.Option("linux-aarch64", "--platform", help="Whose wheels to read: linux-aarch64 | linux-x86_64"),
        python: str = typer.Option("3.12", "--python-version", help="The CPython whose wheels to read."),
    ) -> None:
        """Re-check every entry on releases newer than the matrix's tracked-through versions; propose edits.
        Exit 0: nothing to change; 1: an entry needs an edit or its check is broken; 2: a registry read failed."""
        from sparkdoctor.track.command import run_track

        if fmt not in TRACK_FORMATS:
            raise Fatal(f"--format {fmt}: choose one of {', '.join(TRACK_FORMATS)}")
        raise typer.Exit(run_track(_through(through), matrix_path, fmt, output, platform, python))

    @app.command("update")
    def matrix_update(
        source: str | None = typer.Argument(None, help="A git repository (URL or path) or a .tar.gz (path or https URL) holding matrix/*.toml."),
        sha256: str | None = typer.Option(None, "--sha256", help="The tarball's sha256 (required for a tarball)."),
        commit: str | None = typer.Option(None, "--commit", help="The full commit id to install (required for git)."),
        rollback: bool = typer.Option(False, "--rollback", help="Restore the matrix installed before the last update."),
        fmt: str = format_option(Format.console, Format.json),
    ) -> None:
        """Install a newer matrix without a new sparkdoctor release: pinned, validated before it replaces
        anything, never executed; --rollback restores the previous one. Exit 0 done, 2 refused (says why)."""
        from sparkdoctor.track.update import rollback_matrix, update_matrix

        if fmt not in ("console", "json"):
            raise Fatal(f"--format {fmt}: choose one of console, json")
        if rollback:  # an UpdateError carries its exit code (2) to the CLI's one error handler
            if source or sha256 or commit:
                raise Fatal("--rollback takes no SOURCE, --sha256 or --commit")
            result = rollback_matrix()
        else:
            if not source:
                raise Fatal("give a SOURCE (a git repository with --commit, or a tarball with --sha256), or --rollback")
            result = update_matrix(source, sha256=sha256, commit=commit)
        from sparkdoctor.emit import emit_json, write_stdout

        if fmt == "json":
            emit_json("matrix update", "matrix-update", result)
            return
        write_stdout("".join([f"{result['message']}\n", *(f"  {line}\n" for line in result.get("diff", []))]))
