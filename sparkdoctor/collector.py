"""What a collector is: `Collector(name, run, needs, timeout)` and the `Context` its `run(ctx)` reads.

At the base, so that the collectors outside sparkdoctor/collect/ (the kernel probes: sparkdoctor/kernels/) are
collectors without importing the package that runs them (sparkdoctor/collect/__init__.py: run_collectors).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import Target


@dataclass
class Context:
    target: Target
    facts: Facts  # filled as collectors finish; a collector may read what its `needs` produced
    arch_override: str | None = None
    constraint_files: list[Path] = field(default_factory=list)
    cache_dir: Path | None = None
    use_cache: bool = True
    kernels: bool = True
    timeout: float = 20.0  # per collector without its own; subprocesses inside use their own, shorter ones
    deadline: float | None = None  # time.monotonic() by which the whole run must be done
    budget: str = "the run's time budget, --timeout"  # what set the deadline, as a message names it
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
    run: Callable[[Context], dict[str, object]]
    needs: tuple[str, ...] = ()
    timeout: float | None = None  # overrides Context.timeout
