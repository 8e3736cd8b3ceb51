"""The target's Python environment: interpreter, host, packages and their integrity, CuTe DSL build, env.

All of it comes from one probe (probes/target_env.py) run by the TARGET's interpreter, so the
sparkdoctor process never imports what it inspects. File hashes are cached per interpreter under
<cache>/hashes/, which keeps a warm check fast; `--no-cache` makes the probe re-hash everything.
Raw observations other collectors need (ptxas copies inside site-packages, pip config files, the
target's PATH) go to ctx.scratch, not into Facts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkdoctor.collect import Collector, CollectorError, Context
from sparkdoctor.locations import data_dir
from sparkdoctor.proc import Running
from sparkdoctor.target import Target, TargetError, parse_json_probe

PROBE = "target_env.py"
PROBE_TIMEOUT = 15.0
# A cold run hashes ~0.7 GB on a full vLLM venv (2-3 s here). On a slow disk the probe stops hashing
# at this budget, reports the rest as unverified and goes on from the cache next time, rather than
# losing every package fact to the timeout.
HASH_BUDGET = 8.0
SCRATCH_KEYS = ("ptxas_candidates", "pip_config_files", "path_env")
PRESTART_KEY = "target_probe_prestarted"
BASE_FIELDS = ("name", "version", "location")


def cache_file(cache_dir: Path, python: str) -> Path:
    """One hash cache per interpreter: two targets never share (or clobber) entries."""
    return cache_dir / "hashes" / f"{hashlib.sha256(python.encode()).hexdigest()[:16]}.json"


@dataclass
class Prestarted:
    """The probe, started before the rest of sparkdoctor is even imported (check's critical path)."""

    running: Running
    warning: str | None


def probe_args(target: Target, cache_dir: Path | None, use_cache: bool) -> tuple[list[str], str | None]:
    budget = ["--hash-budget", str(HASH_BUDGET)]
    if cache_dir is None:
        return budget, None
    python = str(target.describe().get("python") or "")
    path = cache_file(cache_dir, python)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return budget, f"hash cache folder {path.parent}: {exc.strerror or exc}; hashing without a cache"
    return budget + ["--cache", str(path)] + ([] if use_cache else ["--no-cache"]), None


def prestart(target: Target, cache_dir: Path | None, use_cache: bool) -> Prestarted:
    args, warning = probe_args(target, cache_dir, use_cache)
    return Prestarted(target.start_script(data_dir("probes") / PROBE, args), warning)


def run(ctx: Context) -> dict[str, Any]:
    early = ctx.scratch.pop(PRESTART_KEY, None)
    if not isinstance(early, Prestarted):
        early = prestart(ctx.target, ctx.cache_dir, ctx.use_cache)
    if early.warning:
        ctx.facts.add_error("target", early.warning)
    script = data_dir("probes") / PROBE
    try:
        data = parse_json_probe(ctx.target, script, early.running.result(PROBE_TIMEOUT))
    except TargetError as exc:
        raise CollectorError(str(exc)) from None
    packages = data.get("packages")
    if not isinstance(packages, dict):
        raise CollectorError(f"probe {PROBE} reported no package list")

    for item in data.get("errors") or []:
        if isinstance(item, dict) and item.get("error"):
            ctx.facts.add_error(str(item.get("collector") or "target_env"), str(item["error"]))
    for key in SCRATCH_KEYS:
        if key in data:
            ctx.scratch[key] = data[key]

    target = dict(ctx.facts.target or {})
    target.update(data.get("target") or {})
    for key, value in (ctx.facts.target or {}).items():  # how the target was chosen stays as given
        if key in ("kind", "python", "chosen_by"):
            target[key] = value
    return {
        "target": target,
        "host": data.get("host"),
        "packages": {name: _package(pkg) for name, pkg in packages.items() if isinstance(pkg, dict)},
        "cutedsl": data.get("cutedsl"),
        "env": data.get("env") if isinstance(data.get("env"), dict) else None,
    }


def _package(pkg: dict[str, Any]) -> dict[str, Any]:
    """Tracked packages keep their integrity fields; the rest carry only name, version and location."""
    if "integrity" in pkg or "cuda" in pkg:
        return dict(pkg)
    return {key: pkg.get(key) for key in BASE_FIELDS}


COLLECTOR = Collector("target", run, timeout=PROBE_TIMEOUT + 5)
