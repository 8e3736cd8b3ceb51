"""Launching the target probe (probes/target_env/): the long pole of a warm `check`.

Kept free of heavy imports (no typer, rich or packaging) so that `sparkdoctor check` can start the
probe at the top of the process and import everything else while the target works.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from sparkdoctor.locations import cache_dir
from sparkdoctor.proc import Running
from sparkdoctor.target.local import (
    Target,
    TargetError,
    probe_entry,
    resolve_python_target,
)

PROBE = "target_env"
# A cold run hashes ~0.7 GB on a full vLLM venv (2-3 s here). On a slow disk the probe stops hashing
# at this budget, reports the rest as unverified and goes on from the cache next time, rather than
# losing every package fact to the timeout.
HASH_BUDGET = 8.0


@dataclass
class Prestarted:
    """A probe already running for `python`, with or without the hash cache."""

    running: Running
    warning: str | None
    python: str
    use_cache: bool


def cache_file(cache_root: Path, python: str) -> Path:
    """One hash cache per interpreter: two targets never share (or clobber) entries."""
    return cache_root / "hashes" / f"{hashlib.sha256(python.encode()).hexdigest()[:16]}.json"


def probe_args(target: Target, cache_root: Path | None, use_cache: bool) -> tuple[list[str], str | None]:
    budget = ["--hash-budget", str(HASH_BUDGET)]
    if cache_root is None:
        return budget, None
    python = str(target.describe().get("python") or "")
    path = cache_file(cache_root, python)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return budget, f"hash cache folder {path.parent}: {exc.strerror or exc}; hashing without a cache"
    # The parsed RECORDs (probes/target_env/targetenv_records.py), for a local interpreter only: a
    # container's caches travel in and out with each probe, and this one is the largest.
    records = ["--records", str(path) + ".records"] if target.describe().get("kind") == "python" else []
    return budget + ["--cache", str(path)] + records + ([] if use_cache else ["--no-cache"]), None


def probe_env(target: Target, cache_root: Path | None) -> dict[str, str] | None:
    """Where a local probe keeps its compiled modules (our cache dir, never the target or the probe
    folder); none for a container, whose file system does not hold our cache dir."""
    if cache_root is None or target.describe().get("kind") != "python":
        return None
    return {"SPARKDOCTOR_PROBE_PYCACHE": str(cache_root / "pycache")}


def prestart(target: Target, cache_root: Path | None, use_cache: bool) -> Prestarted:
    args, warning = probe_args(target, cache_root, use_cache)
    running = target.start_script(probe_entry(PROBE), args, env=probe_env(target, cache_root))
    return Prestarted(running, warning, str(target.describe().get("python") or ""), use_cache)


def prestart_from_argv(argv: list[str]) -> Prestarted | None:
    """Start the probe for `sparkdoctor check ...` before the CLI framework is even imported.

    Reads only the unambiguous cases (--python X / --python=X, --no-cache); anything else returns
    None and the collector starts the probe itself. The CLI later checks that what typer parsed
    names the same interpreter and cache mode, and discards this probe otherwise.
    """
    if len(argv) < 2 or argv[1] != "check":
        return None
    args = argv[2:]
    if any(a in ("--help", "-h") or a.startswith(("--facts", "--container")) for a in args):
        return None  # a snapshot, or a container (found through its CLI, after parsing)
    python = None
    for i, a in enumerate(args):
        if a == "--python" and i + 1 < len(args):
            python = args[i + 1]
        elif a.startswith("--python="):
            python = a.split("=", 1)[1]
    try:
        target = resolve_python_target(python)
    except TargetError:
        return None  # the CLI reports it properly, after parsing
    return prestart(target, cache_dir(), use_cache="--no-cache" not in args)


CAPABILITIES = "capabilities"


def capabilities_cache_file(cache_root: Path | None, python: str, use_cache: bool) -> Path | None:
    """The capabilities probe's cache of derived facts, one per interpreter (None: no cache)."""
    if cache_root is None or not use_cache:
        return None
    return cache_root / CAPABILITIES / f"{hashlib.sha256(python.encode()).hexdigest()[:16]}.json"


def prestart_capabilities(target: Target, cache_root: Path | None, use_cache: bool) -> Prestarted:
    """The capabilities probe (probes/capabilities/), started: it reads installed files only, so it
    runs beside the target probe from the first moment, not after sparkdoctor's imports."""
    python = str(target.describe().get("python") or "")
    cache = capabilities_cache_file(cache_root, python, use_cache)
    args = ["--cache", str(cache)] if cache is not None else []
    running = target.start_script(probe_entry(CAPABILITIES), args, env=probe_env(target, cache_root))
    return Prestarted(running, None, python, use_cache)


EARLY: dict[str, Prestarted] = {}


def early_start() -> None:
    """Called first thing by the console entry point: the target probe, then the capabilities probe
    for the same interpreter."""
    started = prestart_from_argv(sys.argv)
    if started is not None:
        EARLY["target"] = started
        target = resolve_python_target(started.python)
        EARLY[CAPABILITIES] = prestart_capabilities(target, cache_dir(), started.use_cache)
