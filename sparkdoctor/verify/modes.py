"""What `sparkdoctor matrix verify` does once its options are checked (sparkdoctor/commands/matrix_verify.py): one
function per mode, each returning the answer its views draw (sparkdoctor/views/verify.py) with the exit code it
earns. Modes: the install checks (probe in scratch venvs) and file checks (released wheels) of chosen entries;
`--bisect` one entry; `--latest` for all; `--bounds` (every version bound bracketed on released files); `--stacks`
(every known-good stack resolved for linux aarch64).

Exit codes: 0 every entry confirmed; 1 an entry contradicted (or its bound differs); 2 could not build, download or
probe. A bad entry id or an entry with nothing to verify is a UsageError (2)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console

from sparkdoctor import verify
from sparkdoctor.errors import UsageError
from sparkdoctor.exitcodes import EXIT_OK, EXIT_VERIFY_CONTRADICTED, EXIT_VERIFY_ERROR
from sparkdoctor.matrix.model import Matrix
from sparkdoctor.released import Reader
from sparkdoctor.verify.bounds import BoundResult, side_counts, summary, verify_bounds
from sparkdoctor.verify.files import FileResult, bisect, verify_files
from sparkdoctor.verify.files import latest as latest_files
from sparkdoctor.verify.latest_installs import latest_installs
from sparkdoctor.verify.runner import Judged, Result, exit_code
from sparkdoctor.verify.stacks import StackResult, resolve_stacks

VERDICTS = ("confirmed", "contradicted", "error")
Log = Callable[[str], None]


def terminal_log() -> Log | None:
    """Progress lines on stderr when it is a terminal (never on stdout: that is the document's)."""
    if not sys.stderr.isatty():
        return None
    err = Console(stderr=True)
    return lambda line: err.print(f"[dim]{line}[/]")


class _Judged:
    """An answer whose exit code is its results' (verify.runner.exit_code)."""

    results: Sequence[Judged]

    @property
    def exit_code(self) -> int:
        return exit_code(self.results)


@dataclass
class EntryChecks(_Judged):
    """The install and file checks of the chosen entries (`verify` document)."""

    results: list[Result | FileResult]  # the install checks, then the file checks
    seconds: float

    def summary(self) -> dict[str, int]:
        return {v: sum(1 for r in self.results if r.verdict == v) for v in VERDICTS}

    def to_json(self) -> dict[str, object]:
        return {"schema": 1, "results": [r.to_dict() for r in self.results], "summary": self.summary(),
                "seconds": round(self.seconds, 1)}


@dataclass
class Bisection:
    """`--bisect ENTRY`: where the entry's file checks stop holding (`verify-bisect` document)."""

    found: dict[str, object]  # verify.files.bisect

    @property
    def exit_code(self) -> int:
        return {"agrees": EXIT_OK, "found": EXIT_OK, "differs": EXIT_VERIFY_CONTRADICTED}.get(str(self.found["verdict"]), EXIT_VERIFY_ERROR)

    def to_json(self) -> dict[str, object]:
        return {"schema": 1, "bisect": self.found}


@dataclass
class Latest:
    """`--latest`: every entry's checks on its newest releases (`verify-latest` document)."""

    results: list[dict[str, object]]  # verify.files.latest / latest_installs rows

    @property
    def exit_code(self) -> int:
        if any(r["verdict"] in ("regression", "range-must-grow", "fixed-upstream") for r in self.results):
            return EXIT_VERIFY_CONTRADICTED
        return EXIT_VERIFY_ERROR if any(r["verdict"] == "error" for r in self.results) else EXIT_OK

    def to_json(self) -> dict[str, object]:
        return {"schema": 1, "latest": self.results}


@dataclass
class Bounds(_Judged):
    """`--bounds`: every version bound bracketed on released files, read remotely (`bounds` document)."""

    matrix: str
    results: list[BoundResult]
    seconds: float
    requests: int
    bytes_read: int

    def to_json(self) -> dict[str, object]:
        return {"schema": 1, "kind": "bounds", "matrix": self.matrix, "seconds": round(self.seconds, 1),
                "requests": self.requests, "bytes_read": self.bytes_read, "summary": summary(self.results),
                "sides": side_counts(self.results), "bounds": [r.to_dict() for r in self.results]}


@dataclass
class Stacks(_Judged):
    """`--stacks`: every known-good stack resolved by a real pip dry run (`stacks` document)."""

    matrix: str
    results: list[StackResult]

    def to_json(self) -> dict[str, object]:
        return {"schema": 1, "kind": "stacks", "matrix": self.matrix, "stacks": [r.to_dict() for r in self.results]}


def entry_checks(matrix: Matrix, entry_id: str | None, keep: bool, kind: str) -> EntryChecks:
    if entry_id is not None:
        entry = matrix.get(entry_id)
        if entry is None:
            raise UsageError(f"no matrix entry with id {entry_id!r}")
        want_installs = kind != "files" and bool(entry.verify)
        want_files = kind != "installs" and bool(entry.files)
        if not want_installs and not want_files:
            raise UsageError(f"{entry.file}: entry {entry.id}: nothing to verify of kind {kind} (no 'verify' table or 'files' table)")
        chosen = [entry]
    else:
        want_installs, want_files = kind != "files", kind != "installs"
        chosen = [e for e in matrix.entries if not e.withdrawn]
    specs = [verify.parse_spec(e) for e in chosen if want_installs and e.verify and e.verified_by]
    log = terminal_log()
    started = time.monotonic()
    results: list[Result | FileResult] = [*verify.verify(specs, keep=keep, log=log)] if specs else []
    results += [verify_files(e, log, matrix.tracking.family) for e in chosen if want_files and e.files]
    return EntryChecks(results, time.monotonic() - started)


def bisection(matrix: Matrix, entry_id: str) -> Bisection:
    entry = matrix.get(entry_id)
    if entry is None:
        raise UsageError(f"no matrix entry with id {entry_id!r}")
    if not entry.files:
        raise UsageError(f"{entry.file}: entry {entry.id}: --bisect needs a 'files' table (checks over released wheels)")
    return Bisection(bisect(entry, terminal_log()))


def latest(matrix: Matrix, entry_id: str | None, kind: str) -> Latest:
    chosen = [e for e in matrix.entries if not e.withdrawn and (entry_id is None or e.id == entry_id)]
    with_files = [e for e in chosen if e.files and kind != "installs"]
    with_installs = [e for e in chosen if e.verify and e.verified_by and kind != "files"]
    if entry_id is not None and not (with_files or with_installs):
        raise UsageError(f"no matrix entry with id {entry_id!r} and a 'files' or 'verify' table of kind {kind}")
    log = terminal_log()
    results = [latest_files(e, log) for e in with_files]
    results += [dict(latest_installs(verify.parse_spec(e), log), kind="installs") for e in with_installs]
    return Latest(results)


def bounds(matrix: Matrix, entry_id: str | None) -> Bounds:
    if entry_id is not None and matrix.get(entry_id) is None:
        raise UsageError(f"no matrix entry with id {entry_id!r}")
    reader = Reader()
    started = time.monotonic()
    try:
        results = verify_bounds(matrix, reader, entry_id, terminal_log())
    finally:
        reader.close()
    # evidence "checked" needs every bound bracketed: a bound that cannot be is a contradiction of the entry
    checked = {e.id for e in matrix.entries if e.evidence == "checked"}
    for r in results:
        if r.id in checked and r.verdict == "not-bracketed":
            r.verdict, r.why = "contradicted", f"evidence is \"checked\" but the bound cannot be bracketed: {r.why}"
    return Bounds(str(matrix.source), results, time.monotonic() - started, reader.client.requests, reader.client.bytes_read)


def stacks(matrix: Matrix, stack_id: str | None) -> Stacks:
    chosen = [s for s in matrix.stacks if stack_id is None or s.id == stack_id]
    if stack_id is not None and not chosen:
        raise UsageError(f"no known-good stack with id {stack_id!r}")
    return Stacks(str(matrix.source), resolve_stacks(chosen, terminal_log()))


Answer = EntryChecks | Bisection | Latest | Bounds | Stacks
"""What `matrix verify` answers, per mode."""
