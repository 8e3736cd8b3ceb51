"""Published results of other harnesses read as bench cells, so `bench --reproduce FILE` can rerun them here:

  llama-benchy  its JSON report (`llama-benchy --format json --save-result FILE`; the BenchmarkReport of
                llama_benchy/results.py, 0.4.0): version, timestamp, model, latency_mode, max_concurrency and
                `benchmarks`, one row per (prompt size, response size, context depth, concurrency) with
                mean/std/values of each figure
  sparkrun      the YAML `sparkrun benchmark` exports (sparkrun 0.4.2, benchmarking/base.py _write_measurement:
                `sparkrun_benchmark` with the recipe, the model, the cluster's runtime_info versions, the
                benchmark's framework and args, and `results.json`, which is llama-benchy's report)
  spark-arena   a Spark Arena submission (sparkrun 0.4.2, plugins/sparkarena/integration.py complete(): the files
                it uploads): metadata.json, the run's provenance (recipe, runtime_info, benchmark framework and
                args, sparkrun version), named on the command line, with benchmark.csv beside it (llama-benchy's
                CSV: one `ppN`/`tgN[ @ dD][ (cC)]` row per figure, means and stds)

What maps onto a cell: the model's name, the workload (chat API, response size as max tokens, prompt size as
prompt words, the concurrency levels, the runs as rounds), and per concurrency the decode tok/s per stream
(llama-benchy's per-request generation rate, `tg_req_throughput` / `t_s_req_mean`, the same figure as bench's
headline); from sparkrun also the engine, torch and the recipe's name and container. Everything else a cell has is
named in one line (`lacks`). Rows of other prompt/response sizes or context depths than the first are counted,
not compared.

Pipeline code: returns dicts; renders nothing.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from typing import TypedDict

from sparkdoctor.facts_shapes import table
from sparkdoctor.ledger.compare import dig

LLAMA_BENCHY = "llama-benchy"
SPARKRUN = "sparkrun"
SPARK_ARENA = "spark-arena"
ARENA_CSV = "benchmark.csv"  # beside metadata.json, as the submission uploads them
_REPORT_KEYS = {"version", "model", "benchmarks"}
_FIGURES = ("pp_throughput", "pp_req_throughput", "tg_throughput", "tg_req_throughput", "peak_throughput", "ttfr",
            "est_ppt", "e2e_ttft")
_CSV_FIGURES = {"tg_throughput": "t_s_mean", "tg_req_throughput": "t_s_req_mean", "peak_throughput": "peak_ts_mean",
                "peak_req_throughput": "peak_ts_req_mean"}
_TEST_NAME = re.compile(r"^(pp|tg)(\d+)(?: @ d(\d+))?(?: \(c(\d+)\))?$")
ENGINES = ("vllm", "sglang", "trtllm", "tensorrt_llm", "llama_cpp", "max")  # sparkrun runtime_info keys of an engine
LLAMA_BENCHY_RUNS = 3  # llama-benchy's default --runs, for a CSV that does not say
LACKS = ("toolchain fingerprint (driver, packages' files, env, GPU, arch)", "model identity", "machine load and memory",
         "server metrics", "TTFT, TPOT and output tok/s as bench takes them")


class ImportedError(ValueError):
    """What is wrong with a file that looked like an import (cell.read names the file)."""


class Row(TypedDict):
    """One generation row of llama-benchy's JSON report or CSV, normalised."""

    concurrency: int
    depth: object  # the context depth as given (-1: a prefill phase); only a falsy one is compared
    pp: int | None  # prompt size (None: unknown, not compared)
    tg: int  # response size
    per_stream: float | None
    runs: int
    figures: dict[str, float | None]
    model: str | None


def kind_of(data: object) -> str | None:
    """LLAMA_BENCHY, SPARKRUN, SPARK_ARENA (a submission's metadata.json), or None for anything else."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("sparkrun_benchmark"), dict):
        return SPARKRUN
    if _REPORT_KEYS <= set(data) and isinstance(data.get("benchmarks"), list):
        return LLAMA_BENCHY
    if isinstance(data.get("recipe"), dict) and isinstance(data.get("benchmark"), dict) and "runtime_info" in data:
        return SPARK_ARENA
    return None


def to_cell(data: Mapping[str, object], kind: str, cell_name: str, cell_version: int,
            arena_csv: str | None = None) -> dict[str, object]:
    """The cell of a llama-benchy report, a sparkrun export or a Spark Arena submission (its metadata.json, and
    `arena_csv` the text of the benchmark.csv beside it); ImportedError when its fields cannot make one."""
    outer: Mapping[str, object] = {}
    report: Mapping[str, object] = data
    if kind == SPARKRUN:
        outer = table(data["sparkrun_benchmark"])
        report = table(dig(outer, ("results", "json")))
    elif kind == SPARK_ARENA:
        outer, report = data, {}
    framework = dig(outer, ("benchmark", "framework"))
    if outer and (framework != LLAMA_BENCHY or (kind == SPARKRUN and kind_of(report) != LLAMA_BENCHY)):
        raise ImportedError(f"a {kind} result whose benchmark is not llama-benchy's (framework {str(framework)[:40]!r}): "
                            "only llama-benchy results are read")
    model_name: object
    if kind == SPARK_ARENA:
        rows = csv_rows(arena_csv or "", table(dig(outer, ("benchmark", "args"))))
        version, model_name = "(its version is not recorded)", next((r["model"] for r in rows if r["model"]), None)
    else:
        benchmarks = report.get("benchmarks")  # a list: kind_of says so
        rows = [_json_row(r) for r in benchmarks if isinstance(r, dict)] if isinstance(benchmarks, list) else []
        version, model_name = str(report.get("version") or "?"), report.get("model")
    plain = [r for r in rows if not r["depth"] and r["pp"] is not None]
    if not plain:
        raise ImportedError(f"a {kind} result with no generation row at context depth 0 of a known prompt size: "
                            "nothing to compare a bench run with")
    pp, tg = plain[0]["pp"], plain[0]["tg"]
    levels: dict[int, Row] = {}  # per concurrency, its first row of the first sizes
    for row in plain:
        if (row["pp"], row["tg"]) == (pp, tg):
            levels.setdefault(row["concurrency"], row)
    ordered = [{"concurrency": c, "headline": _headline(levels[c]), "llama_benchy": levels[c]["figures"]}
               for c in sorted(levels)]
    bench = table(outer.get("benchmark"))
    runs = max((r["runs"] for r in plain), default=0) or _whole_or(bench.get("args"), "runs")
    recipe, model, versions = _sparkrun_parts(outer) if outer else ({}, None, {})
    timestamp = outer.get("timestamp") or report.get("timestamp") or bench.get("measured_at")
    return {
        "cell": cell_name, "cell_version": cell_version, "config_hash": "",
        "created_at": str(timestamp) if timestamp else None, "tool_version": None, "bench_version": None, "run_id": None,
        "imported": {"from": kind, "harness": f"{LLAMA_BENCHY} {version}", "versions": versions,
                     "lacks": list(LACKS) + ([] if outer else ["engine and versions", "recipe"]),
                     "rows_not_compared": len(rows) - len(ordered), "latency_mode": report.get("latency_mode"),
                     "prefix_caching_enabled": report.get("prefix_caching_enabled")},
        "recipe": recipe,
        "toolchain": {"fingerprint": None, "material": None, "facts": {}},
        "model": {"name": model or model_name, "ref": model, "identity": None},
        "machine": {"load": None, "memory": {}, "cpus": None},
        "server": {},
        "workload": {"api": "chat", "max_tokens": tg, "prompt_words": pp, "concurrency": sorted(levels),
                     "rounds": runs or LLAMA_BENCHY_RUNS},
        "numbers": {"headline": {**_headline(levels[min(levels)]), "concurrency": min(levels)}, "levels": ordered,
                    "seconds": None},
        "correctness": None,
    }


def _headline(row: Row) -> dict[str, object]:
    return {"decode_tps_per_stream": row["per_stream"], "source": f"{LLAMA_BENCHY} tg_req_throughput (mean of its runs)"}


def _json_row(row: Mapping[str, object]) -> Row:
    """One row of a llama-benchy report, normalised: concurrency, depth, pp, tg, per_stream, runs, figures."""
    depth = row.get("context_size") or 0
    if row.get("is_context_prefill_phase"):
        depth = depth or -1  # a prefill phase is never compared
    return {"concurrency": _whole(row.get("concurrency"), "concurrency"), "depth": depth,
            "pp": _whole(row.get("prompt_size"), "prompt_size"), "tg": _whole(row.get("response_size"), "response_size"),
            "per_stream": _mean(row.get("tg_req_throughput")) or _mean(row.get("tg_throughput")),
            "runs": len(values) if isinstance(values := dig(row, ("tg_throughput", "values")), list) else 0,
            "figures": {f: _mean(row.get(f)) for f in _FIGURES}, "model": None}


def csv_rows(text: str, args: Mapping[str, object]) -> list[Row]:
    """The generation rows of llama-benchy's CSV, normalised as _json_row's. A `tgN` row's prompt size is the
    `ppM` row just before it at the same depth and concurrency (llama-benchy writes each run's pp row, then its tg
    row), else the only prompt size the submission's args name, else unknown (None: not compared)."""
    try:
        table = list(csv.DictReader(io.StringIO(text)))
    except csv.Error as exc:
        raise ImportedError(f"{ARENA_CSV}: not llama-benchy's CSV ({exc})") from None
    if not table or "test_name" not in table[0] or "t_s_req_mean" not in table[0]:
        raise ImportedError(f"{ARENA_CSV}: not llama-benchy's CSV (no test_name and t_s_req_mean columns)")
    named = args.get("pp")
    pps: list[object] = named if isinstance(named, list) else [named] if isinstance(named, int) else []
    only = pps[0] if len(pps) == 1 and isinstance(pps[0], int) else None
    rows: list[Row] = []
    before = None
    for line in table:
        m = _TEST_NAME.match(str(line.get("test_name") or "").strip())
        if m is None:  # ctx_pp / ctx_tg: the prefix-cache phases
            before = None
            continue
        what, size, depth, conc = m.group(1), int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 1)
        if what == "pp":
            before = (size, depth, conc)
            continue
        pp = before[0] if before and before[1:] == (depth, conc) else only
        before = None
        figures = {name: _number(line.get(col)) for name, col in _CSV_FIGURES.items()}
        rows.append({"concurrency": conc, "depth": depth, "pp": pp, "tg": size, "runs": 0, "model": line.get("model"),
                     "per_stream": figures["tg_req_throughput"] or figures["tg_throughput"], "figures": figures})
    return rows


def _sparkrun_parts(outer: Mapping[str, object]) -> tuple[dict[str, object], str | None, dict[str, str]]:
    """(recipe, model, versions) of a sparkrun export: the recipe's name and container, its model, and the
    engine's and torch's versions from the cluster's runtime_info."""
    recipe = table(outer.get("recipe"))
    info = outer.get("runtime_info")  # a submission's metadata.json; an export has it under cluster
    if not isinstance(info, dict):
        info = dig(outer, ("cluster", "runtime_info"))
    info = table(info)
    versions = {k: str(v) for k, v in info.items() if isinstance(v, (str, int, float)) and str(v) not in ("", "unknown")}
    mine = {"name": recipe.get("name"), "container": recipe.get("container"), "runtime": recipe.get("runtime"),
            "fingerprint": recipe.get("hash")}
    model = recipe.get("hf_model") or recipe.get("model")
    return {k: v for k, v in mine.items() if v}, str(model) if model else None, versions


def differences(there: Mapping[str, object], here: Mapping[str, object]) -> list[dict[str, object]]:
    """An imported cell against the run here, key by key, over what the import has: the harness, the engine's and
    torch's versions, the model's name, the recipe's name and container, the workload settings it names."""
    rows: list[dict[str, object]] = [{"group": "bench", "key": "harness", "there": dig(there, ("imported", "harness")),
                                      "here": f"sparkdoctor bench {here.get('bench_version')}"}]
    rows += toolchain_rows(there, table(dig(here, ("toolchain", "facts"))))
    recipe, workload = table(there["recipe"]), table(here["workload"])
    pairs = [("model", "model.name", dig(there, ("model", "name")), dig(here, ("model", "name")))]
    pairs += [("recipe", f"recipe.{k}", recipe[k], table(here["recipe"]).get(k, "(absent)"))
              for k in ("name", "container") if k in recipe]
    pairs += [("workload", f"workload.{k}", v, workload.get(k, "(absent)")) for k, v in table(there["workload"]).items()]
    rows += [{"group": g, "key": k, "there": a, "here": b} for g, k, a, b in pairs if a != b]
    return rows


def toolchain_rows(there: Mapping[str, object], here_facts: Mapping[str, object]) -> list[dict[str, object]]:
    """An imported cell's versions (engine, torch) against the run here, key by key; no row for what it lacks."""
    versions = table(dig(there, ("imported", "versions")))
    rows: list[dict[str, object]] = []
    for key in (*ENGINES, "torch"):
        if key in versions:
            name = key.replace("_", "-")
            here = dig(here_facts, ("packages", name, "version"))
            if str(here) != versions[key]:
                rows.append({"group": "toolchain", "key": f"toolchain.packages.{name}", "there": versions[key],
                             "here": here if here is not None else "(absent)"})
    return rows


def lacks_line(there: Mapping[str, object]) -> str:
    imported = table(there.get("imported"))
    lacks = imported.get("lacks")
    line = (f"imported from a {imported.get('from')} result ({imported.get('harness')}); not in it, so not compared: "
            + "; ".join(lacks if isinstance(lacks, list) else []) + ". Its numbers stand beside these, taken by another harness: "
            "no ratios")
    if imported.get("rows_not_compared"):
        line += f"; {imported['rows_not_compared']} row(s) of other sizes or context depths not compared"
    return line


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _whole_or(section: object, key: str) -> int:
    value = section.get(key) if isinstance(section, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _mean(metric: object) -> float | None:
    value = metric.get("mean") if isinstance(metric, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _whole(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ImportedError(f"llama-benchy row with {name} {str(value)[:20]!r}, not a whole number >= 1")
    return value
