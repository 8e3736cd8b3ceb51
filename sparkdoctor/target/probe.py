"""Launching the target probe (probes/target_env/), the long pole of a warm `check`, and the
capabilities probe beside it.

The console entry point has usually started both already (sparkdoctor.target.early, which also
builds their command lines); `prestart` takes such a child when it is exactly the command it would
start, and starts its own otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sparkdoctor.proc import Running
from sparkdoctor.target import early
from sparkdoctor.target.local import PythonTarget, Target, probe_entry

PROBE = early.TARGET
CAPABILITIES = early.CAPABILITIES
HASH_BUDGET = early.HASH_BUDGET


@dataclass
class Prestarted:
    """A probe already running for `python`, with or without the hash cache."""

    running: Running
    warning: str | None
    python: str
    use_cache: bool


def _root(cache_root: Path | None) -> str | None:
    return None if cache_root is None else str(cache_root)


def _local(target: Target) -> bool:
    return target.describe().get("kind") == "python"


def cache_file(cache_root: Path, python: str) -> Path:
    """One hash cache per interpreter: two targets never share (or clobber) entries."""
    return Path(early.hash_cache_file(str(cache_root), python))


def probe_args(target: Target, cache_root: Path | None, use_cache: bool) -> tuple[list[str], str | None]:
    python = str(target.describe().get("python") or "")
    return early.target_probe_args(python, _root(cache_root), use_cache, _local(target))


def probe_env(target: Target, cache_root: Path | None) -> dict[str, str] | None:
    """Where a local probe keeps its compiled modules (our cache dir, never the target or the probe
    folder); none for a container, whose file system does not hold our cache dir."""
    return early.probe_env(_root(cache_root), _local(target))


def _start(name: str, target: Target, args: list[str], env: dict[str, str] | None) -> Running:
    """Probe `name` running on `target`: the entry point's early child when it is exactly this command
    (sparkdoctor.target.early), else a new one."""
    script = probe_entry(name)
    if _local(target):
        python = str(target.describe().get("python") or "")
        started = early.take(name, early.script_argv(python, str(script), args))
        if started is not None and isinstance(target, PythonTarget):
            return target.adopt(started, script)
    return target.start_script(script, args, env=env)


def prestart(target: Target, cache_root: Path | None, use_cache: bool) -> Prestarted:
    args, warning = probe_args(target, cache_root, use_cache)
    running = _start(PROBE, target, args, probe_env(target, cache_root))
    return Prestarted(running, warning, str(target.describe().get("python") or ""), use_cache)


def capabilities_cache_file(cache_root: Path | None, python: str, use_cache: bool) -> Path | None:
    """The capabilities probe's cache of derived facts, one per interpreter (None: no cache)."""
    path = early.capabilities_cache_file(_root(cache_root), python, use_cache)
    return None if path is None else Path(path)


def prestart_capabilities(target: Target, cache_root: Path | None, use_cache: bool) -> Prestarted:
    """The capabilities probe (probes/capabilities/), started: it reads installed files only, so it
    runs beside the target probe from the start, not after sparkdoctor's imports."""
    python = str(target.describe().get("python") or "")
    args = early.capabilities_args(python, _root(cache_root), use_cache)
    running = _start(CAPABILITIES, target, args, probe_env(target, cache_root))
    return Prestarted(running, None, python, use_cache)
