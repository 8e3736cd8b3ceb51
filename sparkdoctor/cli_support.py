"""What every command module shares: the ledger a reading command opens, and the --timeout option of the verbs that
run in this process (the one-line error and warnings are sparkdoctor/stderr.py's).

Command modules (sparkdoctor/commands/) import this, never cli.py, so imports run one way:
cli -> commands -> cli_support.
"""

from __future__ import annotations

from sparkdoctor.errors import LedgerFailure


def open_ledger(path, read_only=True):
    """The ledger a reading command (history, conclusions, rerun) works on, or LedgerFailure with one line (exit 5).
    A ledger that does not exist is refused, never created: a mistyped --ledger must not read as "nothing here".
    Read-only unless told: reading never migrates or writes the file (a read-only mount reads too)."""
    # imported on use: check loads sparkdoctor.ledger only on the runs that get here
    from sparkdoctor.ledger import Ledger, default_path

    path = path or default_path()
    try:
        exists = path.exists()
    except OSError as exc:  # EACCES: a folder on the way the user cannot search
        raise LedgerFailure(f"ledger {path}: cannot open ({exc.strerror or exc})") from None
    if not exists:
        raise LedgerFailure(f"ledger {path}: no such file (run `sparkdoctor bench` first, or pass --ledger)")
    if path.is_file() and path.stat().st_size == 0 and not path.with_name(path.name + "-wal").exists():
        # sqlite would take it for a new database and write a schema into it: not ours to write, and no ledger
        raise LedgerFailure(f"ledger {path}: an empty file, not a ledger (run `sparkdoctor bench` first, or pass --ledger)")
    return Ledger(path, read_only=read_only)  # a LedgerError is exit 5 by itself


DEFAULT_TIMEOUT = 120.0  # seconds; the same default as check's --timeout

