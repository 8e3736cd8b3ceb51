"""Launching the target probe (probes/target_env/), the long pole of a warm `check`; for a local
check it also runs the capabilities probe in the same interpreter.

The console entry point has usually started it already (sparkdoctor.targets.early, which also builds
its command line); the target's start_script takes such a child when it is exactly the command, with
exactly the environment, it would start, and starts its own otherwise.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from sparkdoctor.proc import ProcResult, Running
from sparkdoctor.targets import early
from sparkdoctor.targets.local import Target, Wrapped, probe_entry

PROBE = early.TARGET


@dataclass
class Prestarted:
    """A target probe already running, and the warning its arguments came with; `capabilities`: its answer
    carries the capabilities probe's too (several collectors then read the one result)."""

    running: Running
    warning: str | None
    capabilities: bool = False


class Shared(Wrapped):
    """A Running that several readers wait for: the first collects it, the others get the same result."""

    def __init__(self, inner: Running):
        super().__init__(inner)
        self._lock = threading.Lock()
        self._result: ProcResult | None = None

    def result(self, timeout: float) -> ProcResult:
        with self._lock:
            if self._result is None:
                self._result = self.inner.result(timeout)
            return self._result


def _root(cache_root: Path | None) -> str | None:
    return None if cache_root is None else str(cache_root)


def _local(target: Target) -> bool:
    return target.describe().get("kind") == "python"


def probe_args(target: Target, cache_root: Path | None, use_cache: bool) -> tuple[list[str], str | None]:
    python = str(target.describe().get("python") or "")
    return early.target_probe_args(python, _root(cache_root), use_cache, _local(target))


def probe_env(target: Target, cache_root: Path | None) -> dict[str, str] | None:
    """early.probe_env for this target: a local probe's compiled modules in our cache dir, none for a container."""
    return early.probe_env(_root(cache_root), _local(target))


def prestart(target: Target, cache_root: Path | None, use_cache: bool, capabilities: bool = False) -> Prestarted:
    """The target probe, running: the entry point's early child when it is exactly this command
    (sparkdoctor.targets.early), else a new one. `capabilities` (local targets): it also answers for
    the capabilities probe, in the same interpreter."""
    args, warning = probe_args(target, cache_root, use_cache)
    python = str(target.describe().get("python") or "")
    both = capabilities and _local(target)
    if both:
        args = early.with_capabilities(args, python, _root(cache_root), use_cache)
    running = target.start_script(probe_entry(PROBE), args, env=probe_env(target, cache_root))
    return Prestarted(Shared(running) if both else running, warning, capabilities=both)
