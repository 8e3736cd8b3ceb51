"""A bench run others can reproduce: one self-contained "cell" (`bench --export FILE`), and the comparison of a
cell with a run here (`bench --reproduce FILE`), key by key, so that a gap comes with its likely cause.

A cell is built from the run as the ledger stores it (sparkdoctor/ledger/: recipe, Facts, workload, summary),
so an exported run and a stored one never disagree. It carries the recipe as resolved, the toolchain fingerprint
and its material (Facts.fingerprint_material) with the whole Facts, the model's name and identity
(bench/model_identity.py), the machine's load and memory, the workload and every number, and a config hash over
what defines the cell (toolchain fingerprint, model, recipe, workload, bench version; never its load or numbers),
as inference-atlas keys its published results. The layout is documented in docs/json.md ("bench cells").

Pipeline code: returns dicts and dataclass documents; renders nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor import inputs
from sparkdoctor.bench import load
from sparkdoctor.bench.workload import Workload, WorkloadError
from sparkdoctor.errors import InputError
from sparkdoctor.facts import Facts, FactsError
from sparkdoctor.facts_shapes import table
from sparkdoctor.ledger.compare import Figure, compare_runs, dig
from sparkdoctor.ledger.store import recipe_hash

CELL = "sparkdoctor bench cell"
CELL_VERSION = 1
MAX_CELL_BYTES = 16 * 2**20  # a cell holds one run's Facts and summary: a few hundred KiB; more is not a cell
RECIPE_KEYS = ("name", "format", "fingerprint", "env", "model", "served_model_name", "workarounds", "params", "container")


class CellError(InputError):
    """A cell file that cannot be read or is not a cell (exit 2, one line naming the file)."""

    code = "bad-cell"


# ---- building a cell ------------------------------------------------------------------------------------
def _model(run: Mapping[str, object]) -> dict[str, object]:
    served = table(dig(run, ("facts", "recipe", "model")))
    return {"name": run.get("model"), "ref": served.get("ref") or dig(run, ("recipe", "model")),
            "identity": served.get("identity")}


def _material(facts: Mapping[str, object]) -> dict[str, object] | None:
    if not facts:
        return None  # a run whose toolchain is unknown
    try:
        material = Facts.from_dict(facts, source="bench cell").fingerprint_material()
    except FactsError:
        return None
    result: dict[str, object] = json.loads(json.dumps(material, default=list))  # tuples as JSON has them
    return result


def config_material(cell: Mapping[str, object]) -> dict[str, object]:
    """What defines a cell: the same material is the same configuration, whatever its numbers. A --url run's
    server configuration (bench/served.py) is in it when the cell has one (a cell exported before keeps its hash)."""
    material = {"toolchain": dig(cell, ("toolchain", "fingerprint")),
                "model": {"name": dig(cell, ("model", "name")), "identity": dig(cell, ("model", "identity", "sha256"))},
                "recipe": dig(cell, ("recipe", "fingerprint")), "workload": cell.get("workload"),
                "bench_version": cell.get("bench_version")}
    served = dig(cell, ("recipe", "served", "fingerprint"))
    return {**material, "served": served} if served is not None else material


def config_hash(cell: Mapping[str, object]) -> str:
    blob = json.dumps(config_material(cell), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def from_run(run: Mapping[str, object]) -> dict[str, object]:
    """The cell of one stored run (the shape of Ledger.run(): recipe, facts, workload, summary, server, ...)."""
    facts = table(run.get("facts"))
    summary = table(run.get("summary"))
    load = table(summary.get("load"))
    memory = table(dig(facts, ("host_health", "memory")))
    cell: dict[str, object] = {
        "cell": CELL, "cell_version": CELL_VERSION, "config_hash": "",
        "created_at": run.get("created_at"), "tool_version": run.get("tool_version"),
        "bench_version": run.get("bench_version"), "run_id": run.get("id"),
        "recipe": run.get("recipe") or {},
        "toolchain": {"fingerprint": run.get("fingerprint"), "material": _material(facts), "facts": facts},
        "model": _model(run),
        "machine": {"load": load,
                    "memory": {"total_kib": memory.get("total_kib"), "available_kib": memory.get("available_kib"),
                               "available_mib_before": dig(load, ("before", "mem_available_mib")),
                               "available_mib_after": dig(load, ("after", "mem_available_mib"))},
                    "cpus": dig(load, ("before", "cpus"))},
        "server": run.get("server") or {},
        "workload": run.get("workload") or {},
        "numbers": {k: summary.get(k) for k in ("headline", "levels", "seconds")},
        "correctness": summary.get("correctness"),
    }
    cell["config_hash"] = config_hash(cell)
    return cell


def dumps(cell: Mapping[str, object]) -> str:
    return json.dumps(cell, indent=1, default=str) + "\n"


# ---- reading a cell ------------------------------------------------------------------------------------
_OPTIONAL: tuple[tuple[str, str, tuple[type, ...]], ...] = (  # (section, key, types): null is always allowed
    ("", "config_hash", (str,)), ("", "bench_version", (int,)), ("", "created_at", (str,)),
    ("toolchain", "fingerprint", (str,)), ("toolchain", "material", (dict,)),
    ("model", "name", (str,)), ("model", "identity", (dict,)),
    ("machine", "load", (dict,)), ("machine", "cpus", (int,)), ("numbers", "headline", (dict,)))
_NAMES: dict[tuple[type, ...], str] = {(str,): "text", (int,): "a whole number", (dict,): "an object"}


def read(path: Path) -> dict[str, object]:
    """A cell file, checked; CellError (one line naming the file) for anything that is not one."""

    def bad(why: str) -> CellError:
        return CellError(f"--reproduce {path}: {why}")

    try:
        text = inputs.read_text(path, MAX_CELL_BYTES)
    except UnicodeDecodeError:
        raise bad("not UTF-8 text, so not a cell") from None
    except OSError as exc:
        raise bad(exc.strerror or str(exc)) from None
    try:
        cell = inputs.json_answer(text)
    except inputs.NotJSON as exc:
        cell = _sparkrun_yaml(path, text, bad)
        if cell is None:
            raise bad(str(exc).removeprefix("is ")) from None  # "not valid JSON (...)", "has a number too long ..."
    cell = _imported(cell, path, bad)
    if not isinstance(cell, dict) or cell.get("cell") != CELL:
        raise bad(f"not a bench cell (no \"cell\": {CELL!r}; write one with `bench --export FILE`), nor a "
                  "llama-benchy JSON report or a sparkrun benchmark export")
    version = cell.get("cell_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise bad("cell_version is not a whole number")
    if version > CELL_VERSION:
        raise bad(f"cell_version {version} is newer than this sparkdoctor reads ({CELL_VERSION}): upgrade sparkdoctor")
    for key in ("recipe", "toolchain", "model", "machine", "workload", "numbers"):
        if not isinstance(cell.get(key), dict):
            raise bad(f"{key} is missing or not an object")
    if not isinstance(cell["numbers"].get("levels"), list) or not all(isinstance(x, dict) for x in cell["numbers"]["levels"]):
        raise bad("numbers.levels is not a list of levels")
    if not isinstance(cell["toolchain"].get("facts"), dict):
        raise bad("toolchain.facts is missing or not an object")
    for where, key, kinds in _OPTIONAL:
        value = cell[where].get(key) if where else cell.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds):
            raise bad(f"{where + '.' if where else ''}{key} is a {type(value).__name__}, not {_NAMES[kinds]}")

    try:
        Workload.from_dict(cell["workload"])
    except (WorkloadError, TypeError) as exc:
        raise bad(str(exc)) from None
    return cell


def _sparkrun_yaml(path: Path, text: str, bad: Callable[[str], CellError]) -> object:
    """A sparkrun benchmark export (YAML), read safely; None for a file that is not one."""
    if not text.lstrip().startswith("sparkrun_benchmark:"):
        return None
    from sparkdoctor.recipes.model import RecipeError
    from sparkdoctor.recipes.yamlsafe import read_yaml

    try:
        return read_yaml(path)[0]
    except RecipeError as exc:
        raise bad(str(exc).removeprefix(f"{path}: ")) from None


def _imported(data: object, path: Path, bad: Callable[[str], CellError]) -> object:
    """A llama-benchy report, a sparkrun export or a Spark Arena submission (its metadata.json, benchmark.csv
    beside it) as a cell (bench/imported.py); anything else as it is."""
    from sparkdoctor.bench import imported

    kind = imported.kind_of(data)
    if kind is None:
        return data
    arena_csv = None
    if kind == imported.SPARK_ARENA:
        try:
            arena_csv = inputs.read_text(path.parent / imported.ARENA_CSV, MAX_CELL_BYTES)
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise bad(f"a Spark Arena submission's metadata.json, read with the {imported.ARENA_CSV} beside it: "
                      f"{why[:120]}") from None
    try:
        cell = imported.to_cell(table(data), kind, CELL, CELL_VERSION, arena_csv)
    except imported.ImportedError as exc:
        raise bad(str(exc)) from None
    cell["config_hash"] = config_hash(cell)
    return cell


def workload_of(cell: Mapping[str, object]) -> dict[str, Any]:
    """The cell's workload as bench overrides (flow.Options.overrides; read() has checked it)."""
    out = dict(table(cell["workload"]))
    if isinstance(conc := out.get("concurrency"), list):
        out["concurrency"] = tuple(conc)
    return out


# ---- a cell against a run here -------------------------------------------------------------------------
def _flatten(value: object, prefix: str) -> dict[str, object]:
    if isinstance(value, dict) and value:
        return {key: leaf for k, v in value.items() for key, leaf in _flatten(v, f"{prefix}.{k}").items()}
    return {prefix: value}


def _changed(group: str, there: Mapping[str, object], here: Mapping[str, object],
             pick: Callable[[Mapping[str, object]], object]) -> list[dict[str, object]]:
    """The keys under `group` (dotted, from what `pick` takes of each cell) whose values differ."""
    there_keys, here_keys = _flatten(pick(there), group), _flatten(pick(here), group)
    return [{"group": group, "key": key, "there": a, "here": b} for key in sorted(set(there_keys) | set(here_keys))
            if (a := there_keys.get(key, "(absent)")) != (b := here_keys.get(key, "(absent)"))]


def differences(there: Mapping[str, object], here: Mapping[str, object]) -> list[dict[str, object]]:
    """What differs between two cells, key by key, in the groups that explain a gap: toolchain (the fingerprint
    material), model, recipe, workload, load, bench (how the numbers were taken). An imported cell: over what it has."""
    if there.get("imported"):
        from sparkdoctor.bench import imported

        return imported.differences(there, here)
    rows = _changed("toolchain", there, here,
                    lambda c: {k: v for k, v in table(dig(c, ("toolchain", "material"))).items() if k != "model"})
    if (dig(there, ("toolchain", "material")) is None) != (dig(here, ("toolchain", "material")) is None):
        rows.append({"group": "toolchain", "key": "toolchain", "there": dig(there, ("toolchain", "fingerprint")),
                     "here": dig(here, ("toolchain", "fingerprint"))})
    rows += _changed("model", there, here, lambda c: {k: dig(c, ("model", k)) for k in ("name", "identity")})
    rows += _changed("recipe", there, here, _recipe_settings)
    rows += _changed("workload", there, here, lambda c: c["workload"])
    rows += _load_rows(there, here)
    if there.get("bench_version") != here.get("bench_version"):
        rows.append({"group": "bench", "key": "bench_version", "there": there.get("bench_version"),
                     "here": here.get("bench_version")})
    return rows


def _recipe_settings(cell: Mapping[str, object]) -> dict[str, object]:
    """A `--url` run's recipe is its URL, the model it asked for and what the server says of its configuration
    (bench/served.py, less its fingerprint and what it could not tell): the model is the model group's, the URL's
    port is no setting of the configuration."""
    recipe = table(cell["recipe"])
    if "url" not in recipe:
        return {k: recipe.get(k) for k in RECIPE_KEYS}
    served = {k: v for k, v in table(recipe.get("served")).items() if k not in ("fingerprint", "unknown")}
    return {**{k: recipe.get(k) for k in RECIPE_KEYS if k != "model"}, **({"served": served} if served else {})}


def _load_rows(there: Mapping[str, object], here: Mapping[str, object]) -> list[dict[str, object]]:
    """The load only where it clearly differs (bench/load.py's A/B rule), or where one side was busy."""

    rows: list[dict[str, object]] = []
    there_load, here_load = table(dig(there, ("machine", "load"))), table(dig(here, ("machine", "load")))
    a, b = there_load.get("busy"), here_load.get("busy")
    if bool(a) != bool(b):  # busy on one side only (the reasons' figures always differ)
        rows.append({"group": "load", "key": "load.busy", "there": a, "here": b})
    a, b = there_load.get("index"), here_load.get("index")
    if isinstance(a, dict) and isinstance(b, dict) and all({"cpus", "other_cpus", "gpu_other_mib"} <= set(i) for i in (a, b)):
        try:
            why = load.arms_differ([a], [b], ("there", "here"))
        except (TypeError, ValueError):
            why = None
        if why:
            rows.append({"group": "load", "key": "load.index", "there": a, "here": b, "why": why})
    a, b = dig(there, ("machine", "cpus")), dig(here, ("machine", "cpus"))
    if a != b:
        rows.append({"group": "load", "key": "machine.cpus", "there": a, "here": b})
    return rows


def _as_run(cell: Mapping[str, object], label: str) -> dict[str, object]:
    """A cell in the shape ledger.compare reads (a stored run)."""

    return {"id": label, "created_at": cell.get("created_at"), "recipe_name": dig(cell, ("recipe", "name")),
            "fingerprint": dig(cell, ("toolchain", "fingerprint")), "bench_version": cell.get("bench_version"),
            "model": dig(cell, ("model", "name")), "recipe_hash": recipe_hash(table(cell["recipe"])),
            "workload": cell["workload"], "summary": {"levels": dig(cell, ("numbers", "levels")) or []},
            "facts": dig(cell, ("toolchain", "facts")) or {}}


@dataclass
class Reproduction:
    """A cell reproduced here: the numbers side by side and what differs, key by key (`bench --reproduce`)."""

    source: str
    there: Mapping[str, object]
    here: Mapping[str, object]
    numbers: list[Figure]
    comparable: bool
    differences: list[dict[str, object]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def causes(self) -> list[str]:
        """The groups that differ, in the order they explain a gap best."""
        order = ("bench", "toolchain", "model", "recipe", "workload", "load")
        groups = {row["group"] for row in self.differences}
        return [g for g in order if g in groups]

    @property
    def headline(self) -> Figure | None:
        """The headline figure (decode tok/s per stream at the headline's concurrency) there and here."""
        conc = dig(self.there, ("numbers", "headline", "concurrency"))
        return next((row for row in self.numbers
                     if row["concurrency"] == conc and row["figure"].endswith("(headline)")), None)

    def to_dict(self) -> dict[str, object]:
        return {"cell": self.source, "imported": self.there.get("imported"), "config_hash": {"there": self.there.get("config_hash"),
                                                     "here": self.here.get("config_hash")},
                "same_config": self.there.get("config_hash") == self.here.get("config_hash"),
                "comparable": self.comparable, "headline": self.headline, "numbers": self.numbers,
                "differences": self.differences, "likely_causes": self.causes, "notes": self.notes}


def reproduce(source: str, there: Mapping[str, object], here: Mapping[str, object]) -> Reproduction:
    """Compare an exported cell with the cell of the run just measured here."""

    compared = compare_runs(_as_run(there, "there"), _as_run(here, "here"))
    notes = [n for n in compared["notes"] if not n.startswith("different recipes")]
    if there.get("imported"):
        from sparkdoctor.bench import imported

        notes = [imported.lacks_line(there)] + [n for n in notes if not n.startswith(("not comparable", "different workloads"))]
    if there.get("config_hash") != config_hash(there):
        notes.append("the cell's config_hash does not match its contents: it was edited after export")
    return Reproduction(source, there, here, compared["numbers"], compared["comparable"], differences(there, here), notes)
