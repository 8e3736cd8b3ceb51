"""Published results of other harnesses read as bench cells, so `bench --reproduce FILE` can rerun them here:

  llama-benchy  its JSON report (`llama-benchy --format json --save-result FILE`; the BenchmarkReport of
                llama_benchy/results.py, 0.4.0): version, timestamp, model, latency_mode, max_concurrency and
                `benchmarks`, one row per (prompt size, response size, context depth, concurrency) with
                mean/std/values of each figure
  sparkrun      the YAML `sparkrun benchmark` exports and Spark Arena collects (sparkrun 0.4.2,
                benchmarking/base.py _write_measurement: `sparkrun_benchmark` with the recipe, the model, the
                cluster's runtime_info versions, the benchmark's framework and args, and `results.json`, which is
                llama-benchy's report)

What maps onto a cell: the model's name, the workload (chat API, response size as max tokens, prompt size as
prompt words, the concurrency levels, the runs as rounds), and per concurrency the decode tok/s per stream
(llama-benchy's per-request generation rate, `tg_req_throughput`, the same figure as bench's headline); from
sparkrun also the engine, torch and the recipe's name and container. Everything else a cell has is named in one
line (`lacks`). Rows of other prompt/response sizes or context depths than the first are kept, not compared.

Pipeline code: returns dicts; renders nothing.
"""

from __future__ import annotations

from typing import Any

LLAMA_BENCHY = "llama-benchy"
SPARKRUN = "sparkrun"
_REPORT_KEYS = {"version", "model", "benchmarks"}
_FIGURES = ("pp_throughput", "pp_req_throughput", "tg_throughput", "tg_req_throughput", "peak_throughput", "ttfr",
            "est_ppt", "e2e_ttft")
ENGINES = ("vllm", "sglang", "trtllm", "tensorrt_llm", "llama_cpp", "max")  # sparkrun runtime_info keys of an engine
LACKS = ("toolchain fingerprint (driver, packages' files, env, GPU, arch)", "model identity", "machine load and memory",
         "server metrics", "TTFT, TPOT and output tok/s as bench takes them")


class ImportedError(ValueError):
    """What is wrong with a file that looked like an import (cell.read names the file)."""


def kind_of(data: Any) -> str | None:
    """LLAMA_BENCHY, SPARKRUN, or None for anything else."""
    if isinstance(data, dict) and isinstance(data.get("sparkrun_benchmark"), dict):
        return SPARKRUN
    if isinstance(data, dict) and _REPORT_KEYS <= set(data) and isinstance(data.get("benchmarks"), list):
        return LLAMA_BENCHY
    return None


def to_cell(data: dict[str, Any], kind: str, cell_name: str, cell_version: int) -> dict[str, Any]:
    """The cell of a llama-benchy report or a sparkrun export; ImportedError when its fields cannot make one."""
    outer: dict[str, Any] = {}
    report = data
    if kind == SPARKRUN:
        outer = data["sparkrun_benchmark"]
        report = ((outer.get("results") or {}) if isinstance(outer.get("results"), dict) else {}).get("json") or {}
        if kind_of(report) != LLAMA_BENCHY:
            framework = (outer.get("benchmark") or {}).get("framework") if isinstance(outer.get("benchmark"), dict) else None
            raise ImportedError(f"a sparkrun benchmark export whose results are not llama-benchy's (framework "
                               f"{str(framework)[:40]!r}): only llama-benchy results are read")
    rows = [r for r in report["benchmarks"] if isinstance(r, dict)]
    plain = [r for r in rows if not r.get("context_size") and not r.get("is_context_prefill_phase")]
    if not plain:
        raise ImportedError("llama-benchy report with no row at context depth 0: nothing to compare a bench run with")
    first = plain[0]
    pp, tg = _whole(first.get("prompt_size"), "prompt_size"), _whole(first.get("response_size"), "response_size")
    chosen = [r for r in plain if r.get("prompt_size") == pp and r.get("response_size") == tg]
    levels, runs = [], 0
    for row in sorted(chosen, key=lambda r: _whole(r.get("concurrency"), "concurrency")):
        per_stream = _mean(row.get("tg_req_throughput")) or _mean(row.get("tg_throughput"))
        runs = max(runs, len((row.get("tg_throughput") or {}).get("values") or []))
        levels.append({"concurrency": row["concurrency"],
                       "headline": {"decode_tps_per_stream": per_stream,
                                    "source": f"{LLAMA_BENCHY} tg_req_throughput (mean of its runs)"},
                       LLAMA_BENCHY.replace("-", "_"): {f: _mean(row.get(f)) for f in _FIGURES}})
    concurrency = sorted({lvl["concurrency"] for lvl in levels})
    if len(concurrency) != len(levels):
        raise ImportedError("llama-benchy report with two rows for one concurrency at one size")
    version = str(report.get("version") or "?")
    recipe, model, versions = _sparkrun_parts(outer) if outer else ({}, None, {})
    lacks = list(LACKS) + ([] if outer else ["engine and versions", "recipe"])
    others = len(rows) - len(chosen)
    cell: dict[str, Any] = {
        "cell": cell_name, "cell_version": cell_version, "config_hash": "",
        "created_at": str(outer.get("timestamp") or report.get("timestamp") or "") or None,
        "tool_version": None, "bench_version": None, "run_id": None,
        "imported": {"from": kind, "harness": f"{LLAMA_BENCHY} {version}", "versions": versions, "lacks": lacks,
                     "rows_not_compared": others, "latency_mode": report.get("latency_mode"),
                     "prefix_caching_enabled": report.get("prefix_caching_enabled")},
        "recipe": recipe,
        "toolchain": {"fingerprint": None, "material": None, "facts": {}},
        "model": {"name": model or report.get("model"), "ref": model, "identity": None},
        "machine": {"load": None, "memory": {}, "cpus": None},
        "server": {},
        "workload": {"api": "chat", "max_tokens": tg, "prompt_words": pp, "concurrency": concurrency,
                     "rounds": max(1, runs)},
        "numbers": {"headline": {**levels[0]["headline"], "concurrency": levels[0]["concurrency"]}, "levels": levels,
                    "seconds": None},
        "correctness": None,
    }
    return cell


def _sparkrun_parts(outer: dict[str, Any]) -> tuple[dict[str, Any], str | None, dict[str, Any]]:
    """(recipe, model, versions) of a sparkrun export: the recipe's name and container, its model, and the
    engine's and torch's versions from the cluster's runtime_info."""
    recipe: dict[str, Any] = outer["recipe"] if isinstance(outer.get("recipe"), dict) else {}
    info = (outer.get("cluster") or {}).get("runtime_info") if isinstance(outer.get("cluster"), dict) else None
    info = info if isinstance(info, dict) else {}
    versions = {k: str(v) for k, v in info.items() if isinstance(v, (str, int, float)) and str(v) not in ("", "unknown")}
    mine = {"name": recipe.get("name"), "container": recipe.get("container"), "runtime": recipe.get("runtime"),
            "fingerprint": recipe.get("hash")}
    model = recipe.get("hf_model") or recipe.get("model")
    return {k: v for k, v in mine.items() if v}, str(model) if model else None, versions


def differences(there: dict[str, Any], here: dict[str, Any]) -> list[dict[str, Any]]:
    """An imported cell against the run here, key by key, over what the import has: the harness, the engine's and
    torch's versions, the model's name, the recipe's name and container, the workload settings it names."""
    rows = [{"group": "bench", "key": "harness", "there": there["imported"].get("harness"),
             "here": f"sparkdoctor bench {here.get('bench_version')}"}]
    rows += toolchain_rows(there, here["toolchain"].get("facts") or {})
    pairs = [("model", "model.name", there["model"].get("name"), here["model"].get("name"))]
    pairs += [("recipe", f"recipe.{k}", there["recipe"][k], here["recipe"].get(k, "(absent)"))
              for k in ("name", "container") if k in there["recipe"]]
    pairs += [("workload", f"workload.{k}", v, here["workload"].get(k, "(absent)")) for k, v in there["workload"].items()]
    rows += [{"group": g, "key": k, "there": a, "here": b} for g, k, a, b in pairs if a != b]
    return rows


def toolchain_rows(there: dict[str, Any], here_facts: dict[str, Any]) -> list[dict[str, Any]]:
    """An imported cell's versions (engine, torch) against the run here, key by key; no row for what it lacks."""
    versions = (there.get("imported") or {}).get("versions") or {}
    packages = here_facts.get("packages") or {}
    rows = []
    for key in (*ENGINES, "torch"):
        if key in versions:
            name = key.replace("_", "-")
            here = (packages.get(name) or {}).get("version") if isinstance(packages.get(name), dict) else None
            if str(here) != versions[key]:
                rows.append({"group": "toolchain", "key": f"toolchain.packages.{name}", "there": versions[key],
                             "here": here if here is not None else "(absent)"})
    return rows


def lacks_line(there: dict[str, Any]) -> str:
    imported = there.get("imported") or {}
    line = (f"imported from a {imported.get('from')} result ({imported.get('harness')}); not in it, so not compared: "
            + "; ".join(imported.get("lacks") or []) + ". Its numbers stand beside these, taken by another harness: "
            "no ratios")
    if imported.get("rows_not_compared"):
        line += f"; {imported['rows_not_compared']} row(s) of other sizes or context depths not compared"
    return line


def _mean(metric: Any) -> float | None:
    value = metric.get("mean") if isinstance(metric, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _whole(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ImportedError(f"llama-benchy row with {name} {str(value)[:20]!r}, not a whole number >= 1")
    return value
