"""Collectors: each observes one subject and returns Facts fields; they run concurrently.

A collector is a module-level `Collector(name, needs, run)`. `run(ctx)` returns a dict of Facts
field updates. If it raises, outlives its timeout or returns a key Facts does not have, its fields
stay None (unknown), the error lands in facts.errors, and the others go on: a broken box is exactly
the box this tool is for. The run's deadline (Context.deadline, the user's --timeout) bounds every
collector: each gets min(its own limit, the time left), and one that cannot start in time is reported.
"""

from __future__ import annotations

import threading
import time
from dataclasses import fields

from sparkdoctor.collector import Collector, Context
from sparkdoctor.errors import TargetUnprobeable
from sparkdoctor.facts import Facts, scrub


class CollectorError(TargetUnprobeable, RuntimeError):
    """A collector's own one-line explanation of why it could not observe its subject."""

    code = "collector"


def run_collectors(ctx: Context, collectors: list[Collector]) -> Facts:
    """Run collectors as their needs allow; write their fields into ctx.facts; never raise."""
    facts = ctx.facts
    pending = {c.name: c for c in collectors}
    names = set(pending)
    done: set[str] = set()
    running: dict[str, tuple[threading.Thread, dict[str, object], float, float, bool]] = {}

    def start(c: Collector) -> None:
        box: dict[str, object] = {}

        def body() -> None:
            try:
                box["result"] = c.run(ctx)
            except CollectorError as exc:
                box["error"] = str(exc)
            except Exception as exc:  # a bug or a surprise in one collector must not sink the check
                box["error"] = f"{type(exc).__name__}: {exc}"

        # daemon: a call that hangs inside a C library cannot keep the process alive
        t = threading.Thread(target=body, name=f"collect-{c.name}", daemon=True)
        now = time.monotonic()
        limit = c.timeout if c.timeout is not None else ctx.timeout
        by_deadline = ctx.deadline is not None and ctx.deadline - now < limit
        if ctx.deadline is not None and by_deadline:
            limit = max(0.0, ctx.deadline - now)
        running[c.name] = (t, box, now, limit, by_deadline)
        t.start()

    while pending or running:
        if ctx.deadline is not None and time.monotonic() >= ctx.deadline:
            for name in pending:  # what could not start in time is unknown, and says why
                facts.add_error(name, f"not run: {ctx.budget.replace(', ', ' (', 1)}) ran out")
            pending.clear()
        for name, c in list(pending.items()):
            if all(n in done or n not in names for n in c.needs):
                del pending[name]
                start(c)
        if not running:  # needs that can never be met (a cycle): report rather than spin
            for name in pending:
                facts.add_error(name, "collector waits on a collector that never ran")
            break
        time.sleep(0.002)
        for name, (t, box, started, limit, by_deadline) in list(running.items()):
            elapsed = time.monotonic() - started
            if not t.is_alive() or elapsed > limit:
                del running[name]
                done.add(name)
                facts.timings_ms[name] = round(elapsed * 1000, 1)
                if t.is_alive():
                    why = f" ({ctx.budget})" if by_deadline else ""
                    facts.add_error(name, f"timed out after {limit:.3g}s{why}")
                elif "error" in box:
                    facts.add_error(name, str(box["error"]))
                else:
                    _merge(facts, name, box.get("result"))
                if ctx.progress:
                    ctx.progress(name)
    return facts


FACT_FIELDS = frozenset(f.name for f in fields(Facts)) - {"schema", "errors", "timings_ms"}


def _merge(facts: Facts, collector: str, result: object) -> None:
    """Write one collector's fields into facts; a result that is not {Facts field: value} is that
    collector's error, and none of it is kept (half a result would read as observed)."""
    if result is None:
        return
    if not isinstance(result, dict):
        facts.add_error(collector, f"collector returned {type(result).__name__}, not a dict of Facts fields")
        return
    unknown = sorted(str(k) for k in result if k not in FACT_FIELDS)
    if unknown:
        facts.add_error(collector, f"collector returned unknown Facts field(s): {', '.join(unknown)[:200]}")
        return
    try:  # a target's odd file names become printable text, here, once
        result = {key: scrub(value) for key, value in result.items()}
    except RecursionError:  # a probe's answer nested past Python's limit: that collector's error, never the run's
        facts.add_error(collector, "collector returned values nested too deeply to read")
        return
    for key, value in result.items():
        current = getattr(facts, key)
        if isinstance(current, dict) and isinstance(value, dict):
            current.update(value)  # e.g. kernels/capabilities from several collectors
        else:
            setattr(facts, key, value)
