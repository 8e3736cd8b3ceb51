"""What `sparkdoctor matrix verify` does once its options are parsed: choose the entries, run the
install checks (probe in scratch venvs) and the file checks (released wheels), or `--bisect` one
entry, or `--latest` for all, then render and give the exit code. cli.py only parses and calls this.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from sparkdoctor.cli_support import Fatal
from sparkdoctor.exitcodes import EXIT_OK, EXIT_VERIFY_CONTRADICTED, EXIT_VERIFY_ERROR

KINDS = ("all", "installs", "files")


def _log() -> Callable[[str], None] | None:
    if not sys.stderr.isatty():
        return None
    from rich.console import Console

    err = Console(stderr=True)
    return lambda line: err.print(f"[dim]{line}[/]")


def _matrix(path: Path | None):
    from sparkdoctor.matrix import load

    return load(path)  # a MatrixError is exit 2 by itself


def run_verify(entry_id: str | None, keep: bool, matrix_path: Path | None, fmt: str, kind: str = "all",
               bisect_id: str | None = None, latest: bool = False, bounds: bool = False, stacks: bool = False) -> int:
    """The exit code of one `matrix verify` invocation; output already written."""
    if fmt not in ("console", "json"):
        raise Fatal(f"--format {fmt}: choose one of console, json")
    if kind not in KINDS:
        raise Fatal(f"--kind {kind}: choose one of {', '.join(KINDS)}")
    modes = [name for name, on in (("--bounds", bounds), ("--stacks", stacks), ("--bisect", bisect_id is not None),
                                   ("--latest", latest)) if on]
    if len(modes) > 1:  # each is its own run; the second one used to be silently ignored
        raise Fatal(f"{' and '.join(modes)} exclude each other: give one")
    matrix = _matrix(matrix_path)
    if bounds:
        return _bounds(matrix, entry_id, fmt)
    if stacks:
        return _stacks(matrix, entry_id, fmt)
    if bisect_id is not None:
        return _bisect(matrix, bisect_id, fmt)
    if latest:
        return _latest(matrix, entry_id, fmt, kind)
    return _verify(matrix, entry_id, keep, fmt, kind)


def _verify(matrix, entry_id: str | None, keep: bool, fmt: str, kind: str) -> int:
    from sparkdoctor import verify
    from sparkdoctor.render.verify import render_verify, verify_json
    from sparkdoctor.verify.files import verify_files

    if entry_id is not None:
        entry = matrix.get(entry_id)
        if entry is None:
            raise Fatal(f"no matrix entry with id {entry_id!r}")
        want_installs = kind != "files" and bool(entry.verify)
        want_files = kind != "installs" and bool(entry.files)
        if not want_installs and not want_files:
            raise Fatal(f"{entry.file}: entry {entry.id}: nothing to verify of kind {kind} (no 'verify' table or 'files' table)")
        chosen = [entry]
    else:
        want_installs, want_files = kind != "files", kind != "installs"
        chosen = [e for e in matrix.entries if not e.withdrawn]
    specs = [verify.parse_spec(e) for e in chosen if want_installs and e.verify and e.verified_by]
    log = _log()
    started = time.monotonic()
    results: list = verify.verify(specs, keep=keep, log=log) if specs else []
    results += [verify_files(e, log) for e in chosen if want_files and e.files]
    seconds = time.monotonic() - started
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        return emit_json("matrix verify", "verify", verify_json(results, seconds), exit_code(results))
    elif not results:
        print("no matrix entry has a verify table or a files table")
    else:
        from rich.console import Console

        render_verify(results, Console(), seconds)
    return exit_code(results)


def exit_code(results: list) -> int:
    if any(r.verdict == "contradicted" for r in results):
        return EXIT_VERIFY_CONTRADICTED
    if any(r.verdict == "error" for r in results):
        return EXIT_VERIFY_ERROR
    return EXIT_OK


def _bisect(matrix, entry_id: str, fmt: str) -> int:
    from sparkdoctor.render.verify import render_bisect
    from sparkdoctor.verify.files import bisect

    entry = matrix.get(entry_id)
    if entry is None:
        raise Fatal(f"no matrix entry with id {entry_id!r}")
    if not entry.files:
        raise Fatal(f"{entry.file}: entry {entry.id}: --bisect needs a 'files' table (checks over released wheels)")
    found = bisect(entry, _log())
    code = {"agrees": EXIT_OK, "found": EXIT_OK, "differs": EXIT_VERIFY_CONTRADICTED}.get(found["verdict"], EXIT_VERIFY_ERROR)
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        return emit_json("matrix verify", "verify-bisect", {"schema": 1, "bisect": found}, code)
    render_bisect(found)
    return code


def _latest(matrix, entry_id: str | None, fmt: str, kind: str) -> int:
    from sparkdoctor import verify
    from sparkdoctor.render.verify import render_latest
    from sparkdoctor.verify.files import latest, latest_installs

    chosen = [e for e in matrix.entries if not e.withdrawn and (entry_id is None or e.id == entry_id)]
    with_files = [e for e in chosen if e.files and kind != "installs"]
    with_installs = [e for e in chosen if e.verify and e.verified_by and kind != "files"]
    if entry_id is not None and not (with_files or with_installs):
        raise Fatal(f"no matrix entry with id {entry_id!r} and a 'files' or 'verify' table of kind {kind}")
    log = _log()
    results = [latest(e, log) for e in with_files]
    results += [dict(latest_installs(verify.parse_spec(e), log), kind="installs") for e in with_installs]
    if any(r["verdict"] in ("regression", "range-must-grow", "fixed-upstream") for r in results):
        code = EXIT_VERIFY_CONTRADICTED
    else:
        code = EXIT_VERIFY_ERROR if any(r["verdict"] == "error" for r in results) else EXIT_OK
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        return emit_json("matrix verify", "verify-latest", {"schema": 1, "latest": results}, code)
    render_latest(results)
    return code


def _bounds(matrix, entry_id: str | None, fmt: str) -> int:
    """`--bounds`: every version bound bracketed on released files (sparkdoctor.verify.bounds)."""
    from sparkdoctor.released import Reader
    from sparkdoctor.track.render import render_bounds
    from sparkdoctor.verify.bounds import side_counts, summary, verify_bounds

    if entry_id is not None and matrix.get(entry_id) is None:
        raise Fatal(f"no matrix entry with id {entry_id!r}")
    reader = Reader()
    started = time.monotonic()
    try:
        results = verify_bounds(matrix, reader, entry_id, _log())
    finally:
        reader.close()
    # evidence "checked" needs every bound bracketed: a bound that cannot be is a contradiction of the entry
    checked = {e.id for e in matrix.entries if e.evidence == "checked"}
    for r in results:
        if r.id in checked and r.verdict == "not-bracketed":
            r.verdict, r.why = "contradicted", f"evidence is \"checked\" but the bound cannot be bracketed: {r.why}"
    code = _verdict_code(results)
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        return emit_json("matrix verify", "bounds", {"schema": 1, "kind": "bounds", "matrix": matrix.source, "seconds": round(time.monotonic() - started, 1),
                    "requests": reader.client.requests, "bytes_read": reader.client.bytes_read, "summary": summary(results),
                    "sides": side_counts(results), "bounds": [r.to_dict() for r in results]}, code)
    from rich.console import Console

    render_bounds(results, Console())
    return code


def _verdict_code(results) -> int:
    """Exit 1 when something is contradicted, else 2 when something could not be read, else 0."""
    if any(r.verdict == "contradicted" for r in results):
        return EXIT_VERIFY_CONTRADICTED
    return EXIT_VERIFY_ERROR if any(r.verdict == "error" for r in results) else EXIT_OK


def _stacks(matrix, stack_id: str | None, fmt: str) -> int:
    """`--stacks`: every known-good stack resolved for linux aarch64 by a real pip dry run (sparkdoctor.verify.stacks)."""
    from sparkdoctor.verify.stacks import render_stacks, resolve_stacks

    chosen = [s for s in matrix.stacks if stack_id is None or s.id == stack_id]
    if stack_id is not None and not chosen:
        raise Fatal(f"no known-good stack with id {stack_id!r}")
    results = resolve_stacks(chosen, _log())
    code = _verdict_code(results)
    if fmt == "json":
        from sparkdoctor.emit import emit_json

        return emit_json("matrix verify", "stacks", {"schema": 1, "kind": "stacks", "matrix": matrix.source,
                                                      "stacks": [r.to_dict() for r in results]}, code)
    render_stacks(results)
    return code
