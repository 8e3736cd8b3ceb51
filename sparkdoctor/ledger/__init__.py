"""The ledger: every benchmark run, with the toolchain it was measured on, in one SQLite file.

schema.py opens a file and brings it to the current schema (PRAGMA user_version + migrate_to_N);
store.py reads and writes runs and comparisons, one transaction per run, so a run interrupted
half-way (Ctrl-C, SIGKILL, a full disk) leaves no half-written row.
"""

from sparkdoctor.ledger.schema import (
    SCHEMA_VERSION,
    LedgerError,
    default_path,
    unwritable,
)
from sparkdoctor.ledger.store import Ledger, RunRecord

__all__ = ["SCHEMA_VERSION", "Ledger", "LedgerError", "RunRecord", "default_path", "unwritable"]
