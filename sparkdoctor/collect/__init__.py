"""Collectors: each observes one subject and returns Facts fields; they run concurrently.

A collector is a module-level `Collector(name, needs, run)`. `run(ctx)` returns a dict of Facts
field updates. If it raises or outlives its timeout, its fields stay None (unknown), the error lands
in facts.errors, and the others go on: a broken box is exactly the box this tool is for.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sparkdoctor.facts import Facts
from sparkdoctor.target import Target


@dataclass
class Context:
    target: Target
    facts: Facts  # filled as collectors finish; a collector may read what its `needs` produced
    arch_override: str | None = None
    constraint_files: list[Path] = field(default_factory=list)
    cache_dir: Path | None = None
    use_cache: bool = True
    kernels: bool = True
    timeout: float = 20.0  # per collector; subprocesses inside use their own, shorter ones
    progress: Callable[[str], None] | None = None
    # Raw observations one collector hands to those that need it (e.g. the target's ptxas
    # candidates and pip-config constraint files); not part of Facts.
    scratch: dict[str, Any] = field(default_factory=dict)

    def target_env(self, name: str) -> str | None:
        """A variable as the target sees it: the target probe's view, else this process's environment."""
        env = self.facts.env
        value = env[name] if env is not None and name in env else os.environ.get(name)
        return value or None


@dataclass(frozen=True)
class Collector:
    name: str
    run: Callable[[Context], dict[str, Any]]
    needs: tuple[str, ...] = ()
    timeout: float | None = None  # overrides Context.timeout


class CollectorError(RuntimeError):
    """A collector's own one-line explanation of why it could not observe its subject."""


def run_collectors(ctx: Context, collectors: list[Collector]) -> Facts:
    """Run collectors as their needs allow; write their fields into ctx.facts; never raise."""
    facts = ctx.facts
    pending = {c.name: c for c in collectors}
    done: set[str] = set()
    running: dict[str, tuple[threading.Thread, dict[str, Any], float, float]] = {}
    lock = threading.Lock()

    def start(c: Collector) -> None:
        box: dict[str, Any] = {}

        def body() -> None:
            try:
                box["result"] = c.run(ctx)
            except CollectorError as exc:
                box["error"] = str(exc)
            except Exception as exc:  # a bug or a surprise in one collector must not sink the check
                box["error"] = f"{type(exc).__name__}: {exc}"

        # daemon: a call that hangs inside a C library (NVML) cannot keep the process alive
        t = threading.Thread(target=body, name=f"collect-{c.name}", daemon=True)
        limit = c.timeout if c.timeout is not None else ctx.timeout
        running[c.name] = (t, box, time.monotonic(), limit)
        t.start()

    while pending or running:
        for name, c in list(pending.items()):
            if all(n in done or n not in {x.name for x in collectors} for n in c.needs):
                del pending[name]
                start(c)
        if not running:  # needs that can never be met (a cycle): report rather than spin
            for name in pending:
                facts.add_error(name, "collector waits on a collector that never ran")
            break
        time.sleep(0.002)
        for name, (t, box, started, limit) in list(running.items()):
            elapsed = time.monotonic() - started
            if not t.is_alive() or elapsed > limit:
                del running[name]
                done.add(name)
                facts.timings_ms[name] = round(elapsed * 1000, 1)
                with lock:
                    if t.is_alive():
                        facts.add_error(name, f"timed out after {limit:g}s")
                    elif "error" in box:
                        facts.add_error(name, box["error"])
                    else:
                        for key, value in (box.get("result") or {}).items():
                            current = getattr(facts, key)
                            if isinstance(current, dict) and isinstance(value, dict):
                                current.update(value)  # e.g. kernels/capabilities from several collectors
                            else:
                                setattr(facts, key, value)
                if ctx.progress:
                    ctx.progress(name)
    return facts
