"""Static capabilities of the target's FlashInfer and vLLM, read from their installed files.

probes/capabilities/ runs under the target's interpreter and reads source files (no import of
either package: that would cost seconds and may crash). Facts: capabilities = {id: {"value",
"evidence"}}; a package that is not installed contributes no ids, one whose layout the rules do
not recognise gives value None. The probe keeps derived facts in a per-interpreter cache file
(revalidated by file size + mtime), so a warm run only stats a few files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sparkdoctor.collect import Collector, CollectorError, Context
from sparkdoctor.target.local import TargetError, probe_entry, run_json_probe

PROBE_TIMEOUT = 15.0


def run(ctx: Context) -> dict[str, Any]:
    args: list[str] = []
    cache = cache_file(ctx)
    if cache is not None:
        args = ["--cache", str(cache)]
    try:
        data = run_json_probe(ctx.target, probe_entry("capabilities"), args, PROBE_TIMEOUT)
    except TargetError as exc:
        raise CollectorError(str(exc)) from None
    caps = data.get("capabilities")
    if not isinstance(caps, dict):
        raise CollectorError("capabilities probe printed no 'capabilities' object")
    return {"capabilities": caps}


def cache_file(ctx: Context) -> Path | None:
    if ctx.cache_dir is None or not ctx.use_cache:
        return None
    who = str((ctx.target.describe() or {}).get("python") or ctx.target.describe())
    return Path(ctx.cache_dir) / "capabilities" / f"{hashlib.sha256(who.encode()).hexdigest()[:16]}.json"


# Reads installed files only: runs beside the target probe, not after it.
COLLECTOR = Collector("capabilities", run, timeout=20)
