"""Read and write runs and comparisons in a ledger file (schema.py opens and migrates it).

A run is written in ONE transaction: the run row and all of its samples, or nothing. The samples
may be a generator: they are consumed inside the transaction, so an interruption while writing
(even SIGKILL) leaves the file as it was before the run.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from sparkdoctor.ledger.schema import LedgerError, connect, default_path


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def recipe_hash(recipe: dict[str, Any]) -> str:
    """What identifies a recipe for comparison: the recipe's own fingerprint (its argv less the host and
    port the launcher replaces, env, model), else a hash of argv, env, model and url (not its name)."""
    if isinstance(recipe.get("fingerprint"), str):
        return recipe["fingerprint"]
    material = {k: recipe.get(k) for k in ("argv", "env", "model", "url")}
    return hashlib.sha256(_dump(material).encode()).hexdigest()[:16]


@dataclass
class RunRecord:
    recipe: dict[str, Any]  # resolved: name, argv, env, model (or url, model for --url runs)
    base_url: str
    model: str
    server: dict[str, Any]
    facts: dict[str, Any]
    fingerprint: str
    bench_version: int
    tool_version: str
    workload: dict[str, Any]
    summary: dict[str, Any]
    findings: list[dict[str, Any]] = field(default_factory=list)
    # (concurrency, round, index, sample dict); concurrency 0 = warm-up
    samples: Iterable[tuple[int, int, int, dict[str, Any]]] = ()
    comparison_id: int | None = None
    arm: str | None = None


_RUN_COLUMNS = ("id", "created_at", "recipe_name", "recipe_hash", "base_url", "model", "fingerprint",
                "bench_version", "tool_version", "comparison_id", "arm")


class Ledger:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else default_path()
        self.db = connect(self.path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _fail(self, exc: sqlite3.Error) -> LedgerError:
        return LedgerError(f"ledger {self.path}: {exc}")

    # ---- writing ---------------------------------------------------------------------------------
    def add_run(self, run: RunRecord) -> int:
        """Store a whole run (row + samples) in one transaction; its id."""
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                cur = self.db.execute(
                    "INSERT INTO runs (created_at, recipe_name, recipe_hash, recipe_json, base_url, model, server_json,"
                    " fingerprint, facts_json, bench_version, tool_version, workload_json, summary_json, findings_json,"
                    " comparison_id, arm) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (now, run.recipe.get("name"), recipe_hash(run.recipe), _dump(run.recipe), run.base_url, run.model,
                     _dump(run.server), run.fingerprint, _dump(run.facts), run.bench_version, run.tool_version,
                     _dump(run.workload), _dump(run.summary), _dump(run.findings), run.comparison_id, run.arm))
                run_id = int(cur.lastrowid)
                for conc, rnd, idx, sample in run.samples:
                    self.db.execute("INSERT INTO samples (run_id, concurrency, round, idx, sample_json) VALUES (?,?,?,?,?)",
                                    (run_id, conc, rnd, idx, _dump(sample)))
                self.db.execute("COMMIT")
                return run_id
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._fail(exc) from None

    def begin_comparison(self, a_label: str, b_label: str) -> int:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            cur = self.db.execute("INSERT INTO comparisons (created_at, a_label, b_label, status) VALUES (?,?,?,'running')",
                                  (now, a_label, b_label))
            return int(cur.lastrowid)
        except sqlite3.Error as exc:
            raise self._fail(exc) from None

    def finish_comparison(self, comparison_id: int, status: str, result: dict[str, Any] | None) -> None:
        try:
            self.db.execute("UPDATE comparisons SET status = ?, result_json = ? WHERE id = ?",
                            (status, _dump(result) if result is not None else None, comparison_id))
        except sqlite3.Error as exc:
            raise self._fail(exc) from None

    # ---- reading ---------------------------------------------------------------------------------
    def runs(self, recipe: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Newest first: the identifying columns and the headline of each run."""
        sql = f"SELECT {', '.join(_RUN_COLUMNS)}, summary_json FROM runs"
        args: tuple[Any, ...] = ()
        if recipe is not None:
            sql += " WHERE recipe_name = ?"
            args = (recipe,)
        sql += " ORDER BY id DESC LIMIT ?"
        try:
            rows = self.db.execute(sql, (*args, limit)).fetchall()
        except sqlite3.Error as exc:
            raise self._fail(exc) from None
        out = []
        for row in rows:
            item = dict(zip(_RUN_COLUMNS, row[:-1]))
            item["headline"] = json.loads(row[-1]).get("headline")
            out.append(item)
        return out

    def run(self, run_id: int, with_samples: bool = False) -> dict[str, Any] | None:
        cols = _RUN_COLUMNS + ("recipe_json", "server_json", "facts_json", "workload_json", "summary_json", "findings_json")
        try:
            row = self.db.execute(f"SELECT {', '.join(cols)} FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            item: dict[str, Any] = {}
            for col, value in zip(cols, row):
                item[col[:-5] if col.endswith("_json") else col] = json.loads(value) if col.endswith("_json") else value
            if with_samples:
                item["samples"] = [
                    {"concurrency": c, "round": r, "idx": i, **json.loads(s)}
                    for c, r, i, s in self.db.execute(
                        "SELECT concurrency, round, idx, sample_json FROM samples WHERE run_id = ? "
                        "ORDER BY concurrency, round, idx", (run_id,))
                ]
            return item
        except sqlite3.Error as exc:
            raise self._fail(exc) from None

    def comparison(self, comparison_id: int) -> dict[str, Any] | None:
        try:
            row = self.db.execute("SELECT id, created_at, a_label, b_label, status, result_json FROM comparisons WHERE id = ?",
                                  (comparison_id,)).fetchone()
            if row is None:
                return None
            runs = [r[0] for r in self.db.execute("SELECT id FROM runs WHERE comparison_id = ? ORDER BY id", (comparison_id,))]
        except sqlite3.Error as exc:
            raise self._fail(exc) from None
        return {"id": row[0], "created_at": row[1], "a": row[2], "b": row[3], "status": row[4],
                "result": json.loads(row[5]) if row[5] else None, "runs": runs}

    def count_samples(self, run_id: int | None = None) -> int:
        sql, args = ("SELECT count(*) FROM samples", ()) if run_id is None else ("SELECT count(*) FROM samples WHERE run_id = ?", (run_id,))
        return int(self.db.execute(sql, args).fetchone()[0])
