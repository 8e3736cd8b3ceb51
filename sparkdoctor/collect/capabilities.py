"""Static capabilities of the target's FlashInfer and vLLM, read from their installed files.

probes/capabilities/ runs under the target's interpreter and reads source files (no import of
either package: that would cost seconds and may crash). Facts: capabilities = {id: {"value",
"evidence"}}; a package that is not installed contributes no ids, one whose layout the rules do
not recognise gives value None. The probe keeps derived facts in a per-interpreter cache file
(revalidated by file size + mtime), so a warm run only stats a few files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkdoctor.collect import Collector, CollectorError, Context
from sparkdoctor.target.local import TargetError, parse_json_probe, probe_entry
from sparkdoctor.target.probe import (
    CAPABILITIES,
    Prestarted,
    capabilities_cache_file,
    probe_env,
)

PROBE_TIMEOUT = 15.0
PRESTART_KEY = "capabilities_probe_prestarted"


def run(ctx: Context) -> dict[str, Any]:
    script = probe_entry(CAPABILITIES)
    early = ctx.scratch.pop(PRESTART_KEY, None)
    try:
        if isinstance(early, Prestarted):  # started by the entry point with the same interpreter and cache
            result = early.running.result(PROBE_TIMEOUT)
        else:
            cache = cache_file(ctx)
            args = ["--cache", str(cache)] if cache is not None else []
            # its compiled modules kept in our cache dir, as the target probe's (sparkdoctor.target.probe)
            result = ctx.target.run_script(script, args, PROBE_TIMEOUT, env=probe_env(ctx.target, ctx.cache_dir))
        data = parse_json_probe(ctx.target, script, result)
    except TargetError as exc:
        raise CollectorError(str(exc)) from None
    caps = data.get("capabilities")
    if not isinstance(caps, dict):
        raise CollectorError("capabilities probe printed no 'capabilities' object")
    return {"capabilities": caps}


def cache_file(ctx: Context) -> Path | None:
    who = str((ctx.target.describe() or {}).get("python") or ctx.target.describe())
    return capabilities_cache_file(Path(ctx.cache_dir) if ctx.cache_dir is not None else None, who, ctx.use_cache)


# Reads installed files only: runs beside the target probe, not after it.
COLLECTOR = Collector("capabilities", run, timeout=20)
