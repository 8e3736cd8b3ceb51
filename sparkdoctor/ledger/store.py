"""Read and write runs and comparisons in a ledger file (schema.py opens and migrates it).

A run is written in ONE transaction: the run row and all of its samples, or nothing. The samples
may be a generator: they are consumed inside the transaction, so an interruption while writing
(even SIGKILL) leaves the file as it was before the run.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sparkdoctor.ledger.schema import LedgerError, connect, default_path, hint


def _dump(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


# What each JSON column must hold. A row whose column does not (a disk error, a hand edit, another
# tool) is DAMAGED: it is listed with its damage named, never allowed to stop the listing of the others.
_JSON_TYPES = {"recipe_json": dict, "server_json": dict, "facts_json": dict, "workload_json": dict,
               "summary_json": dict, "findings_json": list, "sample_json": dict, "result_json": dict, "memory_json": dict}


def decode(column: str, text: Any) -> tuple[Any, str | None]:
    """(the value, None) or (None, what is wrong with it) for one stored JSON column."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:  # not text, not JSON, a 5,000-digit number, too deep
        return None, f"{column} is not JSON ({' '.join(str(exc).split())[:80]})"
    want = _JSON_TYPES.get(column)
    if want is not None and not isinstance(value, want):
        return None, f"{column} is a JSON {type(value).__name__}, not {'an object' if want is dict else 'a list'}"
    return value, None


def number(value: object, none_ok: bool = True) -> bool:
    """A finite JSON number (None too, where a figure may be missing): what a stored figure must be to be shown."""
    if value is None:
        return none_ok
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer of hundreds of digits
        return False


# The client figures a level shows: each an estimate (median and its 95% CI) or null (no sample measured it).
_ESTIMATES = ("decode_tps_per_stream", "output_tps", "ttft_s", "tpot_s")


def _level_problem(level: Mapping[str, object]) -> str | None:
    """A figure of the wrong kind (a string, a 401-digit number, an estimate that is a list); a figure that is
    absent was not measured (an older run, a --url run) and is shown as such."""
    where = f"summary_json level {level['concurrency']}"
    client, server = level.get("client") or {}, level.get("server") or {}
    if type(level.get("requests", 0)) is not int or not isinstance(client, dict) or not isinstance(server, dict):
        return f"{where}: its request count, client figures or server figures are of the wrong kind"
    for key in _ESTIMATES:
        est = client.get(key)
        if not (est is None or (isinstance(est, dict) and all(number(est.get(k)) for k in ("median", "ci_low", "ci_high")))):
            return f"{where}: client {key} is not an estimate of numbers"
    for key in ("round_output_tps", "round_output_tokens", "round_wall_s"):  # rerun and A/B read the rounds as numbers
        rounds = level.get(key, [])
        if not (isinstance(rounds, list) and all(number(v, False) for v in rounds)):
            return f"{where}: {key} is not a list of numbers"
    ttft = server.get("ttft_s")
    if not all(number(v) for v in (client.get("output_tps_pooled"), client.get("burst_share"), server.get("decode_tps_per_stream"),
                                   ttft.get("mean") if isinstance(ttft, dict) else ttft)):
        return f"{where}: a figure is not a number"
    return None


def levels_problem(summary: Mapping[str, object]) -> str | None:
    """What keeps a stored summary from being shown (None: nothing): its levels and headline, figure by figure."""
    levels = summary.get("levels", [])
    if not isinstance(levels, list) or not all(isinstance(lvl, dict) and type(lvl.get("concurrency")) is int for lvl in levels):
        return "summary_json levels is not a list of levels (objects with an integer concurrency)"
    for level in levels:
        if problem := _level_problem(level):
            return problem
    load = summary.get("load")
    index = load.get("index") if isinstance(load, dict) else None
    if load is not None and not (isinstance(load, dict) and (not index or (
            isinstance(index, dict) and all(number(index.get(k), False) for k in ("cpus", "other_cpus", "gpu_other_mib"))))):
        return "summary_json load is not an object whose index holds numbers (cpus, other_cpus, gpu_other_mib)"
    head = summary.get("headline")
    if head is not None and not (isinstance(head, dict) and number(head.get("decode_tps_per_stream"))
                                 and type(head.get("concurrency", 0)) is int and isinstance(head.get("source", ""), str)):
        return "summary_json headline is not an object of a number, its concurrency and its source"
    return None


def recipe_hash(recipe: Mapping[str, object]) -> str:
    """What identifies a recipe for comparison: the recipe's own fingerprint (its argv less the host and
    port the launcher replaces, env, model), else a hash of argv, env, model and url (not its name), and for a
    --url run the fingerprint of what the server says of its configuration."""
    fingerprint = recipe.get("fingerprint")
    if isinstance(fingerprint, str):
        return fingerprint
    material = {k: recipe.get(k) for k in ("argv", "env", "model", "url")}
    served = recipe.get("served")
    if isinstance(served, dict) and served.get("fingerprint") is not None:  # --url: the configuration the server says
        material["served"] = served["fingerprint"]  # (bench/served.py); absent from runs stored before: hashes kept
    return hashlib.sha256(_dump(material).encode()).hexdigest()[:16]


@dataclass
class RunRecord:
    recipe: Mapping[str, object]  # resolved: name, argv, env, model (or url, model for --url runs)
    base_url: str
    model: str
    server: Mapping[str, object]
    facts: Mapping[str, object]
    fingerprint: str
    bench_version: int
    tool_version: str
    workload: Mapping[str, object]
    summary: Mapping[str, object]
    findings: Sequence[Mapping[str, object]] = ()
    # (concurrency, round, index, sample dict); concurrency 0 = warm-up
    samples: Iterable[tuple[int, int, int, Mapping[str, object]]] = ()
    comparison_id: int | None = None
    arm: str | None = None
    memory: Mapping[str, object] | None = None  # serve/memwatch.py's record of the launched server (None: not sampled)
    created_at: str | None = None  # when it was measured (ISO 8601, UTC); None: now, as it is stored

    def as_stored(self, run_id: int | None = None) -> dict[str, object]:
        """The run as Ledger.run() returns it once stored (without samples): the same keys and JSON values."""
        now = self.created_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
        columns = (run_id, now, self.recipe.get("name"), recipe_hash(self.recipe), self.base_url, self.model,
                   self.fingerprint, self.bench_version, self.tool_version, self.comparison_id, self.arm)
        values = {"recipe": self.recipe, "server": self.server, "facts": self.facts, "workload": self.workload,
                  "summary": self.summary, "findings": self.findings, "memory": self.memory}
        return {**dict(zip(_RUN_COLUMNS, columns, strict=True)), **{k: json.loads(_dump(v)) for k, v in values.items()}}


_RUN_COLUMNS = ("id", "created_at", "recipe_name", "recipe_hash", "base_url", "model", "fingerprint",
                "bench_version", "tool_version", "comparison_id", "arm")
_JSON_COLUMNS = ("recipe_json", "server_json", "facts_json", "workload_json", "summary_json", "findings_json",
                 "memory_json")
_NULLABLE = {"memory_json"}  # NULL: a run stored before schema 4, a --url run, a server in a container


def _decode_row(texts: tuple[object, ...]) -> tuple[dict[str, object], list[str]]:
    """The JSON columns of a run row by name (summary_json -> summary), and what is damaged in them."""
    values: dict[str, object] = {}
    damaged: list[str] = []
    for column, text in zip(_JSON_COLUMNS, texts, strict=False):
        value, damage = (None, None) if text is None and column in _NULLABLE else decode(column, text)
        values[column[:-5]] = value
        damaged += [damage] if damage else []
    if isinstance(values["summary"], dict) and levels_problem(values["summary"]):
        damaged.append(str(levels_problem(values["summary"])))
    if isinstance(values["memory"], dict) and not number(values["memory"].get("high_water_bytes")):
        damaged.append("memory_json high_water_bytes is not a number")
    return values, damaged


class Ledger:
    def __init__(self, path: Path | None = None, read_only: bool = False):
        """`read_only`: for a command that only reads: the file is never created, migrated or written."""
        self.path = Path(path) if path else default_path()
        self.db = connect(self.path, read_only=read_only)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _failing(self) -> Iterator[None]:
        """An SQLite error inside as a LedgerError naming the file."""
        try:
            yield
        except sqlite3.Error as exc:
            raise LedgerError(f"ledger {self.path}: {exc}{hint(exc)}") from None

    # ---- writing ---------------------------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction (BEGIN IMMEDIATE: it waits for another writer), committed whole or rolled back."""
        with self._failing():
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:  # SQLite ends it itself on a full disk: the error to report is that one
                    self.db.execute("ROLLBACK")
                raise

    def add_run(self, run: RunRecord) -> int:
        """Store a whole run (row + samples) in one transaction; its id."""
        with self._transaction():
            return self._insert(run)

    def add_run_once(self, run: RunRecord) -> tuple[int, bool]:
        """Store a run unless the ledger holds it already (the same time, recipe, toolchain and numbers: a kept run
        imported twice, or by two imports at once); (its id, whether it was stored now). One transaction."""
        now = run.created_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
        samples = list(run.samples)
        with self._transaction():
            same = self.db.execute(
                "SELECT id FROM runs WHERE created_at = ? AND recipe_hash = ? AND fingerprint = ? AND arm IS ?"
                " AND summary_json = ? AND (SELECT count(*) FROM samples WHERE run_id = runs.id) = ? ORDER BY id LIMIT 1",
                (now, recipe_hash(run.recipe), run.fingerprint, run.arm, _dump(run.summary), len(samples))).fetchone()
            return (int(same[0]), False) if same else (self._insert(replace(run, samples=samples)), True)

    def _insert(self, run: RunRecord) -> int:
        """The run's row and samples, inside the caller's transaction."""
        now = run.created_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
        cur = self.db.execute(
            "INSERT INTO runs (created_at, recipe_name, recipe_hash, recipe_json, base_url, model, server_json,"
            " fingerprint, facts_json, bench_version, tool_version, workload_json, summary_json, findings_json,"
            " comparison_id, arm, memory_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (now, run.recipe.get("name"), recipe_hash(run.recipe), _dump(run.recipe), run.base_url, run.model,
             _dump(run.server), run.fingerprint, _dump(run.facts), run.bench_version, run.tool_version,
             _dump(run.workload), _dump(run.summary), _dump(run.findings), run.comparison_id, run.arm,
             None if run.memory is None else _dump(run.memory)))
        run_id = _rowid(cur)
        for conc, rnd, idx, sample in run.samples:
            self.db.execute("INSERT INTO samples (run_id, concurrency, round, idx, sample_json) VALUES (?,?,?,?,?)",
                            (run_id, conc, rnd, idx, _dump(sample)))
        return run_id

    def begin_comparison(self, a_label: str, b_label: str) -> int:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._failing():
            cur = self.db.execute("INSERT INTO comparisons (created_at, a_label, b_label, status) VALUES (?,?,?,'running')",
                                  (now, a_label, b_label))
            return _rowid(cur)

    def finish_comparison(self, comparison_id: int, status: str, result: Mapping[str, object] | None) -> None:
        with self._failing():
            self.db.execute("UPDATE comparisons SET status = ?, result_json = ? WHERE id = ?",
                            (status, _dump(result) if result is not None else None, comparison_id))

    def delete_run(self, run_id: int) -> bool:
        """Remove one run and its samples (the foreign key cascades) in one transaction; whether it was there. Its
        comparison and the conclusions that name it stay: a rerun reports such a conclusion broken."""
        with self._transaction():
            return self.db.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount > 0

    # ---- reading ---------------------------------------------------------------------------------
    def record(self, run_id: int) -> RunRecord | None:
        """One run as add_run() takes it, samples included (None: no such id); a damaged run raises LedgerError."""
        found = self.run(run_id)
        if found is None:
            return None
        if found.get("damaged"):
            raise LedgerError(f"ledger {self.path}: run {run_id} is damaged: {'; '.join(found['damaged'])}")
        samples = []
        with self._failing():
            rows = self.db.execute("SELECT concurrency, round, idx, sample_json FROM samples WHERE run_id = ? "
                                   "ORDER BY concurrency, round, idx", (run_id,)).fetchall()
        for c, r, i, text in rows:
            sample, damage = decode("sample_json", text)
            if damage is not None:
                raise LedgerError(f"ledger {self.path}: run {run_id} is damaged: sample {c}/{r}/{i}: {damage}")
            samples.append((c, r, i, sample))
        return RunRecord(**{f.name: found[f.name] for f in fields(RunRecord) if f.name != "samples"}, samples=samples)

    def conclusions_naming(self, run_id: int) -> list[str]:
        """The names of the conclusions whose runs include `run_id` (a damaged row is skipped), each once."""
        with self._failing():
            rows = self.db.execute("SELECT name, data_json FROM conclusions ORDER BY id").fetchall()
        names: list[str] = []
        for name, text in rows:
            data, damage = decode("data_json", text)
            runs = data.get("runs") if damage is None and isinstance(data, dict) else None
            ids = [i for v in runs.values() if isinstance(v, list) for i in v] if isinstance(runs, dict) else []
            if run_id in ids and name not in names:
                names.append(name)
        return names

    def runs(self, recipe: str | None = None, limit: int = 50) -> list[dict[str, object]]:
        """Newest first: the identifying columns and the headline of each run; a run whose stored JSON is
        damaged is listed too, with `damaged` naming what is wrong."""
        where, args = (" WHERE recipe_name = ?", (recipe,)) if recipe is not None else ("", ())
        sql = f"SELECT {', '.join(_RUN_COLUMNS + _JSON_COLUMNS)} FROM runs{where} ORDER BY id DESC LIMIT ?"
        with self._failing():
            rows = self.db.execute(sql, (*args, limit)).fetchall()
        out = []
        for row in rows:
            item = dict(zip(_RUN_COLUMNS, row[:len(_RUN_COLUMNS)], strict=False))
            values, damaged = _decode_row(row[len(_RUN_COLUMNS):])
            summary = values["summary"]
            item["headline"] = summary.get("headline") if isinstance(summary, dict) and not damaged else None
            memory = values["memory"] if isinstance(values["memory"], dict) and not damaged else {}
            item["memory_high_water_bytes"] = memory.get("high_water_bytes")
            if damaged:
                item["damaged"] = damaged
            out.append(item)
        return out

    def run(self, run_id: int, with_samples: bool = False) -> dict[str, Any] | None:
        """One run in full (None: no such id); damaged columns are None and named in `damaged`."""
        with self._failing():
            row = self.db.execute(f"SELECT {', '.join(_RUN_COLUMNS + _JSON_COLUMNS)} FROM runs WHERE id = ?",
                                  (run_id,)).fetchone()
            if row is None:
                return None
            item: dict[str, Any] = dict(zip(_RUN_COLUMNS, row[:len(_RUN_COLUMNS)], strict=False))
            values, damaged = _decode_row(row[len(_RUN_COLUMNS):])
            item.update(values)
            if with_samples:
                item["samples"] = []
                for c, r, i, s in self.db.execute(
                        "SELECT concurrency, round, idx, sample_json FROM samples WHERE run_id = ? "
                        "ORDER BY concurrency, round, idx", (run_id,)):
                    sample, damage = decode("sample_json", s)
                    item["samples"].append({"concurrency": c, "round": r, "idx": i,
                                            **(sample if damage is None else {"damaged": damage})})
                    damaged += [f"sample {c}/{r}/{i}: {damage}"] if damage else []
            if damaged:
                item["damaged"] = damaged
            return item

    def comparison(self, comparison_id: int) -> dict[str, object] | None:
        with self._failing():
            row = self.db.execute("SELECT id, created_at, a_label, b_label, status, result_json FROM comparisons WHERE id = ?",
                                  (comparison_id,)).fetchone()
            if row is None:
                return None
            runs = [r[0] for r in self.db.execute("SELECT id FROM runs WHERE comparison_id = ? ORDER BY id", (comparison_id,))]
        result, damage = decode("result_json", row[5]) if row[5] else (None, None)
        return {"id": row[0], "created_at": row[1], "a": row[2], "b": row[3], "status": row[4],
                "result": result, "runs": runs, **({"damaged": [damage]} if damage else {})}


def _rowid(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (sqlite3 gives one after every successful INSERT)."""
    rowid = cur.lastrowid
    assert rowid is not None
    return int(rowid)
