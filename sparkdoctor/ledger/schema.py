"""Open a ledger file and bring it to the current schema.

The schema version lives in `PRAGMA user_version`; `migrate_to_N` takes a file from N-1 to N inside
the same transaction as the version bump, so a migration either happens whole or not at all. A file
written by a newer sparkdoctor (a higher version), a file that is not SQLite, or an SQLite file that
is some other program's is refused with one line naming it: nothing is changed in it.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from sparkdoctor.errors import LedgerFailure
from sparkdoctor.locations import state_dir

APPLICATION_ID = 0x5344_4C47  # "SDLG": marks the file as a sparkdoctor ledger
SCHEMA_VERSION = 4


class LedgerError(LedgerFailure, RuntimeError):
    """The ledger cannot be opened, read or written; the message is one line naming the file."""

    code = "ledger"


BUSY_TIMEOUT_S = 30.0  # how long a reader or writer waits for another process's write (SQLite's own locking)


def busy(exc: sqlite3.Error) -> bool:
    """SQLite could not get its lock in time (another process writes, or holds the file exclusively)."""
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED") or "database is locked" in str(exc)


def hint(exc: sqlite3.Error) -> str:
    """What an SQLite error most likely means for the user, for the end of its one line ("" when nothing better)."""
    if busy(exc):
        return f" (another process holds it; waited {BUSY_TIMEOUT_S:g} s): try again when it is done"
    if getattr(exc, "sqlite_errorname", "").startswith("SQLITE_READONLY"):
        return ": it cannot be written here (a read-only file, folder or mount); pass another --ledger"
    if getattr(exc, "sqlite_errorname", "").startswith("SQLITE_CANTOPEN"):
        return ": SQLite cannot open it here (a folder or mount it may not write, for its -wal and -shm files)"
    if getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_FULL", "SQLITE_IOERR")):
        return ": is its disk full? (nothing was half-written: SQLite undid the unfinished write)"
    return ""


def unwritable(path: Path) -> str | None:
    """Why a writer could not store in the ledger at `path`, in words (None: it could, as far as the permissions
    say): asked before a bench measures, so a run is never measured for a ledger that cannot take it. A file not
    there yet is made in its folder (and any folders missing on the way); SQLite writes its -wal and -shm files
    beside the file."""
    path = Path(path)
    if path.is_dir():
        return "is a folder; give a file (--ledger PATH)"
    if path.exists() and not path.is_file():
        return "not a regular file (a device, a pipe or a socket); give a file (--ledger PATH)"
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder, so the ledger cannot be made there"
    if not os.access(folder, os.W_OK | os.X_OK):
        where = f"its folder {folder}" if folder == path.parent else f"{folder}, where its folder {path.parent} is made,"
        return (f"{where} cannot be written (a read-only folder or mount): SQLite makes the file and its -wal and -shm "
                "files there")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        return "the file cannot be written (a read-only file)"
    return None


def default_path() -> Path:
    return state_dir() / "ledger.sqlite"


def migrate_to_1(db: sqlite3.Connection) -> None:
    """Runs and their raw per-request samples."""
    _script(db, """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            created_at TEXT NOT NULL,
            recipe_name TEXT,
            recipe_hash TEXT NOT NULL,
            recipe_json TEXT NOT NULL,      -- the resolved recipe: argv, env, model (or the --url)
            base_url TEXT NOT NULL,
            model TEXT NOT NULL,
            server_json TEXT NOT NULL,      -- what was behind the URL (vllm/generic, version)
            fingerprint TEXT NOT NULL,      -- Facts.fingerprint() of the target that ran the server
            facts_json TEXT NOT NULL,       -- the full Facts
            bench_version INTEGER NOT NULL, -- sparkdoctor.bench.BENCH_VERSION
            tool_version TEXT NOT NULL,     -- sparkdoctor's version
            workload_json TEXT NOT NULL,
            summary_json TEXT NOT NULL,     -- per level: client and server figures, the headline
            findings_json TEXT NOT NULL     -- matrix symptoms found in the server's log
        );
        CREATE INDEX runs_recipe ON runs(recipe_name, created_at);
        CREATE INDEX runs_fingerprint ON runs(fingerprint);
        CREATE TABLE samples (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            concurrency INTEGER NOT NULL,   -- 0: a warm-up request (not counted)
            round INTEGER NOT NULL,
            idx INTEGER NOT NULL,
            sample_json TEXT NOT NULL,
            PRIMARY KEY (run_id, concurrency, round, idx)
        );
        """
    )


def migrate_to_2(db: sqlite3.Connection) -> None:
    """A/B comparisons: the interleaved runs point to the comparison they belong to."""
    _script(db, """
        CREATE TABLE comparisons (
            id INTEGER PRIMARY KEY,
            created_at TEXT NOT NULL,
            a_label TEXT NOT NULL,
            b_label TEXT NOT NULL,
            status TEXT NOT NULL,           -- running | complete | interrupted
            result_json TEXT
        );
        ALTER TABLE runs ADD COLUMN comparison_id INTEGER REFERENCES comparisons(id);
        ALTER TABLE runs ADD COLUMN arm TEXT;  -- "A" or "B" inside a comparison
        CREATE INDEX runs_comparison ON runs(comparison_id);
        """
    )


def migrate_to_3(db: sqlite3.Connection) -> None:
    """Conclusions (sparkdoctor/conclusions/): a named A/B result bound to its runs; a rerun adds a row
    pointing to the one it re-measured."""
    _script(db, """
        CREATE TABLE conclusions (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            created_at TEXT NOT NULL,
            comparison_id INTEGER REFERENCES comparisons(id) ON DELETE SET NULL,
            previous_id INTEGER REFERENCES conclusions(id) ON DELETE SET NULL,
            outcome TEXT,                   -- NULL when first recorded, else holds | flipped | changed (a rerun)
            data_json TEXT NOT NULL         -- recipes, workload, runs, fingerprints, verdict, ratios
        );
        CREATE INDEX conclusions_name ON conclusions(name, id);
        """
    )


def migrate_to_4(db: sqlite3.Connection) -> None:
    """The server's memory through a launched run (serve/memwatch.py): the high-water mark of its process group's
    resident size, the lowest MemAvailable and the sampled series. NULL for runs stored before, --url runs and
    servers in containers."""
    _script(db, "ALTER TABLE runs ADD COLUMN memory_json TEXT")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: migrate_to_1, 2: migrate_to_2, 3: migrate_to_3,
                                                               4: migrate_to_4}


def _script(db: sqlite3.Connection, sql: str) -> None:
    """Run each statement of `sql` inside the caller's transaction (executescript would COMMIT first)."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


def _one(db: sqlite3.Connection, sql: str) -> int:
    return int(db.execute(sql).fetchone()[0])


def _open_read_only(path: Path) -> sqlite3.Connection:
    """The file opened for reading only: nothing is created or written beside it, not even -wal/-shm files.

    A read-only connection to a WAL file makes its -wal and -shm files and cannot remove them as it closes. Where no
    -wal file is there, no one has the file open (the last connection to close removes it), so: on storage one may
    write, the file is opened read-write but `query_only` (no statement can write), and SQLite, closing it, removes
    what it made; on storage one may not write (a read-only file, folder or mount), no writer can change it, so it
    is read as immutable. Where a -wal file is there (a writer has it open), it is read under SQLite's locks."""
    resolved = path.resolve()
    uri = f"file:{urllib.parse.quote(os.fsencode(resolved))}"  # the path's bytes: any, not only UTF-8
    writable = os.access(resolved, os.W_OK) and os.access(resolved.parent, os.W_OK)
    if os.path.lexists(f"{resolved}-wal"):
        db = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.execute("PRAGMA user_version").fetchone()  # the first read opens the file (and its WAL)
            return db
        except sqlite3.OperationalError:
            db.close()
            if writable:
                raise  # writable storage: a real error, said as such
    elif writable:
        db = sqlite3.connect(uri + "?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        db.execute("PRAGMA query_only = ON")
        return db
    return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def _current_tables() -> dict[str, list[str]]:
    """Each table of the current schema and its columns, in order (read from an empty database migrated in memory)."""
    ref = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for target in range(1, SCHEMA_VERSION + 1):
            MIGRATIONS[target](ref)
        names = [r[0] for r in ref.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {name: [r[1] for r in ref.execute(f"PRAGMA table_info({name})")] for name in names}
    finally:
        ref.close()


def _as_current(db: sqlite3.Connection) -> None:
    """A reader's view of an older ledger in the current schema, without copying or writing it: each current table is
    a TEMP view of the file's table (a column added since is NULL; a table added since is empty), and unqualified
    names find the temp schema first. The file is read in place (its indexes too); reading never migrates it, so an
    older sparkdoctor sharing it still reads it. The migrations only add tables and columns (MIGRATIONS), so every
    column a reader asks for is there."""
    query_only = _one(db, "PRAGMA query_only")
    db.execute("PRAGMA query_only = OFF")  # the TEMP schema only: it lives in memory, never in the file
    try:
        for table, columns in _current_tables().items():
            have = {r[1] for r in db.execute(f"PRAGMA main.table_info({table})")}
            picked = ", ".join(c if c in have else f"NULL AS {c}" for c in columns)
            source = f"FROM main.{table}" if have else "WHERE 0"
            db.execute(f"CREATE TEMP VIEW {table} AS SELECT {picked} {source}")
    finally:
        db.execute(f"PRAGMA query_only = {query_only}")


def connect(path: Path, read_only: bool = False) -> sqlite3.Connection:
    """Open (creating if absent, unless `read_only`) and migrate; raise LedgerError with one line otherwise. A
    reader's file is never written: an older schema is read through views of the current one (_as_current)."""
    path = Path(path)
    try:
        if path.is_dir() or (path.exists() and not path.is_file()):
            raise LedgerError(f"ledger {path}: {unwritable(path)}")  # its first answers: a folder, not a regular file
        if read_only:
            db = _open_read_only(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise LedgerError(f"ledger {path}: cannot open ({exc}{hint(exc) if isinstance(exc, sqlite3.Error) else ''})") from None
    try:
        version = _one(db, "PRAGMA user_version")
        app = _one(db, "PRAGMA application_id")
        tables = _one(db, "SELECT count(*) FROM sqlite_master")
        if app not in (0, APPLICATION_ID) or (app == 0 and tables):
            raise LedgerError(f"ledger {path}: an SQLite file of some other program, not a sparkdoctor ledger; "
                              "pass another --ledger")
        if code := db.execute("SELECT type, name FROM sqlite_master WHERE type NOT IN ('table', 'index') "
                              "OR sql LIKE 'CREATE VIRTUAL%'").fetchone():  # SQL that runs on a read or a write
            raise LedgerError(f"ledger {path}: holds the {code[0]} {code[1]!r}, which no sparkdoctor ledger has (its SQL would run as the ledger is read or written); move it aside or pass another --ledger")
        if version < 0:
            raise LedgerError(f"ledger {path}: schema version {version} is not one any sparkdoctor writes (a damaged "
                              "file, or not a ledger); move it aside or pass another --ledger")
        if version > SCHEMA_VERSION:
            raise LedgerError(f"ledger {path}: schema {version} was written by a newer sparkdoctor "
                              f"(this one reads up to {SCHEMA_VERSION}); upgrade sparkdoctor")
        if version < SCHEMA_VERSION and read_only:
            _as_current(db)
        db.execute("PRAGMA foreign_keys = ON")
        if version < SCHEMA_VERSION and not read_only:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            db.execute("BEGIN IMMEDIATE")
            try:
                version = _one(db, "PRAGMA user_version")  # another process may have migrated meanwhile
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    MIGRATIONS[target](db)
                    db.execute(f"PRAGMA user_version = {target}")
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return db
    except sqlite3.DatabaseError as exc:
        db.close()
        if hint(exc):  # a healthy ledger another process holds, or a full disk: never "move it aside"
            raise LedgerError(f"ledger {path}: {exc}{hint(exc)}") from None
        raise LedgerError(f"ledger {path}: unreadable ({exc}); move it aside or pass another --ledger") from None
    except UnicodeDecodeError:  # SQLite's "malformed database schema" quotes the damaged bytes; Python cannot decode it
        db.close()
        raise LedgerError(f"ledger {path}: unreadable (a damaged schema: bytes that are not UTF-8); move it aside or "
                          "pass another --ledger") from None
    except LedgerError:
        db.close()
        raise
